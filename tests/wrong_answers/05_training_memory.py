"""Notebook 05: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex5_4", label="a meter that counts a shared storage once per saved tensor", source='''
def saved_bytes(fn: Callable[..., torch.Tensor], *args) -> int:
    """Bytes of the distinct storages that autograd keeps for the backward pass of fn(*args)."""
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = fn(*args)
    return sum(t.untyped_storage().nbytes() for t in saved)  # x * x saves x twice: counted twice
''', fails=("ex5_4_test",)),
    Wrong(cell="ex5_4", label="a meter that counts the saved views' bytes, not their storages'", source='''
def saved_bytes(fn: Callable[..., torch.Tensor], *args) -> int:
    """Bytes of the distinct storages that autograd keeps for the backward pass of fn(*args)."""
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = fn(*args)
    storages = {t.untyped_storage().data_ptr(): t.nelement() * t.element_size() for t in saved}  # a slice: its own bytes
    return sum(storages.values())
''', fails=("ex5_4_test",)),
]
