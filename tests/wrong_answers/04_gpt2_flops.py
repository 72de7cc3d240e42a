"""Notebook 04: mistakes that must lose their exercise's points (for the builds: a library call, a closed form)."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex4_2", label="the causal mask taken as halving the score matrix (T/2 keys on average)", source='''
def flops_breakdown(n_layer: int, d_model: int, vocab_size: int, n_ctx: int) -> dict[str, int]:
    """Forward FLOPs per token of a GPT-2 over one n_ctx sequence, by part (summed over layers), and their total."""
    d = d_model
    parts = {
        "attention/qkv": n_layer * 2 * d * 3 * d,
        "attention/scores": n_layer * n_ctx * d,  # a causal query sees n_ctx / 2 keys on average
        "attention/reduce": n_layer * n_ctx * d,
        "attention/proj": n_layer * 2 * d * d,
        "mlp": n_layer * 16 * d * d,
        "lm_head": 2 * d * vocab_size,
    }
    return {**parts, "total": sum(parts.values())}
''', fails=("ex4_2_test",), teaches="the scores and the reduce each cost 2 FLOPs per key and channel, per token, over "
                                     "the full context"),
    Wrong(cell="ex4_2", label="the parts of one layer, not summed over the layers (the total right)", source='''
def flops_breakdown(n_layer: int, d_model: int, vocab_size: int, n_ctx: int) -> dict[str, int]:
    """Forward FLOPs per token of a GPT-2 over one n_ctx sequence, by part (summed over layers), and their total."""
    d = d_model
    layer = {
        "attention/qkv": 2 * d * 3 * d,
        "attention/scores": 2 * n_ctx * d,
        "attention/reduce": 2 * n_ctx * d,
        "attention/proj": 2 * d * d,
        "mlp": 16 * d * d,
    }
    lm_head = 2 * d * vocab_size
    return {**layer, "lm_head": lm_head, "total": n_layer * sum(layer.values()) + lm_head}
''', fails=("ex4_2_test",), teaches="each part repeats in every block: summed over the layers (the LM head once)"),
    Wrong(cell="ex4_3", label="FlopCounterMode wrapped: PyTorch's counter renamed, not a counter of one's own", source='''
import torch
from torch.utils.flop_counter import FlopCounterMode


class FlopCounter(FlopCounterMode):
    """Counts the FLOPs of the matmuls PyTorch runs while it is active: by operator and by module of `model`."""

    def __init__(self, model=None):
        super().__init__(display=False)
        self.model = model

    @property
    def by_operator(self):
        return {op.__name__: n for op, n in self.get_flop_counts().get("Global", {}).items()}

    @property
    def total(self):
        return self.get_total_flops()

    @property
    def by_module(self):
        if self.model is None:
            return {}
        root = type(self.model).__name__
        counts = {"" if path == root else path.removeprefix(root + "."): sum(ops.values())
                  for path, ops in self.get_flop_counts().items() if path != "Global"}
        return {name: n for name, n in counts.items() if n}
''', fails=("ex4_3_operators", "ex4_3_modules"),
          teaches="the CPU's fused attention kernel was not counted as its two matmuls"),
    Wrong(cell="ex4_3", label="the closed form: 2 FLOPs per parameter per token, no operator watched", source='''
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class FlopCounter(TorchDispatchMode):
    """Counts the FLOPs of the matmuls PyTorch runs while it is active: by operator and by module of `model`."""

    def __init__(self, model=None):
        super().__init__()
        self.model, self.by_operator, self.by_module, self.total = model, {}, {}, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.model is not None and func.overloadpacket.__name__ == "embedding":  # 2 per parameter per token
            self.total = 2 * sum(p.numel() for p in self.model.parameters()) * args[1].numel()
            self.by_module = {"": self.total}
        return out
''', teaches="a matmul of (m, k) by (k, n) is 2·m·k·n FLOPs"),
]
