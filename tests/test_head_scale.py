"""The member heads' norm must not amplify the gradient a converted backbone receives.

A BERT classifier's heads read the pooler's tanh outputs, whose per-input standard deviation is
small (~0.07 on the packaged MiniLM): a unit-scale norm there multiplies the gradient reaching the
shared encoder by ~15, which drove every converted run of the tweets schedule to one-class
predictions (docs/reliability.md; the packaged model and the collapse itself: the lab's
lab/tests/test_head_scale.py). With the converted default (``head_scale_init="auto"`` →
``"features"``) the encoder receives the wrapped model's gradient.
"""

import copy

import pytest
import torch
from torch import nn

from fixtures.backbones import bert_inputs, tiny_bert
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.members.head_norm import HeadBatchNorm, HeadLayerNorm


def _pretrained_like_bert() -> nn.Module:
    """The tiny BERT classifier with LayerNorm scales moved off 1, as loaded weights are: its
    pooler's tanh outputs have a per-input standard deviation of ~0.1, as MiniLM's (~0.07)."""
    model = tiny_bert(num_labels=3)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.add_(0.05 * torch.randn_like(module.weight))
    return model


def _pooler_gradient(model: nn.Module, inputs: dict, labels: torch.Tensor) -> float:
    """Norm of the gradient at the pooler's dense weight after one training backward."""
    model.train()
    if hasattr(model, "diversity_loss"):
        loss = nn.functional.cross_entropy(model(inputs), labels) + model.diversity_loss()
        bert = model.backbone.bert
    else:
        loss = nn.functional.cross_entropy(model(**inputs).logits, labels)
        bert = model.bert
    loss.backward()
    return float(bert.pooler.dense.weight.grad.norm())


@pytest.mark.parametrize(("scale_init", "low", "high"), [("auto", 0.5, 2.0), ("unit", 5.0, 40.0)])
def test_converted_heads_pass_the_wrapped_models_gradient(scale_init, low, high):
    """On small pooled features a unit-scale head norm multiplies the encoder's gradient (~9×
    here, ~15× on the packaged MiniLM: the lab's lab/tests/test_head_scale.py); the converted
    default passes the wrapped model's."""
    torch.manual_seed(0)
    single = _pretrained_like_bert()
    inputs, labels = bert_inputs(batch_size=16), torch.randint(0, 3, (16,))
    ensemble = signorm_ensemble(
        copy.deepcopy(single),
        1,
        pretrained=True,
        regularized_layers="transformer",
        head_scale_init=scale_init,
    )
    with torch.no_grad():  # the same linear layer reads the features in both models
        ensemble.heads.weight[0].copy_(single.classifier.weight)
        ensemble.heads.bias[0].copy_(single.classifier.bias)
    ratio = _pooler_gradient(ensemble, inputs, labels) / _pooler_gradient(single, inputs, labels)
    assert low <= ratio <= high, f"gradient ratio {ratio:.2f} not in [{low}, {high}]"


def test_the_head_norm_starts_at_its_inputs_scale_once():
    torch.manual_seed(0)
    norm = HeadLayerNorm(16, 2, scale_init="features")
    features = 0.05 * torch.randn(8, 16)
    with torch.no_grad():
        out = norm.train()(features)
    expected = features.var(dim=-1, unbiased=False).add(norm.eps).sqrt().mean()
    torch.testing.assert_close(norm.weight, expected.expand(2, 16))
    assert out.std(dim=-1).mean() == pytest.approx(float(features.std(dim=-1).mean()), rel=0.05)
    norm(10 * features)  # measured once: a later batch, a resumed run, never re-measures
    torch.testing.assert_close(norm.weight, expected.expand(2, 16))
    batch = HeadBatchNorm(4, 2, scale_init="features")
    rows = torch.randn(10, 4) * torch.tensor([0.1, 1.0, 3.0, 0.01])
    torch.testing.assert_close(
        batch(rows).detach(), rows - rows.view(5, 2, 4).mean(0).repeat(5, 1), rtol=1e-4, atol=1e-4
    )  # BatchNorm scaled to its input: centring


def test_from_scratch_heads_keep_the_papers_unit_scale():
    norm = HeadLayerNorm(8, 3)
    norm(torch.randn(6, 8) * 0.01)
    assert torch.equal(norm.weight, torch.ones(3, 8)) and bool(norm.scale_initialised)
    with pytest.raises(ValueError, match=r"head scale_init must be one of .*got 'data'"):
        HeadLayerNorm(8, 3, scale_init="data")
