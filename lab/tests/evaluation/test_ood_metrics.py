"""NearFarOODMetrics: known separability, group means, bad input."""

import pytest
import torch

from signorm_lab.evaluation import NearFarOODMetrics

SETS = [("near", "CIFAR100"), ("near", "TinyImageNet"), ("far", "SVHN"), ("far", "MNIST")]


def _scores(n: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=generator)


def test_separable_sets_score_auroc_1_fpr95_0_and_overlapping_about_half():
    generator = torch.Generator().manual_seed(0)
    metrics = NearFarOODMetrics(SETS)
    metrics.update_id(_scores(4000, -1.0, -0.5, generator))  # in-distribution: low OOD scores
    # far sets: every score above every ID score; near sets: the ID distribution itself
    metrics.update_ood("far", "SVHN", _scores(3000, -0.4, 0.0, generator))
    metrics.update_ood("far", "MNIST", _scores(3000, -0.49, -0.1, generator))
    metrics.update_ood("near", "CIFAR100", _scores(4000, -1.0, -0.5, generator))
    metrics.update_ood("near", "TinyImageNet", _scores(4000, -1.0, -0.5, generator))
    results = metrics.compute()

    for name in ("SVHN", "MNIST"):
        assert results[f"ood_far/{name}/AUROC"] == 1.0
        assert results[f"ood_far/{name}/AUPR"] == 1.0
        assert results[f"ood_far/{name}/FPR95"] == 0.0
    for name in ("CIFAR100", "TinyImageNet"):
        assert results[f"ood_near/{name}/AUROC"] == pytest.approx(0.5, abs=0.03)
        assert results[f"ood_near/{name}/FPR95"] == pytest.approx(0.95, abs=0.03)
        # AUPR of a chance detector is the OOD share, here 4000 / 8000
        assert results[f"ood_near/{name}/AUPR"] == pytest.approx(0.5, abs=0.03)


def test_group_values_are_the_mean_of_their_sets():
    generator = torch.Generator().manual_seed(1)
    metrics = NearFarOODMetrics(SETS)
    metrics.update_id(_scores(500, -1.0, -0.2, generator))
    for (group, name), shift in zip(SETS, (0.05, 0.2, 0.4, 0.7), strict=True):
        for _ in range(3):  # several batches
            metrics.update_ood(group, name, _scores(100, -1.0 + shift, -0.2 + shift, generator))
    results = metrics.compute()
    for group in ("near", "far"):
        names = [name for g, name in SETS if g == group]
        for metric in ("AUROC", "AUPR", "FPR95"):
            per_set = torch.stack([results[f"ood_{group}/{n}/{metric}"] for n in names])
            torch.testing.assert_close(results[f"ood_{group}/{metric}"], per_set.mean())
    # the further the shift, the better the detection
    assert results["ood_near/CIFAR100/AUROC"] < results["ood_near/TinyImageNet/AUROC"]
    assert results["ood_near/AUROC"] < results["ood_far/AUROC"]
    assert results["ood_near/FPR95"] > results["ood_far/FPR95"]


def test_each_set_is_scored_against_the_in_distribution_set_only():
    """Scores of one OOD set never leak into another set's detection problem."""
    metrics = NearFarOODMetrics([("near", "A"), ("far", "B")])
    metrics.update_id(torch.tensor([0.0, 0.1, 0.2, 0.3]))
    metrics.update_ood("near", "A", torch.tensor([0.05, 0.15, 0.25, 0.35]))
    metrics.update_ood("far", "B", torch.tensor([1.0, 2.0]))
    results = metrics.compute()
    # A vs ID: pairs (ood > id) = 10 of 16
    assert results["ood_near/A/AUROC"] == pytest.approx(10 / 16)
    assert results["ood_far/B/AUROC"] == 1.0
    metrics.reset()
    with pytest.raises(
        RuntimeError, match=r"No OOD scores were received for \['near/A', 'far/B'\]"
    ):
        metrics.compute()


def test_bad_sets_are_rejected_with_the_valid_choices():
    with pytest.raises(ValueError, match="at least one"):
        NearFarOODMetrics([])
    with pytest.raises(ValueError, match=r"Unknown OOD group 'middle' for set 'X'.*near"):
        NearFarOODMetrics([("middle", "X")])
    with pytest.raises(ValueError, match=r"more than once: \['far/SVHN'\]"):
        NearFarOODMetrics([("far", "SVHN"), ("far", "SVHN")])
    metrics = NearFarOODMetrics([("far", "SVHN")])
    with pytest.raises(ValueError, match=r"Unknown OOD set near/SVHN"):
        metrics.update_ood("near", "SVHN", torch.zeros(2))
