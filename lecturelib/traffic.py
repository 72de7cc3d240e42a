"""Memory traffic of eager PyTorch code: the bytes each operator reads and writes, and its arithmetic intensity."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from lecturelib.counter import FlopCount

# Operators that return a tensor sharing its input's memory without an alias annotation in their schema:
# they move no data either (reshape of a contiguous tensor, the views that aten.matmul makes).
_VIEWS_WITHOUT_ANNOTATION = {"aten._unsafe_view", "aten.lift_fresh"}


@dataclass(frozen=True)
class Traffic:
    """Bytes moved by one call, per aten operator: every operator reads its tensor arguments once and writes its
    outputs once (eager PyTorch: no fusion, no reuse of a cache between operators); views move nothing."""

    read_bytes: dict[str, int]  # operator ("aten.mm") -> bytes of the tensors it read, summed over its calls
    written_bytes: dict[str, int]  # operator -> bytes of the tensors it wrote
    calls: dict[str, int]  # operator -> how many times it ran

    def bytes_of(self, operators: Iterable[str]) -> int:
        """Bytes read and written by the given operators together (unknown names move nothing)."""
        return sum(self.read_bytes.get(op, 0) + self.written_bytes.get(op, 0) for op in set(operators))

    @property
    def total_bytes(self) -> int:
        """Bytes read and written by every operator."""
        return sum(self.read_bytes.values()) + sum(self.written_bytes.values())


def _nbytes(tensors: Iterable[object]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


class _TrafficMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.read: dict[str, int] = {}
        self.written: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = str(func.overloadpacket)
        returns = func._schema.returns
        # a view (an alias that is not written) or an annotation-less view: metadata only, no bytes
        aliasing = [r.alias_info is not None and not r.alias_info.is_write for r in returns]
        if name in _VIEWS_WITHOUT_ANNOTATION or (aliasing and all(aliasing)):
            return out
        self.calls[name] = self.calls.get(name, 0) + 1
        self.read[name] = self.read.get(name, 0) + _nbytes(tree_flatten((args, kwargs or {}))[0])
        self.written[name] = self.written.get(name, 0) + _nbytes(tree_flatten(out)[0])
        return out


def count_traffic(fn: Callable[[], object]) -> Traffic:
    """Bytes each aten operator reads and writes while fn() runs (works on meta tensors: shapes are enough)."""
    # An eager count, the traffic of running operator after operator: a fused kernel (FlashAttention, a conv
    # with its BatchNorm folded in) moves less, and a cache between operators can absorb some of it. In-place
    # operators count their target as read and written.
    mode = _TrafficMode()
    with mode:
        fn()
    return Traffic(dict(mode.read), dict(mode.written), dict(mode.calls))


def intensity_flop_per_byte(flops: FlopCount, traffic: Traffic, operators: Iterable[str] | None = None) -> float:
    """FLOPs over bytes moved by the given operators (all of them if None): their arithmetic intensity."""
    chosen = set(traffic.calls) | set(flops.by_operator) if operators is None else set(operators)
    moved = traffic.bytes_of(chosen)
    if moved <= 0:
        raise ValueError(f"the operators {sorted(chosen)} moved no bytes")
    return sum(flops.by_operator.get(op, 0) for op in chosen) / moved
