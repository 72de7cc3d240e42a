"""Notebook 04: mistakes that must lose their exercise's points."""

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
''', fails=("ex4_2_test",)),
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
''', fails=("ex4_2_test",)),
]
