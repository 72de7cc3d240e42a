"""Notebook 02: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex2_4", label="the lecture's calculator: the first dim taken as the number of tokens", source='''
import math
from collections.abc import Sequence


def linear_flops(input_shape: Sequence[int], d_out: int) -> int:
    """Forward FLOPs of nn.Linear."""
    tokens, d_in = input_shape[0], input_shape[-1]
    return 2 * tokens * d_in * d_out
'''),
]

WRONG += [
    Wrong(cell="ex2_7", label="an off-by-one tile edge: ceil(size / tile) written as (size - 1) // tile", source='''
import torch


def tiled_matmul(a: torch.Tensor, b: torch.Tensor, tile: int) -> tuple[torch.Tensor, int]:
    """C = a @ b computed one output tile at a time, with the elements moved between slow and fast memory."""
    (m, k), (_, n) = a.shape, b.shape
    c = torch.zeros(m, n, dtype=a.dtype)
    moved = 0
    for ti in range((m - 1) // tile):  # the number of tiles, one short: ceil(m / tile) is (m - 1) // tile + 1
        i0, i1 = ti * tile, min((ti + 1) * tile, m)
        for tj in range((n - 1) // tile):
            j0, j1 = tj * tile, min((tj + 1) * tile, n)
            acc = torch.zeros(i1 - i0, j1 - j0, dtype=a.dtype)
            for tp in range((k - 1) // tile):
                p0, p1 = tp * tile, min((tp + 1) * tile, k)
                a_tile, b_tile = a[i0:i1, p0:p1], b[p0:p1, j0:j1]
                moved += a_tile.numel() + b_tile.numel()
                acc += a_tile @ b_tile
            c[i0:i1, j0:j1] = acc
            moved += acc.numel()
    return c, moved
'''),
    Wrong(cell="ex2_7", label="every load counted as a full tile × tile, edge tiles included", source='''
import torch


def tiled_matmul(a: torch.Tensor, b: torch.Tensor, tile: int) -> tuple[torch.Tensor, int]:
    """C = a @ b computed one output tile at a time, with the elements moved between slow and fast memory."""
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
'''),
]
