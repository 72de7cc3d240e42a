"""Tests of lecturelib.quant: PyTorch's own quantized tensors and observers are the oracle."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from lecturelib import quant
from lecturelib.configs import ModelConfig
from lecturelib.models import GPT

# torch.quantize_per_tensor / quantize_per_channel warn that quantized dtypes are deprecated (torch 2.13,
# pytorch/pytorch#184982); they are still the reference implementation of the affine mapping.
pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")

QINT8 = (-128, 127)
QUINT8 = (0, 255)


def observer_qparams(x: torch.Tensor, dtype: torch.dtype) -> tuple[float, int]:
    """PyTorch's MinMaxObserver (per-tensor affine) on x."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import MinMaxObserver

        observer = MinMaxObserver(dtype=dtype, qscheme=torch.per_tensor_affine)
        observer(x)
        scale, zero_point = observer.calculate_qparams()
    return float(scale), int(zero_point)


def near_tie(value: float, margin: float = 1e-3) -> bool:
    """Whether value is within `margin` of a half-integer, where float32 and float64 may round apart."""
    return abs(abs(value - math.floor(value)) - 0.5) < margin


finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)


# ---------------------------------------------------------------------------------------------
# int_range


def test_int_range_known_types():
    assert quant.int_range(8) == (-128, 127)  # torch.qint8
    assert quant.int_range(8, signed=False) == (0, 255)  # torch.quint8
    assert quant.int_range(4) == (-8, 7)
    assert quant.int_range(1, signed=False) == (0, 1)
    info = torch.iinfo(torch.int16)
    assert quant.int_range(16) == (info.min, info.max)


@pytest.mark.parametrize("bits", [0, 33, 8.0, True])
def test_int_range_rejects_bad_bits(bits):
    with pytest.raises(ValueError):
        quant.int_range(bits)


# ---------------------------------------------------------------------------------------------
# affine_qparams against MinMaxObserver


def test_affine_qparams_worked_ties_round_half_to_even():
    # scale = 127.5 / 255 = 0.5 exactly; x_min / scale = -2.5 and -3.5 are exact ties
    assert quant.affine_qparams(-1.25, 126.25, 0, 255) == (0.5, 2)  # round(-2.5) = -2
    assert quant.affine_qparams(-1.75, 125.75, 0, 255) == (0.5, 4)  # round(-3.5) = -4
    assert observer_qparams(torch.tensor([-1.25, 126.25]), torch.quint8) == (0.5, 2)
    assert observer_qparams(torch.tensor([-1.75, 125.75]), torch.quint8) == (0.5, 4)


def test_affine_qparams_widens_the_range_to_include_zero():
    # all positive: x_min becomes 0, so the zero point is qmin
    assert quant.affine_qparams(2.0, 255.0, 0, 255) == (1.0, 0)
    assert quant.affine_qparams(2.0, 255.0, -128, 127) == (1.0, -128)
    # all negative: x_max becomes 0, the zero point is qmax
    assert quant.affine_qparams(-255.0, -3.0, 0, 255) == (1.0, 255)


def test_affine_qparams_zero_range_uses_eps_like_observer():
    scale, zero_point = quant.affine_qparams(0.0, 0.0, 0, 255)
    assert scale == torch.finfo(torch.float32).eps
    assert (scale, zero_point) == observer_qparams(torch.zeros(4), torch.quint8)


@given(st.lists(finite, min_size=2, max_size=20), st.sampled_from([torch.qint8, torch.quint8]))
def test_affine_qparams_match_min_max_observer(values, dtype):
    x = torch.tensor(values, dtype=torch.float32)
    assume(float(x.max()) > float(x.min()) or float(x.min()) != 0.0)
    qmin, qmax = QINT8 if dtype == torch.qint8 else QUINT8
    scale, zero_point = quant.affine_qparams(float(x.min()), float(x.max()), qmin, qmax)
    ref_scale, ref_zero_point = observer_qparams(x, dtype)
    assert math.isclose(scale, ref_scale, rel_tol=1e-6)  # the observer works in float32
    assume(not near_tie(min(float(x.min()), 0.0) / scale))  # float32 and float64 may round a near-tie apart
    assert zero_point == ref_zero_point
    assert isinstance(zero_point, int)


@given(finite, finite, st.sampled_from([QINT8, QUINT8, (-8, 7), (0, 15)]))
def test_affine_qparams_zero_is_exact(a, b, q_range):
    qmin, qmax = q_range
    x_min, x_max = min(a, b), max(a, b)
    scale, zero_point = quant.affine_qparams(x_min, x_max, qmin, qmax)
    assert qmin <= zero_point <= qmax
    zero = torch.zeros(1)
    assert float(quant.dequantize(quant.quantize(zero, scale, zero_point, qmin, qmax), scale, zero_point)) == 0.0


def test_affine_qparams_rejects_bad_input():
    with pytest.raises(ValueError):
        quant.affine_qparams(1.0, -1.0, 0, 255)
    with pytest.raises(ValueError):
        quant.affine_qparams(-1.0, 1.0, 5, 5)


# ---------------------------------------------------------------------------------------------
# symmetric_scale


def test_symmetric_scale_values():
    assert quant.symmetric_scale(127.0, 127) == 1.0
    assert quant.symmetric_scale(2.0, 127) == 2.0 / 127
    assert quant.symmetric_scale(0.0, 127) == torch.finfo(torch.float32).eps


def test_symmetric_scale_differs_from_pytorch_full_range_by_127_5_over_127():
    # PyTorch's per_tensor_symmetric observer divides by (qmax - qmin) / 2 = 127.5 and uses [-128, 127]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import MinMaxObserver

        observer = MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
        observer(torch.tensor([-1.0, 2.0]))
        ref_scale, ref_zero_point = observer.calculate_qparams()
    assert int(ref_zero_point) == 0
    assert math.isclose(quant.symmetric_scale(2.0, 127) * 127 / 127.5, float(ref_scale), rel_tol=1e-6)


# ---------------------------------------------------------------------------------------------
# quantize / dequantize against torch.quantize_per_tensor


def test_quantize_rounds_half_to_even_and_clamps():
    x = torch.tensor([-1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 100.0, -100.0])
    # x / 0.5 = -2.5, -1.5, -0.5, 0.5, 1.5, 2.5 -> -2, -2, -0, 0, 2, 2; then clamped to [-8, 7]
    assert quant.quantize(x, 0.5, 0, -8, 7).tolist() == [-2, -2, 0, 0, 2, 2, 7, -8]
    assert quant.quantize(x, 0.5, 0, -8, 7).dtype == torch.int32


def test_dequantize_is_float32_affine():
    q = torch.tensor([0, 3, 255], dtype=torch.int32)
    assert torch.equal(quant.dequantize(q, 0.5, 3), torch.tensor([-1.5, 0.0, 126.0]))
    assert quant.dequantize(q.to(torch.uint8), 0.5, 3).dtype == torch.float32


@given(
    st.lists(finite, min_size=1, max_size=64),
    st.floats(1e-3, 10.0),
    st.integers(-128, 127),
)
def test_quantize_matches_quantize_per_tensor(values, scale, zero_point):
    x = torch.tensor(values, dtype=torch.float32)
    scale = float(torch.tensor(scale, dtype=torch.float32))  # a float32 scale: both sides see the same one
    ref = torch.quantize_per_tensor(x, scale, zero_point, torch.qint8)
    ours = quant.quantize(x, scale, zero_point, *QINT8)
    # PyTorch's kernel rounds x·(1/scale) + zero_point in float32: on (near-)ties it can land one level away
    ties = torch.tensor([near_tie(v / scale) for v in x.tolist()])
    assert torch.equal(ours[~ties], ref.int_repr().int()[~ties])
    assert (ours - ref.int_repr().int()).abs().max() <= 1
    torch.testing.assert_close(quant.dequantize(ours[~ties], scale, zero_point), ref.dequantize()[~ties])


def test_quantize_matches_torchao_quantize_affine():
    from torchao.quantization import quant_primitives as primitives

    x = torch.randn(64, 33) * 3
    scale, zero_point = quant.affine_qparams(float(x.min()), float(x.max()), *QINT8)
    ref = primitives.quantize_affine(
        x, [64, 33], torch.tensor([scale]), torch.tensor([zero_point]), torch.int8, *QINT8
    )  # one block = the whole tensor
    ours = quant.quantize(x, scale, zero_point, *QINT8)
    assert (ours - ref.int()).abs().max() <= 1  # torchao multiplies by 1/scale instead of dividing
    assert (ours != ref.int()).float().mean() < 1e-3


@given(st.lists(finite, min_size=2, max_size=64), st.sampled_from([QINT8, QUINT8, (-8, 7)]))
def test_round_trip_error_at_most_half_a_step_inside_the_range(values, q_range):
    x = torch.tensor(values, dtype=torch.float32)
    scale, zero_point = quant.affine_qparams(float(x.min()), float(x.max()), *q_range)
    x_hat = quant.dequantize(quant.quantize(x, scale, zero_point, *q_range), scale, zero_point)
    # half a step, plus float32 rounding of x / scale and of the product
    assert float((x - x_hat).abs().max()) <= scale / 2 * (1 + 1e-5) + 1e-6 * float(x.abs().max())


def test_clamping_bounds_the_output_range():
    x = torch.linspace(-10, 10, 101)
    q = quant.quantize(x, 0.1, 0, -8, 7)
    assert int(q.min()) == -8 and int(q.max()) == 7
    x_hat = quant.dequantize(q, 0.1, 0)
    assert math.isclose(float(x_hat.min()), -0.8, rel_tol=1e-6) and math.isclose(float(x_hat.max()), 0.7, rel_tol=1e-6)


# ---------------------------------------------------------------------------------------------
# per-channel, against PerChannelMinMaxObserver and torch.quantize_per_channel


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_per_channel_qparams_match_observer(axis):
    torch.manual_seed(0)
    w = torch.randn(6, 10) * torch.linspace(0.1, 3.0, 6).unsqueeze(1)
    ch_axis = axis % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import PerChannelMinMaxObserver

        observer = PerChannelMinMaxObserver(ch_axis=ch_axis, dtype=torch.qint8, qscheme=torch.per_channel_affine)
        observer(w)
        ref_scales, ref_zero_points = observer.calculate_qparams()
    scales, zero_points = quant.per_channel_qparams(w, axis, *QINT8)
    assert scales.shape == zero_points.shape == (w.shape[ch_axis],)
    assert scales.dtype == torch.float32 and zero_points.dtype == torch.int64
    torch.testing.assert_close(scales, ref_scales, rtol=1e-6, atol=0)
    assert torch.equal(zero_points, ref_zero_points.long())

    ref = torch.quantize_per_channel(w, ref_scales, ref_zero_points, ch_axis, torch.qint8)
    ours = quant.quantize_per_channel(w, scales, zero_points, axis, *QINT8)
    assert (ours - ref.int_repr().int()).abs().max() <= 1  # near-ties only (see the per-tensor test)
    assert (ours != ref.int_repr().int()).float().mean() < 0.02
    x_hat = quant.dequantize_per_channel(ours, scales, zero_points, axis)
    assert float((x_hat - w).abs().max()) <= float(scales.max()) / 2 * (1 + 1e-5)


def test_per_channel_qparams_on_3d_weights():
    w = torch.arange(24.0).reshape(2, 3, 4) - 5  # channel c of axis 1 spans w[:, c, :]
    scales, zero_points = quant.per_channel_qparams(w, 1, 0, 255)
    expected = [quant.affine_qparams(float(w[:, c].min()), float(w[:, c].max()), 0, 255) for c in range(3)]
    assert scales.tolist() == pytest.approx([s for s, _ in expected], rel=1e-6)
    assert zero_points.tolist() == [z for _, z in expected]


def test_per_channel_beats_per_tensor_with_outlier_channels():
    torch.manual_seed(0)
    w = torch.randn(64, 128) * 0.02
    w[:2] *= 50  # two outlier output channels
    per_tensor = quant.mse(w, quant.fake_quantize(w, 8))
    per_channel = quant.mse(w, quant.fake_quantize(w, 8, per_channel_axis=0))
    assert per_tensor > 10 * per_channel


# ---------------------------------------------------------------------------------------------
# error metrics


def test_sqnr_db_and_mse_values():
    x = torch.tensor([3.0, 4.0])
    x_hat = torch.tensor([3.0, 3.0])
    assert quant.mse(x, x_hat) == 0.5  # (0 + 1) / 2
    assert math.isclose(quant.sqnr_db(x, x_hat), 10 * math.log10(25.0))  # Σx² = 25, Σe² = 1
    assert quant.sqnr_db(x, x) == math.inf


def test_sqnr_grows_about_6_db_per_bit():
    torch.manual_seed(0)
    x = torch.rand(100_000) * 2 - 1  # uniform on [-1, 1]: crest factor √3
    sqnrs = [quant.sqnr_db(x, quant.fake_quantize(x, bits)) for bits in range(4, 13)]
    slopes = [b - a for a, b in zip(sqnrs, sqnrs[1:])]
    assert all(abs(s - quant.DB_PER_BIT) < 0.3 for s in slopes)
    assert abs(sqnrs[4] - quant.uniform_sqnr_db(8, math.sqrt(3))) < 0.3  # 8 bits: 6.02·8 + 0 dB-ish


def test_uniform_sqnr_db_full_scale_sine_is_6_02b_plus_1_76():
    # the textbook formula for a full-scale sine (crest factor √2), 2^b levels ≈ 2^b − 1 for large b
    textbook = quant.DB_PER_BIT * 16 + 10 * math.log10(1.5)  # 6.02·b + 1.76 dB
    assert abs(quant.uniform_sqnr_db(16, math.sqrt(2)) - textbook) < 1e-3


# ---------------------------------------------------------------------------------------------
# int8_matmul


def test_int8_matmul_widens_before_subtracting_the_zero_point():
    a_q = torch.full((1, 4), 127, dtype=torch.int8)
    b_q = torch.full((4, 1), 127, dtype=torch.int8)
    # (127 + 128) * (127 + 128) * 4 = 260100; in int8, 127 - (-128) would wrap to -1
    assert quant.int8_matmul(a_q, 1.0, -128, b_q, 1.0, -128).tolist() == [[260100.0]]


def test_int8_matmul_equals_dequantized_float_matmul():
    torch.manual_seed(0)
    a_q = torch.randint(-128, 128, (5, 7), dtype=torch.int8)
    b_q = torch.randint(-128, 128, (7, 3), dtype=torch.int8)
    got = quant.int8_matmul(a_q, 0.05, 3, b_q, 0.01, -2)
    ref = quant.dequantize(a_q, 0.05, 3).double() @ quant.dequantize(b_q, 0.01, -2).double()
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), ref, rtol=1e-6, atol=1e-6)


def test_int8_matmul_matches_torch_int_mm():
    torch.manual_seed(1)
    a_q = torch.randint(-128, 128, (32, 64), dtype=torch.int8)
    b_q = torch.randint(-128, 128, (64, 32), dtype=torch.int8)
    assert torch.equal(quant.int8_matmul(a_q, 1.0, 0, b_q, 1.0, 0), torch._int_mm(a_q, b_q).float())


def test_int8_matmul_accumulates_exactly_beyond_float32_integers():
    k = 4096
    a_q = torch.full((1, k), 127, dtype=torch.int8)
    b_q = torch.full((k, 1), 127, dtype=torch.int8)
    b_q[0, 0] = 126
    exact = 255 * 255 * (k - 1) + 255 * 254  # 266342145: odd and above 2^24, so not a float32
    assert int((a_q.to(torch.int32) + 128) @ (b_q.to(torch.int32) + 128)) == exact
    # the int32 sum is exact; only the final conversion to float32 rounds it (to a multiple of 16 here)
    assert quant.int8_matmul(a_q, 1.0, -128, b_q, 1.0, -128).item() == float(torch.tensor(exact, dtype=torch.float32))


def test_int8_matmul_refuses_a_possible_overflow():
    a_q = torch.full((1, 40_000), 127, dtype=torch.int8)
    b_q = torch.full((40_000, 1), 127, dtype=torch.int8)
    with pytest.raises(OverflowError):
        quant.int8_matmul(a_q, 1.0, -128, b_q, 1.0, -128)


# ---------------------------------------------------------------------------------------------
# storage


def test_quantized_weight_bytes_llama2_7b_4bit():
    n = 6_738_415_616  # Llama-2-7B parameters (lecturelib.params)
    # 4-bit: n / 2 bytes; groups of 128 with an fp16 scale: n / 128 * 2 bytes
    assert quant.quantized_weight_bytes(n, 4, 128, 2) == 3_369_207_808 + 105_287_744
    assert quant.quantized_weight_bytes(n, 16, n, 0) == 2 * n  # bf16, no scales


def test_quantized_weight_bytes_rounds_up_bits_and_groups():
    assert quant.quantized_weight_bytes(10, 3, 4, 2) == 4 + 3 * 2  # ceil(30/8) = 4 bytes; ceil(10/4) = 3 groups
    assert quant.quantized_weight_bytes(1, 1, 1, 0) == 1


@given(st.integers(1, 10**12), st.sampled_from([2, 3, 4, 8]), st.sampled_from([32, 64, 128]), st.sampled_from([2, 4]))
def test_quantized_weight_bytes_bits_per_weight(n, bits, group, scale_bytes):
    total = quant.quantized_weight_bytes(n, bits, group, scale_bytes)
    per_weight_bits = bits + 8 * scale_bytes / group  # 4 + 16/128 = 4.125 bits for the classic int4 recipe
    assert abs(total * 8 - n * per_weight_bits) <= 8 + 8 * scale_bytes


def test_stored_bytes_plain_and_module_bytes_counts_shared_once():
    lin = torch.nn.Linear(8, 4)
    assert quant.stored_bytes(lin.weight) == 8 * 4 * 4
    assert quant.module_bytes(lin) == (8 * 4 + 4) * 4
    tied = torch.nn.Sequential(lin, torch.nn.Linear(8, 4))
    tied[1].weight = lin.weight
    assert quant.module_bytes(tied) == (8 * 4 + 4 + 4) * 4


# ---------------------------------------------------------------------------------------------
# torchao


TINY = ModelConfig(name="tiny", arch="llama", n_layer=1, n_head=2, n_kv_head=2, d_model=64, d_ff=128,
                   vocab_size=96, n_ctx=16)


def test_torchao_int8_weight_only_bytes_and_error():
    torch.manual_seed(0)
    model = GPT(TINY).eval()
    q = quant.torchao_quantize(model, "int8-weight-only")
    linear_weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    rows = sum(m.weight.shape[0] for m in model.modules() if isinstance(m, torch.nn.Linear))
    # every Linear: 4 bytes -> 1 byte per weight, plus per output row a float32 scale and an int8 zero point
    # (stored although it is 0: the mapping is symmetric)
    assert quant.module_bytes(model) - quant.module_bytes(q) == 3 * linear_weights - (4 + 1) * rows
    assert int(q.lm_head.weight.zero_point.abs().max()) == 0
    assert isinstance(model.lm_head.weight, torch.nn.Parameter)  # the original is untouched
    idx = torch.randint(0, TINY.vocab_size, (2, 8))
    with torch.no_grad():
        assert quant.sqnr_db(model(idx), q(idx)) > 30


def test_torchao_module_bytes_agree_with_torchao_helper():
    from torchao.utils import get_model_size_in_bytes

    torch.manual_seed(0)
    model = GPT(TINY).eval()
    for mode in quant.TORCHAO_MODES:
        q = quant.torchao_quantize(model, mode)
        assert quant.module_bytes(q) == get_model_size_in_bytes(q)


def test_compare_torchao_reports_every_mode_per_workload():
    torch.manual_seed(0)
    model = GPT(TINY).eval()
    examples = {"decode": torch.randint(0, TINY.vocab_size, (1, 1)), "prefill": torch.randint(0, TINY.vocab_size, (2, 8))}
    threads = torch.get_num_threads()
    results = quant.compare_torchao(model, examples, min_run_time_s=0.01, num_threads=1)
    assert torch.get_num_threads() == threads  # restored
    assert list(results) == ["decode", "prefill"]
    for runs in results.values():
        assert [r.mode for r in runs] == ["float", *quant.TORCHAO_MODES]
        assert runs[0].sqnr_db == math.inf and runs[0].max_abs_error == 0.0 and runs[0].top1_agreement == 1.0
        assert runs[0].weight_bytes == quant.module_bytes(model)
        assert all(r.weight_bytes < runs[0].weight_bytes for r in runs[1:])
        assert all(r.sqnr_db > 20 and r.timing.median_s > 0 for r in runs[1:])
    assert [r.weight_bytes for r in results["decode"]] == [r.weight_bytes for r in results["prefill"]]


def test_torchao_config_rejects_unknown_mode():
    with pytest.raises(ValueError):
        quant.torchao_config("int3")


def test_import_torchao_is_quiet():
    done = subprocess.run(
        [sys.executable, "-c", "from lecturelib import quant; quant.import_torchao()"],
        capture_output=True, text=True,
    )
    assert done.returncode == 0
    assert done.stderr == "" and done.stdout == ""


# --- the CPU's low-precision instructions ---------------------------------------------------------------------

X86_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma f16c avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile\n"
ARM_CPUINFO = "processor\t: 0\nFeatures\t: fp asimd fphp asimdhp asimddp bf16 i8mm\n"


def test_low_precision_isa_reads_x86_flags():
    isa = quant.low_precision_isa(X86_CPUINFO)
    assert isa == {"fp16": (), "bf16": ("avx512_bf16", "amx_bf16"), "int8": ("avx512_vnni",)}  # f16c only converts


def test_low_precision_isa_reads_arm_features():
    isa = quant.low_precision_isa(ARM_CPUINFO)
    assert isa == {"fp16": ("fphp", "asimdhp"), "bf16": ("bf16",), "int8": ("asimddp", "i8mm")}


def test_low_precision_isa_unknown_without_flags():
    assert quant.low_precision_isa("processor\t: 0\nmodel name\t: something\n") is None
    assert quant.cpu_flags("") is None


def test_cpu_flags_of_this_machine_are_a_set_or_none():
    flags = quant.cpu_flags()
    assert flags is None or isinstance(flags, frozenset)
