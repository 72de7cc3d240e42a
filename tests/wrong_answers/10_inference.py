"""Notebook 10: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell='ex10_1', label="a cache that rotates new queries and keys as if they stood at position 0 (RoPE's offset forgotten)", source='''
import math

import torch

from lecturelib.models import GPT, ROPE_BASE


@torch.no_grad()
def greedy_decode(model: GPT, prompt: torch.LongTensor, n_new: int, use_cache: bool) -> torch.LongTensor:
    """Greedy generation of n_new tokens after prompt (B, T0): the (B, T0 + n_new) token ids."""
    cfg = model.cfg
    tokens = prompt
    if not use_cache:
        for _ in range(n_new):  # the whole sequence again at every step
            logits = model(tokens)  # (B, T, V)
            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
        return tokens
    cache: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer (k, v), each (B, n_kv_head, t, hs)

    def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # lecturelib.models.rotary at absolute positions: angle = position · theta_i, pairs (2i, 2i+1)
        theta = ROPE_BASE ** (-torch.arange(0, cfg.head_dim, 2, device=x.device, dtype=torch.float32) / cfg.head_dim)
        angle = torch.outer(positions.to(torch.float32), theta)  # (T, hs/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    def forward(new: torch.Tensor, start: int) -> torch.Tensor:
        """Logits (B, V) of the last of the tokens `new` (B, T) at positions start .. start + T - 1."""
        batch, length = new.shape
        positions = torch.arange(start, start + length, device=new.device)
        x = model.token_embedding(new)  # (B, T, C)
        if model.position_embedding is not None:
            x = x + model.position_embedding(positions)  # learned positions: the absolute ones
        for i, block in enumerate(model.blocks):
            attention, h = block.attention, block.norm_1(x)
            q = attention.q_proj(h).view(batch, length, cfg.n_head, cfg.head_dim).transpose(1, 2)  # (B, nh, T, hs)
            k = attention.k_proj(h).view(batch, length, cfg.n_kv_head, cfg.head_dim).transpose(1, 2)  # (B, nkv, T, hs)
            v = attention.v_proj(h).view(batch, length, cfg.n_kv_head, cfg.head_dim).transpose(1, 2)
            if cfg.arch == "llama":
                q, k = rotate(q, torch.arange(length)), rotate(k, torch.arange(length))  # rotated as if this call began at 0
            if i < len(cache):  # append to the layer's cache: keys of positions 0 .. start + T - 1
                k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
                cache[i] = (k, v)
            else:
                cache.append((k, v))
            group = cfg.n_head // cfg.n_kv_head  # query heads 0..g-1 share KV head 0, and so on
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, nh, t, hs)
            scores = q @ k.transpose(-2, -1) / math.sqrt(cfg.head_dim)  # (B, nh, T, t)
            future = torch.ones(length, start + length, dtype=torch.bool, device=x.device).triu(start + 1)
            probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1, dtype=torch.float32).to(q.dtype)
            y = (probs @ v).transpose(1, 2).reshape(batch, length, cfg.d_model)  # (B, T, C)
            x = x + attention.out_proj(y)
            x = x + block.mlp(block.norm_2(x))
        return model.lm_head(model.norm_f(x[:, -1]))  # (B, V): only the last position is needed

    for step in range(n_new):
        if step == 0:
            logits = forward(tokens, 0)  # prefill: the whole prompt at once
        else:
            logits = forward(tokens[:, -1:], tokens.shape[1] - 1)  # only the newest token
        tokens = torch.cat([tokens, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return tokens
''', fails=('ex10_1_tokens', 'ex10_1_edges'),
          teaches="with rotary positions, the cached path must give the tokens of recomputing the whole sequence"),
    Wrong(cell='ex10_2', label='a step that adds the compute and memory times instead of overlapping them (max)', source='''
def decode_seconds(n_params: int, bytes_per_param: float, kv_bytes: int, batch: int, peak_flop_per_s: float,
                   peak_bytes_per_s: float) -> float:
    """Roofline time of one decode step of `batch` sequences (seconds)."""
    compute_s = 2 * n_params * batch / peak_flop_per_s  # one multiply-add per weight per sequence
    memory_s = (n_params * bytes_per_param + kv_bytes) / peak_bytes_per_s  # weights once, every sequence's cache
    return compute_s + memory_s  # compute and memory one after the other
''', fails=('ex10_2_test',),
          teaches="a step takes the longer of its compute and its memory traffic, which overlap: the weights read once for the whole batch, the caches as given"),
    Wrong(cell='ex10_1', label='a cached path that never uses its cache: every step recomputes the whole sequence', source='''
import math

import torch

from lecturelib.models import GPT, ROPE_BASE


@torch.no_grad()
def greedy_decode(model: GPT, prompt: torch.LongTensor, n_new: int, use_cache: bool) -> torch.LongTensor:
    """Greedy generation of n_new tokens after prompt (B, T0): the (B, T0 + n_new) token ids."""
    cfg = model.cfg
    tokens = prompt
    if True:  # the cache was never wired in: every step recomputes
        for _ in range(n_new):  # the whole sequence again at every step
            logits = model(tokens)  # (B, T, V)
            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
        return tokens
    cache: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer (k, v), each (B, n_kv_head, t, hs)

    def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # lecturelib.models.rotary at absolute positions: angle = position · theta_i, pairs (2i, 2i+1)
        theta = ROPE_BASE ** (-torch.arange(0, cfg.head_dim, 2, device=x.device, dtype=torch.float32) / cfg.head_dim)
        angle = torch.outer(positions.to(torch.float32), theta)  # (T, hs/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    def forward(new: torch.Tensor, start: int) -> torch.Tensor:
        """Logits (B, V) of the last of the tokens `new` (B, T) at positions start .. start + T - 1."""
        batch, length = new.shape
        positions = torch.arange(start, start + length, device=new.device)
        x = model.token_embedding(new)  # (B, T, C)
        if model.position_embedding is not None:
            x = x + model.position_embedding(positions)  # learned positions: the absolute ones
        for i, block in enumerate(model.blocks):
            attention, h = block.attention, block.norm_1(x)
            q = attention.q_proj(h).view(batch, length, cfg.n_head, cfg.head_dim).transpose(1, 2)  # (B, nh, T, hs)
            k = attention.k_proj(h).view(batch, length, cfg.n_kv_head, cfg.head_dim).transpose(1, 2)  # (B, nkv, T, hs)
            v = attention.v_proj(h).view(batch, length, cfg.n_kv_head, cfg.head_dim).transpose(1, 2)
            if cfg.arch == "llama":
                q, k = rotate(q, positions), rotate(k, positions)  # RoPE at the absolute positions
            if i < len(cache):  # append to the layer's cache: keys of positions 0 .. start + T - 1
                k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
                cache[i] = (k, v)
            else:
                cache.append((k, v))
            group = cfg.n_head // cfg.n_kv_head  # query heads 0..g-1 share KV head 0, and so on
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, nh, t, hs)
            scores = q @ k.transpose(-2, -1) / math.sqrt(cfg.head_dim)  # (B, nh, T, t)
            future = torch.ones(length, start + length, dtype=torch.bool, device=x.device).triu(start + 1)
            probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1, dtype=torch.float32).to(q.dtype)
            y = (probs @ v).transpose(1, 2).reshape(batch, length, cfg.d_model)  # (B, T, C)
            x = x + attention.out_proj(y)
            x = x + block.mlp(block.norm_2(x))
        return model.lm_head(model.norm_f(x[:, -1]))  # (B, V): only the last position is needed

    for step in range(n_new):
        if step == 0:
            logits = forward(tokens, 0)  # prefill: the whole prompt at once
        else:
            logits = forward(tokens[:, -1:], tokens.shape[1] - 1)  # only the newest token
        tokens = torch.cat([tokens, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return tokens
''', fails=('ex10_1_tokens', 'ex10_1_edges', 'ex10_1_flops'),
          teaches="the cached path must feed the prompt once, then one new token per sequence per step"),
    Wrong(cell='ex10_3', label="a cache paid once per step, like the weights, instead of once per sequence", source='''
import math


def critical_batch_with_kv(n_params: int, bytes_per_param: float, kv_bytes_per_sequence: int, peak_flop_per_s: float,
                           peak_bytes_per_s: float) -> float:
    """The batch at which decode turns compute-bound when each sequence adds its KV cache; math.inf if never."""
    memory_s = (n_params * bytes_per_param + kv_bytes_per_sequence) / peak_bytes_per_s  # one cache for the whole batch
    return memory_s / (2 * n_params / peak_flop_per_s)
''', fails=('ex10_3_test',),
          teaches="the batch at which the batch's compute time catches up with the weights' and the caches' traffic"),
    Wrong(cell="ex10_4", label="static batching whatever `continuous` says: nobody joins a running batch", source='''
from collections.abc import Callable


def serve_requests(arrivals_s: list[float], prompt_tokens: list[int], new_tokens: list[int], max_batch: int,
                   step_s: Callable[[list[int]], float], continuous: bool = True) -> list[float]:
    """The time (s) at which each request's last new token is produced, by one server decoding a batch at a time."""
    order = sorted(range(len(arrivals_s)), key=lambda i: (arrivals_s[i], i))
    waiting = 0
    running: list[list[int]] = []
    finish = [0.0] * len(arrivals_s)
    now = 0.0
    while waiting < len(order) or running:
        if not running and arrivals_s[order[waiting]] > now:
            now = arrivals_s[order[waiting]]
        if not running:  # a batch runs until its last sequence is done, continuous or not
            while waiting < len(order) and len(running) < max_batch and arrivals_s[order[waiting]] <= now:
                i = order[waiting]
                running.append([i, prompt_tokens[i], new_tokens[i]])
                waiting += 1
        now += step_s([tokens for _, tokens, _ in running])
        for seq in running:
            seq[1] += 1
            seq[2] -= 1
            if seq[2] == 0:
                finish[seq[0]] = now
        running = [seq for seq in running if seq[2] > 0]
    return finish
''', fails=("ex10_4_test",), teaches="a sequence that finishes frees its place for the next waiting request at the next step"),
    Wrong(cell="ex10_4", label="contexts that never grow: every step priced at the prompts (the cache's growth forgotten)", source='''
from collections.abc import Callable


def serve_requests(arrivals_s: list[float], prompt_tokens: list[int], new_tokens: list[int], max_batch: int,
                   step_s: Callable[[list[int]], float], continuous: bool = True) -> list[float]:
    """The time (s) at which each request's last new token is produced, by one server decoding a batch at a time."""
    order = sorted(range(len(arrivals_s)), key=lambda i: (arrivals_s[i], i))
    waiting = 0
    running: list[list[int]] = []  # [request, new tokens still to produce]
    finish = [0.0] * len(arrivals_s)
    now = 0.0
    while waiting < len(order) or running:
        if not running and arrivals_s[order[waiting]] > now:
            now = arrivals_s[order[waiting]]
        if continuous or not running:
            while waiting < len(order) and len(running) < max_batch and arrivals_s[order[waiting]] <= now:
                i = order[waiting]
                running.append([i, new_tokens[i]])
                waiting += 1
        now += step_s([prompt_tokens[i] for i, _ in running])  # the prompt alone: the tokens produced are forgotten
        for seq in running:
            seq[1] -= 1
            if seq[1] == 0:
                finish[seq[0]] = now
        running = [seq for seq in running if seq[1] > 0]
    return finish
''', fails=("ex10_4_test",), teaches="each step decodes every sequence of the batch once, its context grown by the tokens it has produced"),
]
