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
''', teaches="autograd's backward ran inside: the gradients were not computed by hand"),
    Wrong(cell="ex0_4", label="the lecture's backward: y·(1 − y) from the saved output, 0 in the right tail", source='''
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
''', teaches="the gradient cancels in the right tail: 1 − y is 0 once y rounds to 1"),
    Wrong(cell="ex0_2", label="a library call: loss.backward() does the walk", source='''
def my_backward(loss: torch.Tensor) -> None:
    """Add d(loss)/d(leaf) into .grad of every leaf of loss's graph that requires a gradient, as loss.backward() does."""
    loss.backward()
''', teaches="autograd's own engine ran inside (loss.backward() or torch.autograd.grad)"),
    Wrong(cell="ex0_2", label="a skipped step: each path from the loss walked on its own, no topological order",
          source='''
def my_backward(loss: torch.Tensor) -> None:
    """Add d(loss)/d(leaf) into .grad of every leaf of loss's graph that requires a gradient, as loss.backward() does."""

    def send(node, grad: torch.Tensor) -> None:  # depth first: every path from the loss on its own
        if hasattr(node, "variable"):
            leaf = node.variable
            leaf.grad = grad.clone() if leaf.grad is None else leaf.grad + grad
            return
        grads = node(grad)
        if isinstance(grads, torch.Tensor):
            grads = (grads,)
        for (parent, _), g in zip(node.next_functions, grads):
            if parent is not None and g is not None:
                send(parent, g)

    with torch.no_grad():
        send(loss.grad_fn, torch.ones_like(loss))
''', teaches="a node ran once per path through the graph, not once with the sum of its gradients"),
    Wrong(cell="ex0_3", label="the usual loop: .grad zeroed before every backward", source='''
def accumulated_grad(w0: float, x: float, y: float, lr: float, steps: int) -> float:
    """w.grad after `steps` SGD steps on (w·x − y)² that never zero the gradient, starting from w = w0."""
    w = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
    for _ in range(steps):
        w.grad = None
        loss = (w * x - y) ** 2
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
    return float(w.grad)
''', teaches=".grad was zeroed between steps: it must keep the running sum"),
    Wrong(cell="ex0_6", label="a library call: parameters() does the walk", source='''
def count_params(module: nn.Module) -> int:
    """Number of parameter elements of `module` and its submodules, each tensor once, frozen ones included."""
    return sum(p.numel() for p in module.parameters())
''', teaches="parameters() (or modules()) did the walk, not your function"),
    Wrong(cell="ex0_5", label="the ReLU forgotten: two linear layers in a row are one linear map", source='''
class TwoLayerNet(nn.Module):
    """The lecture's two-layer net: Linear(d_in, hidden) → ReLU → Linear(hidden, d_out), biases included."""

    def __init__(self, d_in: int, hidden: int, d_out: int) -> None:
        """Two nn.Linear layers, linear1 then linear2."""
        super().__init__()
        self.linear1 = nn.Linear(d_in, hidden)
        self.linear2 = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_in) -> (..., d_out)."""
        return self.linear2(self.linear1(x))
''', teaches="the forward is not linear1, then a ReLU, then linear2, both with their biases"),
]
