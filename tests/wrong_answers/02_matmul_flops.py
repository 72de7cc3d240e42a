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
