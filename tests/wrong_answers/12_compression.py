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
]
