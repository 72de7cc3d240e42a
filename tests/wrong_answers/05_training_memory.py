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
''', fails=("ex5_4_test",), teaches="a storage saved twice was counted twice: count each storage once"),
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
''', fails=("ex5_4_test",), teaches="a saved view keeps its whole storage alive: count the storage, not the view"),
    Wrong(cell="ex5_5", label="each storage credited to the innermost module only: the enclosing ones skipped",
          source='''
def saved_bytes_by_module(model: torch.nn.Module, *args) -> dict[str, int]:
    """Bytes of the storages autograd keeps for model(*args)'s backward, by the modules where each was first saved."""
    running, first_saved, kept = [], {}, []

    def pack(t):
        kept.append(t)
        if t.untyped_storage().data_ptr() not in first_saved:
            first_saved[t.untyped_storage().data_ptr()] = (t.untyped_storage().nbytes(), running[-1] if running else None)
        return t

    def entering(name):
        def hook(module, inputs):
            running.append(name)
        return hook

    def leaving(module, inputs, output):
        running.pop()

    handles = []
    for name, module in model.named_modules():
        handles += [module.register_forward_pre_hook(entering(name)), module.register_forward_hook(leaving)]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = model(*args)
    for handle in handles:
        handle.remove()
    by_module = {}
    for n_bytes, innermost in first_saved.values():  # the module that ran the operator, not those around it
        if innermost is not None:
            by_module[innermost] = by_module.get(innermost, 0) + n_bytes
    return by_module
''', teaches="the enclosing modules must be credited too: a parent holds what its children saved"),
    Wrong(cell="ex5_5", label="the parameters of each module, not what autograd saved", source='''
def saved_bytes_by_module(model: torch.nn.Module, *args) -> dict[str, int]:
    """Bytes of the storages autograd keeps for model(*args)'s backward, by the modules where each was first saved."""
    return {name: sum(p.nbytes for p in module.parameters()) for name, module in model.named_modules()}
''', teaches="a GPT's blocks and ends were not each credited with what they saved"),
]
