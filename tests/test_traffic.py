"""Tests of lecturelib.traffic: bytes each operator reads and writes, and arithmetic intensity."""

from __future__ import annotations

import pytest
import torch

from lecturelib.counter import count_flops
from lecturelib.traffic import Traffic, count_traffic, intensity_flop_per_byte


def test_count_traffic_matmul_reads_operands_writes_result() -> None:
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    traffic = count_traffic(lambda: a @ b)
    # reads (8*16 + 16*4) * 4 = 768 bytes, writes 8*4*4 = 128
    assert traffic == Traffic({"aten.mm": 768}, {"aten.mm": 128}, {"aten.mm": 1})
    assert traffic.total_bytes == 896


def test_count_traffic_views_move_nothing() -> None:
    x = torch.randn(4, 6)
    traffic = count_traffic(lambda: x.t()[1:].reshape(-1))  # transpose and slice are views; reshape then copies
    # the one copy (clone, then an _unsafe_view of it): 5 * 4 elements read and written, 4 bytes each
    assert traffic == Traffic({"aten.clone": 80}, {"aten.clone": 80}, {"aten.clone": 1})


def test_count_traffic_in_place_reads_and_writes_target() -> None:
    y = torch.zeros(4, 4)
    traffic = count_traffic(lambda: y.add_(1.0))
    assert traffic.read_bytes == {"aten.add_": 64} and traffic.written_bytes == {"aten.add_": 64}


def test_count_traffic_on_meta_tensors_needs_shapes_only() -> None:
    with torch.device("meta"):
        layer = torch.nn.Linear(1024, 4096).to(torch.bfloat16)
        x = torch.empty(2, 8, 1024, dtype=torch.bfloat16)
    traffic = count_traffic(lambda: layer(x))
    # addmm reads bias 4096, x 16*1024 and W 4096*1024, writes 16*4096; 2 bytes each
    assert traffic.bytes_of(["aten.addmm"]) == 2 * (4096 + 16 * 1024 + 4096 * 1024 + 16 * 4096)


def test_intensity_of_a_matmul_is_flops_over_bytes() -> None:
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    flops, traffic = count_flops(lambda: a @ b), count_traffic(lambda: a @ b)
    # 2 * 64**3 FLOPs over 3 * 64**2 * 4 bytes = 2n / (3 * 4)
    assert intensity_flop_per_byte(flops, traffic) == pytest.approx(2 * 64 / 12)
    assert intensity_flop_per_byte(flops, traffic, ["aten.mm"]) == pytest.approx(2 * 64 / 12)


def test_intensity_rejects_operators_that_moved_nothing() -> None:
    a = torch.randn(4, 4)
    with pytest.raises(ValueError, match="moved no bytes"):
        intensity_flop_per_byte(count_flops(lambda: a @ a), count_traffic(lambda: a @ a), ["aten.bmm"])
