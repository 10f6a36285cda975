"""Diversity measures: weight-space (σNorm-cos, ownership) and output-space identities."""

import pytest
import torch

from torch_uncertainty_signorm import (
    geometric_ambiguity,
    jensen_gap,
    member_ownership,
    mutual_information,
    ownership_counts,
    pairwise_cosine,
    signorm_cosine,
)


def test_pairwise_cosine_matches_the_definition():
    imp = torch.rand(4, 9, dtype=torch.float64)
    pairs = [
        torch.nn.functional.cosine_similarity(imp[i], imp[j], dim=0)
        for i in range(4)
        for j in range(i + 1, 4)
    ]
    torch.testing.assert_close(pairwise_cosine(imp), torch.stack(pairs).mean())


def test_signorm_cosine_is_one_for_identical_members_and_zero_for_a_partition():
    shared = torch.rand(1, 6).expand(3, 6)
    assert signorm_cosine([shared, torch.rand(1, 4).expand(3, 4)]).item() == pytest.approx(1.0)
    partition = torch.eye(3).repeat_interleave(2, dim=1)  # each feature has one owner
    assert signorm_cosine([partition]).item() == pytest.approx(0.0)
    assert signorm_cosine([shared, partition]).item() == pytest.approx(0.5)


def test_ownership_counts_each_feature_once():
    imp = torch.tensor([[0.9, 0.1, 0.6, 0.2], [0.8, 0.2, 0.4, 0.3], [0.7, 0.3, 0.1, 0.9]])
    assert member_ownership(imp).tolist() == [3, 0, 1, 1]
    counts = ownership_counts([imp, torch.full((3, 2), 0.9)])
    assert counts.tolist() == [1, 2, 0, 3]
    assert counts.sum() == 6


def _random_probs(members=4, batch=32, classes=5):
    return torch.softmax(torch.randn(members, batch, classes, dtype=torch.float64) * 2, dim=-1)


def test_output_measures_vanish_when_members_agree_and_are_positive_otherwise():
    agree = _random_probs(members=1).expand(4, -1, -1)
    targets = torch.randint(0, 5, (32,))
    for value in (
        jensen_gap(agree, targets),
        mutual_information(agree),
        geometric_ambiguity(agree),
    ):
        torch.testing.assert_close(value, torch.zeros(32, dtype=torch.float64))
    probs = _random_probs()
    assert torch.all(mutual_information(probs) > 0)
    assert torch.all(geometric_ambiguity(probs) > 0)
    assert torch.all(jensen_gap(probs, targets) > 0)  # Jensen: mean of -log > -log of mean


def test_mutual_information_is_mean_kl_to_the_mean_prediction():
    probs = _random_probs()
    mean = probs.mean(0, keepdim=True)
    kl = (probs * (probs.log() - mean.log())).sum(-1).mean(0)
    torch.testing.assert_close(mutual_information(probs), kl)


def test_geometric_ambiguity_is_the_cross_entropy_diversity_term_for_every_label():
    probs = _random_probs()
    log_geo = probs.log().mean(0)
    centroid = torch.softmax(log_geo, dim=-1)  # normalized geometric mean
    kl = (centroid * (centroid.log() - probs.log())).sum(-1).mean(0)
    torch.testing.assert_close(geometric_ambiguity(probs), kl)
    for label in range(5):  # mean member CE - CE of the centroid, whatever the label
        member_ce = -probs[..., label].log().mean(0)
        centroid_ce = -centroid[..., label].log()
        torch.testing.assert_close(geometric_ambiguity(probs), member_ce - centroid_ce)


def test_mutual_information_agrees_with_torch_uncertainty_metric():
    from torch_uncertainty.metrics import MutualInformation

    probs = _random_probs().float()
    metric = MutualInformation(reduction="mean")
    metric.update(probs.transpose(0, 1))  # TorchUncertainty takes (B, M, C)
    torch.testing.assert_close(
        metric.compute(), mutual_information(probs).mean(), rtol=1e-4, atol=1e-5
    )


def test_signorm_cosine_resolves_nearly_identical_members_under_mixed_precision():
    """bf16 autocast would round the cosine's product to steps of about 0.004."""
    generator = torch.Generator().manual_seed(0)
    importance = torch.rand(1, 384, generator=generator).repeat(4, 1)
    importance[1:] += 2e-3 * torch.randn(3, 384, generator=generator)
    expected = signorm_cosine([importance.double()]).item()
    assert 0.9995 < expected < 0.99999
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = signorm_cosine([importance])
    assert mixed.dtype == torch.float32
    assert abs(mixed.item() - expected) < 1e-6


def test_the_weight_measures_take_the_model_or_its_importances_and_return_no_graph():
    """signorm_cosine(model) used to raise `object of type 'SigmaNormEnsemble' has no len()`,
    and float(signorm_cosine(model.importances())) warned about requires_grad."""
    import warnings

    from fixtures.backbones import tiny_resnet
    from torch_uncertainty_signorm import signorm_ensemble
    from torch_uncertainty_signorm.evaluation.diversity import ownership_fractions

    torch.manual_seed(0)
    model = signorm_ensemble(tiny_resnet(), 3)
    importances = model.importances()
    assert importances[0].requires_grad  # the weights' graph: what a measure must not keep
    cosine = signorm_cosine(model)
    assert cosine.item() == pytest.approx(signorm_cosine(importances).item())
    assert not cosine.requires_grad and cosine.grad_fn is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert 0.0 < float(cosine) < 1.0
    assert torch.equal(ownership_fractions(model), ownership_fractions(importances))
    assert signorm_cosine(importances[0]).item() == pytest.approx(
        signorm_cosine(importances[:1]).item()
    )  # one layer's (M, F) tensor
    with pytest.raises(
        TypeError,
        match=r"signorm_cosine takes a σN-Ens model \(anything with "
        r"importances\(\)\) or its importances .* got Linear",
    ):
        signorm_cosine(torch.nn.Linear(2, 2))
