"""FiLM-Ensemble's BatchNorm under a residual block's in-place ops, as the σNorm layers (the
method's tests/signorm/test_signorm.py)."""

import torch

from signorm_lab.baselines import FiLMBatchNorm

M = 4


def test_in_place_ops_on_a_film_norm_output_are_plain_and_exact():
    """A residual block's ``out += shortcut; out.relu_()`` on a norm output: allowed, with
    the gradients of the out-of-place ops, and no copy-on-write of a view's base."""
    layer = FiLMBatchNorm(4, M).train()
    shape = (M * 3, 4, 3, 5)
    x = torch.randn(shape, requires_grad=True)
    shortcut, grad = torch.randn(shape), torch.randn(shape)

    reference = torch.relu(layer(x) + shortcut)
    expected = torch.autograd.grad(reference, (x, *layer.parameters()), grad)
    out = layer(x)
    assert out._base is None
    out += shortcut
    out.relu_()
    assert type(out.grad_fn).__name__ == "ReluBackward0"  # in place on the tensor itself
    torch.testing.assert_close(out, reference)
    got = torch.autograd.grad(out, (x, *layer.parameters()), grad)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
