"""Notebook 00: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex0_1", label="autograd inside: the right numbers, from torch.autograd.grad", source='''
def two_layer_grads(
    x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed squared error of relu(x @ w1) @ w2 against y, and its gradients for w1 and w2, by hand."""
    with torch.enable_grad():  # switched back on inside the tests' no_grad
        w1 = w1.detach().requires_grad_()
        w2 = w2.detach().requires_grad_()
        loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
        grad_w1, grad_w2 = torch.autograd.grad(loss, (w1, w2))
    return loss.detach(), grad_w1, grad_w2
'''),
    Wrong(cell="ex0_3", label="the lecture's backward: y·(1 − y) from the saved output, 0 in the right tail", source='''
from typing import Any


class StableSigmoid(torch.autograd.Function):
    """σ(x) = 1 / (1 + exp(−x)) without overflow, with a gradient accurate in both tails."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        """σ(x) for any x; saves one tensor of x's size for the backward."""
        e = torch.exp(-x.abs())
        y = torch.where(x >= 0, 1 / (1 + e), e / (1 + e))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> torch.Tensor:
        """The gradient of the loss with respect to x, from what the forward saved."""
        (y,) = ctx.saved_tensors
        return grad_y * y * (1 - y)
'''),
]
