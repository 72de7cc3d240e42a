"""Notebook 02: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex2_1", label="a closed form: the counts from the formula, the product from a @ b", source='''
def counted_matmul(A: torch.Tensor, B: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
    """A @ B, and how many multiplies and how many adds computing it took."""
    (m, k), (_, n) = A.shape, B.shape
    return A @ B, (m * k * n, m * n * (k - 1))
''', teaches="the counts you report are not the multiplies and adds your loop did"),
    Wrong(cell="ex2_2", label="the lecture's calculator: the first dim taken as the number of tokens", source='''
import math
from collections.abc import Sequence


def linear_flops(input_shape: Sequence[int], d_out: int) -> int:
    """Forward FLOPs of nn.Linear."""
    tokens, d_in = input_shape[0], input_shape[-1]
    return 2 * tokens * d_in * d_out
''', teaches="every leading dim is rows: they all multiply into the tokens"),
    Wrong(cell="ex2_3", label="a skipped step: the backward's weight gradient only", source='''
import math
from collections.abc import Sequence


def linear_train_flops(input_shape: Sequence[int], d_out: int) -> int:
    """Forward + backward FLOPs of nn.Linear(input_shape[-1], d_out), gradients of input and weight."""
    *leading, d_in = input_shape
    forward = 2 * math.prod(leading) * d_in * d_out
    return 2 * forward
''', teaches="the backward is two matmuls of the forward's size: one per gradient, input and weight"),
    Wrong(cell="ex2_4", label="a closed form: the product computed whole (broadcast, no matmul), the count from the formula",
          source='''
import math

import torch


def tiled_matmul(a: torch.Tensor, b: torch.Tensor, tile: int) -> tuple[torch.Tensor, int]:
    """a @ b, and the elements that computing it one output tile at a time moves between slow and fast memory."""
    (m, k), (_, n) = a.shape, b.shape
    c = (a[:, :, None] * b[None, :, :]).sum(dim=1)  # every product at once: no matmul operator runs
    return c, m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile) + m * n
''', teaches="the loads you counted are not the elements your function read from a and b, tile by tile"),
    Wrong(cell="ex2_4", label="every load counted as a full tile × tile, edge tiles included", source='''
import torch


def tiled_matmul(a: torch.Tensor, b: torch.Tensor, tile: int) -> tuple[torch.Tensor, int]:
    """a @ b, and the elements that computing it one output tile at a time moves between slow and fast memory."""
    (m, k), (_, n) = a.shape, b.shape
    c = torch.empty(m, n, dtype=a.dtype)
    moved = 0
    for i0 in range(0, m, tile):
        for j0 in range(0, n, tile):
            acc = torch.zeros(min(tile, m - i0), min(tile, n - j0), dtype=a.dtype)
            for p0 in range(0, k, tile):
                acc += a[i0:i0 + tile, p0:p0 + tile] @ b[p0:p0 + tile, j0:j0 + tile]
                moved += 2 * tile * tile  # a full tile of a and of b, whatever the edge leaves
            c[i0:i0 + tile, j0:j0 + tile] = acc
            moved += tile * tile
    return c, moved
''', teaches="the elements moved are not every tile loaded, as loaded, plus C written once"),
]
