"""The output-preserving reparameterisation is exact for every finite scale, however small."""

import pytest
import torch
from torch import nn

from torch_uncertainty_signorm.signorm.layers import (
    MAX_CONVERTED_IMPORTANCE,
    MIN_CONVERTED_IMPORTANCE,
    SigmaLayerNorm,
    output_preserving_reparameterization,
)

# Real checkpoints hold such scales: MiniLM-L6's last LayerNorm goes from 0.79 down to 4.8e-33.
TINY_AND_SIGNED = [0.79, 4.8e-33, -1e-20, 1e-6, -3e-5, 0.0, -0.3, 2e-4]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tiny_and_negative_scales_are_reproduced_with_logits_in_range(dtype):
    weight = torch.tensor(TINY_AND_SIGNED, dtype=dtype)
    magnitude, factor, logits, shift = output_preserving_reparameterization(weight, None, 8)
    assert {t.dtype for t in (magnitude, factor, logits, shift)} == {dtype}
    rtol = 1e-12 if dtype == torch.float64 else 1e-6
    torch.testing.assert_close(
        magnitude * factor * torch.sigmoid(logits), weight, rtol=rtol, atol=0
    )
    importance = torch.sigmoid(logits.double())
    assert importance.min() == pytest.approx(MIN_CONVERTED_IMPORTANCE, rel=1e-5)
    assert importance.max() == pytest.approx(MAX_CONVERTED_IMPORTANCE, rel=1e-6)
    # The paper's logits where sigma can carry the scale; the frozen factor is the sign there.
    large = weight.abs() / magnitude >= MIN_CONVERTED_IMPORTANCE
    assert torch.equal(factor[large], torch.sign(weight[large]))
    assert torch.all(factor[~large].abs() < 1)


def test_non_finite_scales_are_refused_by_value():
    with pytest.raises(ValueError, match=r"weight holds a non-finite value \(inf\)"):
        output_preserving_reparameterization(torch.tensor([1.0, float("inf")]), None, 2)
    with pytest.raises(ValueError, match=r"bias holds a non-finite value \(nan\)"):
        output_preserving_reparameterization(None, torch.tensor([float("nan"), 0.0]), 2)


def test_converted_layer_norm_with_tiny_scales_matches_in_float64():
    norm = nn.LayerNorm(8, dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor(TINY_AND_SIGNED))
        norm.bias.normal_()
    layer = SigmaLayerNorm.from_module(norm, num_estimators=3, pretrained=True)
    x = torch.randn(3 * 4, 5, 8, dtype=torch.float64)
    torch.testing.assert_close(layer(x), norm(x), rtol=1e-13, atol=1e-13)
