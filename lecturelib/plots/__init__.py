"""The notebooks' figures, by topic, on one small vocabulary (`vocab`: input checks and units; the shapes every topic
draws: `sweep`, `roof` on a `log_grid`, `stacked_bars`, `grouped_bars`, `measured_vs_predicted`, `before_after`,
`annotate_points`, `mark_sizes`; and `log_axes`, `label_axes`, `finish`, `finish_panels` for an axes' scales, labels,
grid and legend). Each function returns a matplotlib Figure and draws measured points against the prediction they
confront:

- `hierarchy`: notebook 01 (bandwidth and latency against working set, rooflines);
- `flops`: notebooks 00, 02, 03, 04 (loss curves, matmul throughput and tiles, softmax and attention, a GPT's FLOPs);
- `training`: notebooks 05, 06, 08 (a step's memory, data loading and transfers, training curves);
- `profiling`: notebook 09 (a trace's timeline, operators on the roofline, memory over time, before and after);
- `serving`: notebooks 07, 10, 11 (quantization error, decode and serving, all-reduce and a DDP step);
- `compression`: notebook 12 (sparse products, pruning, distillation).

A new figure is a few lines: draw with the vocabulary (`sweep(ax, xs, {"measured": ys})`, `log_axes(ax, 2)`), then
`return finish(fig, ax, xlabel, ylabel, title)`.
"""

from lecturelib.plots.hierarchy import (
    bandwidth_sweep_figure, kernel_roofline_figure, latency_sweep_figure, roofline_figure,
)
from lecturelib.plots.flops import (
    attention_scaling_figure, fixed_cost_figure, flop_split_figure, loss_curves_figure, model_split_figure,
    relative_gap_figure, step_share_figure, throughput_figure, tile_traffic_figure,
)
from lecturelib.plots.training import (
    MEMORY_LABEL_CHARS, epoch_seconds_figure, h2d_bandwidth_figure, loader_progress_figure, loader_throughput_figure,
    memory_stack_figure, peak_comparison_figure, step_curves_figure, timeline_figure,
)
from lecturelib.plots.profiling import (
    Span, VERDICT_COLORS, before_after_figure, memory_timeline_figure, op_roofline_figure, trace_figure,
)
from lecturelib.plots.serving import (
    allreduce_sweep_figure, decode_batch_figure, decode_roofs_figure, outlier_error_figure, serving_figure,
    sqnr_vs_bits_figure, step_parts_figure, throughput_latency_figure,
)
from lecturelib.plots.compression import (
    compression_figure, distillation_accuracy_figure, distillation_temperature_figure, pruning_accuracy_figure,
    pruning_speed_figure, sparse_matmul_figure,
)
from lecturelib.plots.vocab import GB, binary_bytes, finish, label_axes
