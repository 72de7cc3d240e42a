"""Notebook 12: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex12_1", label="the smallest |w| pruned per row instead of over the whole tensor", source='''
def magnitude_mask(w: Tensor, amount: float) -> Tensor:
    """Boolean mask: in every row, False on the round(amount · row length) entries of smallest |w|."""
    rows = w.detach().abs().reshape(-1, w.shape[-1])  # (rows, last dim)
    n_pruned = round(amount * rows.shape[1])
    order = torch.argsort(rows, dim=1, stable=True)
    keep = torch.ones(rows.shape, dtype=torch.bool, device=w.device)
    keep.scatter_(1, order[:, :n_pruned], False)
    return keep.view(w.shape)
''', fails=("ex12_1_test",)),
    Wrong(cell="ex12_2", label="crow_indices as the nonzeros of each row, not their running sum", source='''
def to_csr(w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(crow_indices, col_indices, values) of a 2-D tensor: its nonzeros row by row."""
    rows, cols = w.nonzero(as_tuple=True)
    per_row = torch.bincount(rows, minlength=w.shape[0])
    crow = torch.zeros(w.shape[0] + 1, dtype=torch.int64, device=w.device)
    crow[1:] = per_row  # counts, not offsets
    return crow, cols, w[rows, cols]
''', fails=("ex12_2_test",)),
    Wrong(cell="ex12_3", label="the n largest signed values kept instead of the n largest |w|", source='''
def n_m_mask(w: Tensor, n: int, m: int) -> Tensor:
    """Boolean mask of a 2-D w keeping, in every group of m consecutive entries of a row, the n largest values."""
    rows, cols = w.shape
    groups = w.detach().reshape(rows, cols // m, m)  # no abs: a large negative weight counts as small
    order = torch.argsort(groups, dim=-1, stable=True)
    keep = torch.zeros(groups.shape, dtype=torch.bool, device=w.device)
    keep.scatter_(-1, order[..., m - n:], True)
    return keep.reshape(rows, cols)
''', fails=("ex12_3_test",)),
    Wrong(cell="ex12_4", label="the hidden units of smallest norm kept instead of the largest", source='''
def prune_hidden_units(fc1: nn.Linear, fc2: nn.Linear, keep: int) -> tuple[nn.Linear, nn.Linear]:
    """New, smaller layers keeping the `keep` hidden units whose fc1 rows have the smallest L2 norm, in order."""
    norms = fc1.weight.detach().norm(dim=1)
    kept = torch.argsort(norms, stable=True)[:keep].sort().values
    factory = {"device": fc1.weight.device, "dtype": fc1.weight.dtype}
    fc1_new = nn.Linear(fc1.in_features, keep, bias=fc1.bias is not None, **factory)
    fc2_new = nn.Linear(keep, fc2.out_features, bias=fc2.bias is not None, **factory)
    with torch.no_grad():
        fc1_new.weight.copy_(fc1.weight[kept])
        fc2_new.weight.copy_(fc2.weight[:, kept])
        if fc1.bias is not None:
            fc1_new.bias.copy_(fc1.bias[kept])
        if fc2.bias is not None:
            fc2_new.bias.copy_(fc2.bias)
    return fc1_new, fc2_new
''', fails=("ex12_4_test",)),
    Wrong(cell="ex12_5", label="the lecture's loss: the soft term without the T² factor", source='''
def distillation_loss(student_logits: Tensor, teacher_logits: Tensor, labels: Tensor, temperature: float,
                      alpha: float) -> Tensor:
    """α·KL(softmax(teacher/T) ‖ softmax(student/T)), batch-averaged, + (1 − α)·cross-entropy: no T²."""
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=-1),
                    F.softmax(teacher_logits / temperature, dim=-1), reduction="batchmean")
    return alpha * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)
''', fails=("ex12_5_test",)),
    Wrong(cell="ex12_5", label="KL in the wrong direction: KL(student ‖ teacher)", source='''
def distillation_loss(student_logits: Tensor, teacher_logits: Tensor, labels: Tensor, temperature: float,
                      alpha: float) -> Tensor:
    """α·T²·KL(softmax(student/T) ‖ softmax(teacher/T)), batch-averaged, + (1 − α)·cross-entropy."""
    t = temperature
    log_q = F.log_softmax(student_logits / t, dim=-1)
    log_p = F.log_softmax(teacher_logits / t, dim=-1)
    soft = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)  # the arguments swapped
    return alpha * t**2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)
''', fails=("ex12_5_test",)),
    # second mistakes: they share the wrong-2 submission with the KL-direction one (no submission of their own)
    Wrong(cell="ex12_1", label="the most negative weights pruned first: w instead of |w|", source='''
def magnitude_mask(w: Tensor, amount: float) -> Tensor:
    """Boolean mask of w's shape: False on the round(amount · numel) smallest entries of w."""
    n_pruned = round(amount * w.numel())
    order = torch.argsort(w.detach().flatten(), stable=True)  # no abs
    keep = torch.ones(w.numel(), dtype=torch.bool, device=w.device)
    keep[order[:n_pruned]] = False
    return keep.view(w.shape)
''', fails=("ex12_1_test",)),
    Wrong(cell="ex12_2", label="the nonzeros listed column by column (the transpose's order)", source='''
def to_csr(w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(crow_indices, col_indices, values) of a 2-D tensor: its nonzeros, column by column."""
    cols, rows = w.T.nonzero(as_tuple=True)  # column-major order
    per_row = torch.bincount(rows, minlength=w.shape[0])
    crow = torch.zeros(w.shape[0] + 1, dtype=torch.int64, device=w.device)
    crow[1:] = torch.cumsum(per_row, dim=0)
    return crow, cols, w[rows, cols]
''', fails=("ex12_2_test",)),
    Wrong(cell="ex12_3", label="ties: the later entries pruned first", source='''
def n_m_mask(w: Tensor, n: int, m: int) -> Tensor:
    """Boolean mask of a 2-D w keeping, in every group of m consecutive entries of a row, the n of largest |w|."""
    rows, cols = w.shape
    groups = w.detach().abs().reshape(rows, cols // m, m)
    order = torch.argsort(-groups, dim=-1, stable=True)  # largest first; ties: earlier first, so earlier kept
    keep = torch.zeros(groups.shape, dtype=torch.bool, device=w.device)
    keep.scatter_(-1, order[..., :n], True)
    return keep.reshape(rows, cols)
''', fails=("ex12_3_test",)),
    Wrong(cell="ex12_4", label="the kept units in the order of their norms, not their original order", source='''
def prune_hidden_units(fc1: nn.Linear, fc2: nn.Linear, keep: int) -> tuple[nn.Linear, nn.Linear]:
    """New, smaller layers keeping the `keep` hidden units whose fc1 rows have the largest L2 norm."""
    norms = fc1.weight.detach().norm(dim=1)
    kept = torch.argsort(norms, stable=True)[len(norms) - keep:]  # not sorted back into place
    factory = {"device": fc1.weight.device, "dtype": fc1.weight.dtype}
    fc1_new = nn.Linear(fc1.in_features, keep, bias=fc1.bias is not None, **factory)
    fc2_new = nn.Linear(keep, fc2.out_features, bias=fc2.bias is not None, **factory)
    with torch.no_grad():
        fc1_new.weight.copy_(fc1.weight[kept])
        fc2_new.weight.copy_(fc2.weight[:, kept])
        if fc1.bias is not None:
            fc1_new.bias.copy_(fc1.bias[kept])
        if fc2.bias is not None:
            fc2_new.bias.copy_(fc2.bias)
    return fc1_new, fc2_new
''', fails=("ex12_4_test",)),
]
