"""Notebook 12: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell='ex12_1', label='the smallest |w| pruned per row instead of over the whole tensor', source='''
def magnitude_mask(w: Tensor, amount: float) -> Tensor:
    """Boolean mask: in every row, False on the round(amount · row length) entries of smallest |w|."""
    rows = w.detach().abs().reshape(-1, w.shape[-1])  # (rows, last dim)
    n_pruned = round(amount * rows.shape[1])
    order = torch.argsort(rows, dim=1, stable=True)
    keep = torch.ones(rows.shape, dtype=torch.bool, device=w.device)
    keep.scatter_(1, order[:, :n_pruned], False)
    return keep.view(w.shape)
''', fails=('ex12_1_test',), teaches='the smallest entries were chosen per row or per column, not over the whole tensor'),
    Wrong(cell='ex12_2', label='crow_indices as the nonzeros of each row, not their running sum', source='''
def to_csr(w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(crow_indices, col_indices, values) of a 2-D tensor: its nonzeros row by row."""
    rows, cols = w.nonzero(as_tuple=True)
    per_row = torch.bincount(rows, minlength=w.shape[0])
    crow = torch.zeros(w.shape[0] + 1, dtype=torch.int64, device=w.device)
    crow[1:] = per_row  # counts, not offsets
    return crow, cols, w[rows, cols]
''', fails=('ex12_2_test',), teaches="crow_indices are not each row's starting offset into the nonzeros (0 first, nnz last)"),
    Wrong(cell='ex12_3', label='the CSR arrays turned back into a dense matrix and multiplied densely, zeros and all', source='''
def csr_matmul(crow: Tensor, col: Tensor, values: Tensor, x: Tensor) -> Tensor:
    """The dense (rows, n) product of the matrix held in CSR by (crow, col, values) with a dense x of shape (cols, n)."""
    rows = torch.repeat_interleave(torch.arange(len(crow) - 1), crow[1:] - crow[:-1])  # the row of every nonzero
    w = torch.zeros(len(crow) - 1, x.shape[0], dtype=x.dtype, device=x.device)
    w[rows, col] = values  # the matrix rebuilt, zeros and all
    return w @ x  # a dense matmul: every zero multiplied
''', fails=('ex12_3_skips',), teaches='the product read rows of x that no nonzero needs: it multiplied zeros'),
    Wrong(cell='ex12_4', label='the n largest signed values kept instead of the n largest |w|', source='''
def n_m_mask(w: Tensor, n: int, m: int) -> Tensor:
    """Boolean mask of a 2-D w keeping, in every group of m consecutive entries of a row, the n largest values."""
    rows, cols = w.shape
    groups = w.detach().reshape(rows, cols // m, m)  # no abs: a large negative weight counts as small
    order = torch.argsort(groups, dim=-1, stable=True)
    keep = torch.zeros(groups.shape, dtype=torch.bool, device=w.device)
    keep.scatter_(-1, order[..., m - n:], True)
    return keep.reshape(rows, cols)
''', fails=('ex12_4_test',), teaches='in a group, the entries kept were not those of largest |w|'),
    Wrong(cell='ex12_5', label='the hidden units of smallest norm kept instead of the largest', source='''
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
''', fails=('ex12_5_test',), teaches='the units kept were not those whose fc1 rows have the largest L2 norm'),
    Wrong(cell='ex12_6', label='pruned to the final amount at once, then fine-tuned `rounds` times', source='''
from collections.abc import Callable, Sequence


def gradual_prune(layers: Sequence[nn.Module], amount: float, rounds: int, finetune: Callable[[], None],
                  mask_of: Callable[[Tensor, float], Tensor]) -> None:
    """Prune `amount` of every layer's weight in `rounds` equal steps, calling finetune() after each, in place."""
    for layer in layers:
        prune.custom_from_mask(layer, "weight", mask_of(layer.weight.detach(), amount))  # all at once
    for _ in range(rounds):
        finetune()
    for layer in layers:
        prune.remove(layer, "weight")
''', fails=('ex12_6_test',), teaches='a round did not bring each weight to amount · r / rounds zeros'),
    Wrong(cell='ex12_7', label="the lecture's loss: the soft term without the T² factor", source='''
def distillation_loss(student_logits: Tensor, teacher_logits: Tensor, labels: Tensor, temperature: float,
                      alpha: float) -> Tensor:
    """α·KL(softmax(teacher/T) ‖ softmax(student/T)), batch-averaged, + (1 − α)·cross-entropy: no T²."""
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=-1),
                    F.softmax(teacher_logits / temperature, dim=-1), reduction="batchmean")
    return alpha * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)
''', fails=('ex12_7_test',), teaches="the loss's gradient in the student's logits is not the soft and hard terms' (check the T² factor, the direction of the KL and the batch average)"),
    # second mistakes: they share the wrong-2 submission
    Wrong(cell='ex12_1', label='the most negative weights pruned first: w instead of |w|', source='''
def magnitude_mask(w: Tensor, amount: float) -> Tensor:
    """Boolean mask of w's shape: False on the round(amount · numel) smallest entries of w."""
    n_pruned = round(amount * w.numel())
    order = torch.argsort(w.detach().flatten(), stable=True)  # no abs
    keep = torch.ones(w.numel(), dtype=torch.bool, device=w.device)
    keep[order[:n_pruned]] = False
    return keep.view(w.shape)
''', fails=('ex12_1_test',), teaches='the entries pruned were not those of smallest |w|'),
    Wrong(cell='ex12_2', label="PyTorch's own conversion (to_sparse_csr) instead of the arrays built by hand", source='''
def to_csr(w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(crow_indices, col_indices, values) of a 2-D tensor: its nonzeros row by row, as torch's CSR layout holds them."""
    s = w.to_sparse_csr()  # PyTorch's own conversion: nothing built
    return s.crow_indices(), s.col_indices(), s.values()
''', fails=('ex12_2_test',), teaches='the CSR arrays were made by a sparse conversion, not built by hand'),
    Wrong(cell='ex12_3', label="torch's sparse CSR kernel called on the arrays instead of a loop over the rows", source='''
def csr_matmul(crow: Tensor, col: Tensor, values: Tensor, x: Tensor) -> Tensor:
    """The dense (rows, n) product of the matrix held in CSR by (crow, col, values) with a dense x of shape (cols, n)."""
    w = torch.sparse_csr_tensor(crow, col, values, size=(len(crow) - 1, x.shape[0]))  # torch's own kernel
    return w @ x
''', fails=('ex12_3_skips',), teaches="the product went through a dense matrix or torch's sparse tensors, not the CSR arrays"),
    Wrong(cell='ex12_4', label='ties: the later entries pruned first', source='''
def n_m_mask(w: Tensor, n: int, m: int) -> Tensor:
    """Boolean mask of a 2-D w keeping, in every group of m consecutive entries of a row, the n of largest |w|."""
    rows, cols = w.shape
    groups = w.detach().abs().reshape(rows, cols // m, m)
    order = torch.argsort(-groups, dim=-1, stable=True)  # largest first; ties: earlier first, so earlier kept
    keep = torch.zeros(groups.shape, dtype=torch.bool, device=w.device)
    keep.scatter_(-1, order[..., :n], True)
    return keep.reshape(rows, cols)
''', fails=('ex12_4_test',), teaches='among entries of equal |w| in a group the later one was not kept first'),
    Wrong(cell='ex12_5', label='the kept units in the order of their norms, not their original order', source='''
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
''', fails=('ex12_5_test',), teaches='the kept units are not in their original order'),
    Wrong(cell='ex12_6', label='each round ranks layer.weight, stale after the fine-tune, not weight_orig × weight_mask', source='''
from collections.abc import Callable, Sequence


def gradual_prune(layers: Sequence[nn.Module], amount: float, rounds: int, finetune: Callable[[], None],
                  mask_of: Callable[[Tensor, float], Tensor]) -> None:
    """Prune `amount` of every layer's weight in `rounds` equal steps, calling finetune() after each, in place."""
    for r in range(1, rounds + 1):
        for layer in layers:
            # layer.weight: the product the last forward pass computed, stale after the fine-tune
            prune.custom_from_mask(layer, "weight", mask_of(layer.weight.detach(), amount * r / rounds))
        finetune()
    for layer in layers:
        prune.remove(layer, "weight")
''', fails=('ex12_6_test',), teaches='a round did not rank the weight as the layer applies it after the fine-tune (weight_orig × weight_mask)'),
    Wrong(cell='ex12_7', label='KL in the wrong direction: KL(student ‖ teacher)', source='''
def distillation_loss(student_logits: Tensor, teacher_logits: Tensor, labels: Tensor, temperature: float,
                      alpha: float) -> Tensor:
    """α·T²·KL(softmax(student/T) ‖ softmax(teacher/T)), batch-averaged, + (1 − α)·cross-entropy."""
    t = temperature
    log_q = F.log_softmax(student_logits / t, dim=-1)
    log_p = F.log_softmax(teacher_logits / t, dim=-1)
    soft = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)  # the arguments swapped
    return alpha * t**2 * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)
''', fails=('ex12_7_test',), teaches="the loss's gradient in the student's logits is not the soft and hard terms' (check the T² factor, the direction of the KL and the batch average)"),
]
