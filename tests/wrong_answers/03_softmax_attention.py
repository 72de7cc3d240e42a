"""Notebook 03: mistakes that must lose their exercise's points (the lazy builds: a library call, a closed form, a
skipped step)."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex3_2", label="torch.softmax, and the counts from the closed form", source='''
import math

import torch


def counted_softmax(x: torch.Tensor) -> tuple[torch.Tensor, dict[str, int]]:
    """Stable softmax over the rows of a 2-D tensor in plain Python, with the operations it performed."""
    rows, n = x.shape
    counts = {"max": rows * (n - 1), "sub": rows * n, "exp": rows * n, "add": rows * (n - 1), "div": rows * n}
    return torch.softmax(x, dim=-1), counts
''', teaches="the counts reported are not the operations the loop performed on the numbers"),
    Wrong(cell="ex3_4", label="torch.softmax over the whole row", source='''
import torch


def online_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax over the last dimension, read in blocks of columns with a running max and sum per row."""
    return torch.softmax(x.to(torch.promote_types(x.dtype, torch.float32)), dim=-1).to(x.dtype)
''', teaches="an exp, max, sum or softmax read more than a block of columns at once: the row was not read block by "
             "block"),
    Wrong(cell="ex3_4", label="three passes: the exact maximum first, then the sum, then the output (no rescaling)",
          source='''
import torch


def online_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax over the last dimension, read in blocks of columns with a running max and sum per row."""
    n = x.shape[-1]
    work = torch.promote_types(x.dtype, torch.float32)
    m = torch.full((*x.shape[:-1], 1), float("-inf"), dtype=work)
    for start in range(0, n, block):  # pass 1: the row maximum, so that nothing needs rescaling
        m = torch.maximum(m, x[..., start:start + block].to(work).amax(dim=-1, keepdim=True))
    shift = torch.where(m == float("-inf"), 0.0, m)
    total = torch.zeros_like(m)
    for start in range(0, n, block):  # pass 2: the sum against the final maximum
        total = total + torch.exp(x[..., start:start + block].to(work) - shift).sum(dim=-1, keepdim=True)
    out = torch.empty_like(x)
    for start in range(0, n, block):  # pass 3: the output
        out[..., start:start + block] = (torch.exp(x[..., start:start + block].to(work) - shift) / total).to(x.dtype)
    return out
''', teaches="the row was read more than twice: the maximum and the sum must be kept together, in one pass"),
    Wrong(cell="ex3_5", label="F.scaled_dot_product_attention, the fused kernel itself", source='''
import torch
import torch.nn.functional as F


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int, causal: bool) -> torch.Tensor:
    """Attention over (B, H, S, D) inputs, one key/value block at a time, with an online softmax."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
''', fails=("ex3_5_blocks",), teaches="a fused attention kernel or a softmax function ran: 3.5 asks you to build "
                                        "attention from matmuls and an online softmax"),
    Wrong(cell="ex3_5", label="the whole (S, S) score matrix, masked, then torch.softmax", source='''
import torch


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int, causal: bool) -> torch.Tensor:
    """Attention over (B, H, S, D) inputs, one key/value block at a time, with an online softmax."""
    S, D = q.shape[-2], q.shape[-1]
    scores = (q * D**-0.5) @ k.transpose(-2, -1)  # (B, H, S, S): every key at once
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
''', fails=("ex3_5_blocks",), teaches="an (S, S) tensor was created: scores or a mask of the whole sequence"),
]
