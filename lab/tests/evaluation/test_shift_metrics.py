"""SeverityShiftMetrics: per-corruption metrics averaged per severity, bad input."""

import pytest
import torch
from torch_uncertainty.metrics import CalibrationError

from signorm_lab.evaluation import SeverityShiftMetrics


def _batch(n: int, accuracy: float, confidence: float, num_classes: int = 4):
    """Predictions of confidence ``confidence`` on the predicted class, right on ``accuracy``."""
    targets = torch.arange(n) % num_classes
    predicted = targets.clone()
    wrong = round(n * (1 - accuracy))
    predicted[:wrong] = (targets[:wrong] + 1) % num_classes
    probs = torch.full((n, num_classes), (1 - confidence) / (num_classes - 1))
    probs[torch.arange(n), predicted] = confidence
    return probs, targets


def test_metrics_are_computed_per_corruption_then_averaged():
    metrics = SeverityShiftMetrics(4, corruptions=["fog", "snow"], severities=[1, 3])
    batches = {
        (1, "fog"): _batch(40, accuracy=1.0, confidence=0.9),
        (1, "snow"): _batch(40, accuracy=0.5, confidence=0.9),
        (3, "fog"): _batch(40, accuracy=0.25, confidence=0.6),
        (3, "snow"): _batch(80, accuracy=0.75, confidence=0.6),
    }
    for (severity, corruption), (probs, targets) in batches.items():
        metrics.update(severity, corruption, probs[:20], targets[:20])
        metrics.update(severity, corruption, probs[20:], targets[20:])
    results = metrics.compute()

    assert results["shift/s1/Acc"] == pytest.approx((1.0 + 0.5) / 2)
    assert results["shift/s3/Acc"] == pytest.approx((0.25 + 0.75) / 2)
    # ECE of one set with a single confidence level is |accuracy - confidence|
    assert results["shift/s1/ECE"] == pytest.approx((0.1 + 0.4) / 2, abs=1e-6)
    assert results["shift/s3/ECE"] == pytest.approx((0.35 + 0.15) / 2, abs=1e-6)
    # the pooled ECE at severity 3 (unequal set sizes) would differ from the corruption mean
    pooled = CalibrationError(task="multiclass", num_classes=4, num_bins=15)
    pooled.update(
        torch.cat([batches[3, "fog"][0], batches[3, "snow"][0]]),
        torch.cat([batches[3, "fog"][1], batches[3, "snow"][1]]),
    )
    assert abs(float(pooled.compute()) - float(results["shift/s3/ECE"])) > 0.05
    # NLL: mean over samples of -log p(target), per set, then over corruptions
    nll_fog_1 = -torch.log(torch.tensor(0.9))
    nll_snow_1 = 0.5 * -torch.log(torch.tensor(0.9)) + 0.5 * -torch.log(torch.tensor(0.1 / 3))
    assert results["shift/s1/NLL"] == pytest.approx(float(nll_fog_1 + nll_snow_1) / 2, rel=1e-5)
    for metric in ("Acc", "NLL", "ECE"):
        expected = (results[f"shift/s1/{metric}"] + results[f"shift/s3/{metric}"]) / 2
        assert results[f"shift/mean/{metric}"] == pytest.approx(float(expected))


def test_every_set_must_be_seen_and_resets():
    metrics = SeverityShiftMetrics(4, corruptions=["fog"], severities=[2])
    with pytest.raises(RuntimeError, match=r"No predictions were received.*s2:fog"):
        metrics.compute()
    probs, targets = _batch(8, accuracy=1.0, confidence=0.9)
    metrics.update(2, "fog", probs, targets)
    assert metrics.compute()["shift/s2/Acc"] == 1.0
    metrics.reset()
    with pytest.raises(RuntimeError, match="No predictions"):
        metrics.compute()


def test_bad_arguments_name_the_value_and_the_valid_range():
    with pytest.raises(
        ValueError, match=r"severities must be distinct integers in 1\.\.5, got \[0, 6\]"
    ):
        SeverityShiftMetrics(4, ["fog"], severities=[0, 6])
    with pytest.raises(ValueError, match="non-empty list of distinct names"):
        SeverityShiftMetrics(4, [])
    metrics = SeverityShiftMetrics(4, ["fog"], severities=[1])
    probs, targets = _batch(4, accuracy=1.0, confidence=0.9)
    with pytest.raises(ValueError, match=r"Severity 2 / corruption 'fog' is not evaluated"):
        metrics.update(2, "fog", probs, targets)
