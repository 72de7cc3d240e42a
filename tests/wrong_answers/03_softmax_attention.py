"""Notebook 03: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex3_6", label="an online softmax that forgets to rescale the running sum when the max grows", source='''
import torch


def online_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax over the last dimension, read in blocks of columns with a running max and sum per row."""
    n = x.shape[-1]
    m = torch.full((*x.shape[:-1], 1), float("-inf"), dtype=torch.float32)
    total = torch.zeros_like(m)
    for start in range(0, n, block):
        chunk = x[..., start:start + block].float()
        m_new = torch.maximum(m, chunk.amax(dim=-1, keepdim=True))
        shift = torch.where(m_new == float("-inf"), 0.0, m_new)
        total = total + torch.exp(chunk - shift).sum(dim=-1, keepdim=True)  # the old terms kept against the old max
        m = m_new
    out = torch.empty_like(x)
    for start in range(0, n, block):
        out[..., start:start + block] = (torch.exp(x[..., start:start + block].float() - m) / total).to(x.dtype)
    return out
'''),
    Wrong(cell="ex3_7", label="a causal mask aligned the other way: query i attends keys j >= i", source='''
import torch


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int, causal: bool) -> torch.Tensor:
    """Attention over (B, H, S, D) inputs, one key/value block at a time, with an online softmax."""
    S, D = q.shape[-2], q.shape[-1]
    work = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(work) * D**-0.5
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=work)
    total = torch.zeros_like(m)
    out = torch.zeros((*q.shape[:-1], v.shape[-1]), dtype=work)
    queries = torch.arange(S)[:, None]
    for start in range(0, k.shape[-2], block):
        k_block, v_block = k[..., start:start + block, :].to(work), v[..., start:start + block, :].to(work)
        scores = q_scaled @ k_block.transpose(-2, -1)
        if causal:
            keys = torch.arange(start, start + k_block.shape[-2])
            scores = scores.masked_fill(keys < queries, float("-inf"))  # the mask the other way round
        m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
        shift = torch.where(m_new == float("-inf"), 0.0, m_new)
        scale = torch.exp(m - shift)
        p = torch.exp(scores - shift)
        total = total * scale + p.sum(dim=-1, keepdim=True)
        out = out * scale + p @ v_block
        m = m_new
    return (out / total).to(q.dtype)
'''),
]
