"""Interactive explorers: ipywidgets controls that redraw a figure, and a static figure wherever widgets can't run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets
import matplotlib.pyplot as plt
from IPython.display import DisplayHandle, display
from matplotlib.figure import Figure

Draw = Callable[..., Figure]  # draw(**values) -> a new Figure for these control values


@dataclass
class Explorer:
    """A live explorer: its controls, the display its figure is shown in, and the values last drawn."""

    controls: dict[str, ipywidgets.ValueWidget]
    handle: DisplayHandle | None  # None when not shown (show=False)
    draw: Draw
    values: dict[str, Any]  # the control values of the figure on display
    redraws: int = 0  # how often a control change redrew the figure

    def redraw(self) -> Figure:
        """Draw the figure for the controls' current values and put it in place of the one on display."""
        self.values = {name: control.value for name, control in self.controls.items()}
        fig = self.draw(**self.values)
        if self.handle is not None:
            self.handle.update(fig)
        plt.close(fig)  # shown through the handle; the inline backend must not show it a second time
        self.redraws += 1
        return fig


def explore(draw: Draw, controls: Mapping[str, ipywidgets.ValueWidget], *, show: bool = True) -> Explorer:
    """Show `controls` and the figure draw(**their values); moving a control redraws the figure in place.

    The figure is an ordinary image output with a display id, not part of a widget: where no widget
    frontend runs (nbval, the autograder, a notebook rendered to HTML or on GitHub) the controls show as
    text and the figure for their initial values still shows. In JupyterLab, a control's change redraws
    it through `update_display`.
    """
    if not controls:
        raise ValueError("an explorer needs at least one control")
    explorer = Explorer(dict(controls), None, draw, {})
    values = {name: control.value for name, control in controls.items()}
    fig = draw(**values)
    explorer.values = values
    if show:
        display(ipywidgets.HBox(list(controls.values()), layout=ipywidgets.Layout(flex_flow="row wrap")))
        explorer.handle = display(fig, display_id=True)
    plt.close(fig)
    for control in controls.values():
        control.observe(lambda change: explorer.redraw(), names="value")
    return explorer


# ---------------------------------------------------------------------------------------------
# Notebook 01: a kernel on a datasheet roofline; move its size and watch the bound change

KERNEL_LABELS = {"matmul": "matmul (n, n) @ (n, n)", "gemv": "batched GEMV (b, 4096) @ (4096, 4096)"}
EXPLORER_SIZES = [2**k for k in range(15)]  # n or b: 1 ... 16384


def draw_kernel_roofline(device: str, dtype: str, kernel: str, size: int) -> Figure:
    """The roofline of `device` in `dtype` with one kernel of the given size on it, bound and time in the title."""
    from lecturelib import hardware, plots  # heavy (torch); imported when a figure is drawn

    if (device, dtype) not in hardware.PEAKS:  # e.g. the T4 has no bf16 tensor cores
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        ax.text(0.5, 0.5, f"{device} has no {dtype} peak in hardware.PEAKS", ha="center", va="center")
        ax.set_axis_off()
        return fig
    r = hardware.kernel_roofline(device, dtype, kernel, size)
    label = f"{'n' if kernel == 'matmul' else 'b'} = {size}"
    title = (f"{device}, {dtype}: {KERNEL_LABELS[kernel]}, {label}\n{r.bound}-bound, "
             f"≥ {r.time_s * 1e6:,.3g} µs at {r.attainable_flop_per_s / r.peak_flop_per_s:.1%} of peak")
    return plots.kernel_roofline_figure(r.peak_flop_per_s, r.peak_bytes_per_s,
                                        r.arithmetic_intensity_flop_per_byte, label=label, title=title)


def roofline_explorer(
    device: str = "h100-sxm", dtype: str = "bf16", kernel: str = "matmul", size: int = 64, *, show: bool = True
) -> Explorer:
    """Dropdowns for a device of hardware.PEAKS, a dtype and a kernel, a slider over its size: the point moves."""
    from lecturelib import hardware

    devices = sorted({key for key, _ in hardware.PEAKS if key in hardware.MEMORY_BANDWIDTH})
    dtypes = sorted({d for _, d in hardware.PEAKS})
    controls: dict[str, ipywidgets.ValueWidget] = {
        "device": ipywidgets.Dropdown(options=devices, value=device, description="device"),
        "dtype": ipywidgets.Dropdown(options=dtypes, value=dtype, description="dtype"),
        "kernel": ipywidgets.Dropdown(options=[(text, key) for key, text in KERNEL_LABELS.items()], value=kernel,
                                      description="kernel"),
        "size": ipywidgets.SelectionSlider(options=EXPLORER_SIZES, value=size, description="n or b"),
    }
    return explore(draw_kernel_roofline, controls, show=show)


# ---------------------------------------------------------------------------------------------
# Notebook 11: the napkin math of a training run at scale; move the model, the data, the GPUs, the link, the MFU

RUN_PARAMS = [125e6, 350e6, 1.3e9, 7e9, 13e9, 70e9, 175e9, 405e9]  # GPT-2 small ... Llama 3.1 405B
RUN_TOKENS = [1e9, 1e10, 1e11, 3e11, 1e12, 2e12, 15e12]  # ... GPT-3's 300B, Llama 2's 2T, Llama 3's 15T
RUN_GPUS = [2**k for k in range(15)]  # 1 ... 16,384


def _count_label(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n:g}"


def draw_training_run(n_params: float, tokens: float, n_gpus: int, link: str, mfu: float) -> Figure:
    """One step of the run (compute, gradient all-reduce; exposed or hidden) with its days, GPU-hours, energy, cost."""
    from lecturelib import comm, plots  # heavy (torch); imported when a figure is drawn

    run = comm.plan_run(n_params, tokens, n_gpus, link, mfu)
    hidden = min(run.comm_s, run.compute_s)  # what perfect overlap could hide behind the backward pass
    rows = {
        "every all-reduce exposed": {"compute": run.compute_s, "gradient all-reduce": run.comm_s},
        "overlapped with compute": {"compute": run.compute_s, "gradient all-reduce": run.comm_s - hidden},
    }
    title = (f"{_count_label(n_params)} parameters, {_count_label(tokens)} tokens, {n_gpus:,} H100 "
             f"({comm.LINKS[link].name}), MFU {mfu:.0%}\n{run.steps:,.0f} steps; {run.days:,.1f} days of compute, "
             f"{run.days_no_overlap:,.1f} with every all-reduce exposed\n{run.cost.gpu_hours:,.0f} GPU-hours, "
             f"{run.cost.energy_kwh / 1000:,.1f} MWh, \\${run.cost.usd / 1e6:,.2f} million at "
             f"\\${comm.H100_USD_PER_GPU_HOUR.value}/GPU-hour ({comm.H100_USD_PER_GPU_HOUR.date})")
    return plots.step_parts_figure({k: {p: v for p, v in row.items()} for k, row in rows.items()}, unit="s",
                                   title=title)


def training_run_explorer(n_params: float = 7e9, tokens: float = 2e12, n_gpus: int = 64, link: str = "100gbe",
                          mfu: float = 0.4, *, show: bool = True) -> Explorer:
    """Sliders for the model, the data and the GPUs, a dropdown for the link, a slider for MFU: one step, days, cost."""
    from lecturelib import comm

    controls: dict[str, ipywidgets.ValueWidget] = {
        "n_params": ipywidgets.SelectionSlider(options=[(_count_label(n), n) for n in RUN_PARAMS], value=n_params,
                                               description="parameters"),
        "tokens": ipywidgets.SelectionSlider(options=[(_count_label(t), t) for t in RUN_TOKENS], value=tokens,
                                             description="tokens"),
        "n_gpus": ipywidgets.SelectionSlider(options=RUN_GPUS, value=n_gpus, description="GPUs"),
        "link": ipywidgets.Dropdown(options=[(v.name, k) for k, v in comm.LINKS.items()], value=link,
                                    description="link"),
        "mfu": ipywidgets.FloatSlider(value=mfu, min=0.1, max=0.7, step=0.05, description="MFU"),
    }
    return explore(draw_training_run, controls, show=show)


# ---------------------------------------------------------------------------------------------
# Notebook 10: serving a model on a device: TTFT, TPOT, tokens/s, memory and the binding roof

EXPLORER_BATCHES = [2**k for k in range(11)]  # 1 ... 1024 sequences
EXPLORER_CONTEXTS = [128, 512, 1024, 2048, 4096, 8192, 32768]
EXPLORER_NEW_TOKENS = 256  # tokens generated after the prompt


def _seconds(t: float) -> str:
    """A duration with a unit that keeps 3 significant figures readable: 85.2 µs, 4.29 ms, 30.3 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:,.3g} {unit}" if t / scale < 1000 else f"{t / scale:,.0f} {unit}"
    return f"{t / 1e-9:.3g} ns"


def _number(x: float) -> str:
    """x with thousands separators from 100 on, 3 significant figures below."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def draw_serving(model: str, weight_dtype: str, kv_dtype: str, batch: int, context: int, device: str) -> Figure:
    """The roofline account of serving `batch` prompts of `context` tokens on `device`, with the numbers in the title."""
    from lecturelib import inference, plots  # heavy (torch); imported when a figure is drawn

    cfg, tied = inference.explorer_model(model)
    target = inference.SERVING_DEVICES[device]
    s = inference.serve(cfg, weight_dtype, kv_dtype, batch, context, EXPLORER_NEW_TOKENS, target, tied_embeddings=tied)
    roofs = [inference.decode_roofs(cfg, weight_dtype, kv_dtype, b, context + EXPLORER_NEW_TOKENS, target,
                                    tied_embeddings=tied) for b in EXPLORER_BATCHES]
    fits = "fits" if s.fits else "does NOT fit"
    title = (f"{model}, {weight_dtype} weights, {kv_dtype} KV, B = {batch}, {context:,} + {EXPLORER_NEW_TOKENS} tokens "
             f"on {target.name}\nTTFT {_seconds(s.ttft_s)} ({s.prefill_bound}-bound), TPOT {_seconds(s.tpot_s)} "
             f"({s.decode_bound}-bound): {_number(s.tokens_per_s_per_user)} tokens/s per user, "
             f"{_number(s.tokens_per_s_total)} in total; {_number(s.memory_bytes / 1e9)} GB, {fits}")
    return plots.serving_figure(EXPLORER_BATCHES, [c for c, _ in roofs], [m for _, m in roofs], batch=batch,
                                weight_bytes=s.weight_bytes, kv_bytes=s.kv_bytes,
                                capacity_bytes=target.memory_bytes, title=title)


def serving_explorer(
    model: str = "llama2-7b", weight_dtype: str = "bf16", kv_dtype: str = "bf16", batch: int = 1,
    context: int = 2048, device: str = "h100-sxm", *, show: bool = True,
) -> Explorer:
    """Dropdowns for a model, its weight and KV-cache formats, a batch, a prompt length and a device: the account redraws."""
    from lecturelib import inference

    controls: dict[str, ipywidgets.ValueWidget] = {
        "model": ipywidgets.Dropdown(options=inference.explorer_models(), value=model, description="model"),
        "weight_dtype": ipywidgets.Dropdown(options=list(inference.WEIGHT_BYTES_PER_PARAM), value=weight_dtype,
                                            description="weights"),
        "kv_dtype": ipywidgets.Dropdown(options=["fp32", "bf16", "fp8", "int8", "int4"], value=kv_dtype,
                                        description="KV cache"),
        "batch": ipywidgets.SelectionSlider(options=EXPLORER_BATCHES, value=batch, description="batch"),
        "context": ipywidgets.SelectionSlider(options=EXPLORER_CONTEXTS, value=context, description="prompt"),
        "device": ipywidgets.Dropdown(options=[(d.name, key) for key, d in inference.SERVING_DEVICES.items()],
                                      value=device, description="device"),
    }
    return explore(draw_serving, controls, show=show)



