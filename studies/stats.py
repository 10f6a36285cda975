"""The statistics behind the studies' "better", "flat" and "correlated": intervals and tests.

Every function returns plain floats in a dict, ready for a table row. Intervals are two-sided
at ``confidence`` (95 % by default); tests, intervals and the multiple-testing correction are
scipy.stats' and statsmodels', never written here.

* :func:`mean_interval`: mean and t interval of one sample (e.g. a metric over seeds);
* :func:`paired_difference`: mean difference ``a - b`` over pairs, t interval and paired t-test;
* :func:`welch_difference`: ``mean(a) - mean(b)`` for unpaired samples, Welch interval and test;
* :func:`spearman_interval`: Spearman ρ with a bootstrap interval (pairs resampled);
* :func:`spearman_p`: Spearman's p-value, exact (all pairings) for a handful of points;
* :func:`correlation_ratio`: η of a measurement on a grouping (the most any function of the
  group can explain, as a correlation);
* :func:`within_group_spearman`: Spearman ρ of two measurements after removing group means;
* :func:`least_squares_change`: the change a straight-line fit predicts over a window (the
  studies' convergence check);
* :func:`holm`: Holm's step-down test of a family (statsmodels'), with each hypothesis's
  interval confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

from signorm_lab.reproduction.paired import mean_interval

__all__ = [
    "EXACT_UP_TO",
    "correlation_ratio",
    "holm",
    "least_squares_change",
    "mean_interval",
    "paired_difference",
    "spearman_interval",
    "spearman_p",
    "welch_difference",
    "within_group_spearman",
]

#: Up to this many points, Spearman's p-value is the exact permutation one (8! pairings).
EXACT_UP_TO = 8


def _array(values: Sequence[float], name: str, minimum: int = 1) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) < minimum:
        raise ValueError(
            f"{name} needs a 1-D sample of at least {minimum} values, got shape {array.shape}."
        )
    return array


def paired_difference(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> dict[str, float]:
    """Mean of ``a - b`` over pairs with its t interval and the paired t-test's p-value.

    Raises:
        ValueError: If ``a`` and ``b`` differ in length or hold fewer than two pairs.
    """
    a, b = _array(a, "paired_difference", 2), _array(b, "paired_difference", 2)
    if len(a) != len(b):
        raise ValueError(f"paired samples must have equal lengths, got {len(a)} and {len(b)}.")
    row = mean_interval(a - b, confidence)
    differences = a - b
    row["p"] = (
        float(stats.ttest_rel(a, b).pvalue)
        if np.ptp(differences) > 0
        else (1.0 if differences[0] == 0 else 0.0)
    )
    return row


def welch_difference(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95, alternative: str = "two-sided"
) -> dict[str, float]:
    """``mean(a) - mean(b)`` with Welch's interval (two-sided) and test p-value
    (``alternative`` as in :func:`scipy.stats.ttest_ind`)."""
    a, b = _array(a, "welch_difference", 2), _array(b, "welch_difference", 2)
    test = stats.ttest_ind(a, b, equal_var=False, alternative=alternative)
    interval = stats.ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
    return {
        "mean": float(a.mean() - b.mean()),
        "low": float(interval.low),
        "high": float(interval.high),
        "p": float(test.pvalue),
        "n": len(a) + len(b),
    }


def spearman_interval(
    x: Sequence[float],
    y: Sequence[float],
    confidence: float = 0.95,
    n_resamples: int = 9999,
    seed: int = 0,
) -> dict[str, float]:
    """Spearman ρ of ``x`` and ``y``, its p-value and a percentile bootstrap interval
    (:func:`scipy.stats.bootstrap`, pairs resampled together)."""
    x, y = _array(x, "spearman_interval", 3), _array(y, "spearman_interval", 3)
    result = stats.spearmanr(x, y)

    def rho(xs, ys):
        return stats.spearmanr(xs, ys).statistic

    boot = stats.bootstrap(
        (x, y),
        rho,
        paired=True,
        vectorized=False,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        random_state=np.random.default_rng(seed),
    )
    return {
        "rho": float(result.statistic),
        "p": float(result.pvalue),
        "low": float(boot.confidence_interval.low),
        "high": float(boot.confidence_interval.high),
        "n": len(x),
    }


def spearman_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of Spearman's ρ: exact over all pairings for at most
    :data:`EXACT_UP_TO` points (ties included), else scipy's t approximation.

    The approximation is far off for a few points: 5 points in perfect order give p ≈ 1e-24
    from it, while 2 of the 120 pairings reach |ρ| = 1, so the exact p is 1/60 at best.
    """
    x, y = _array(x, "spearman_p", 3), _array(y, "spearman_p", 3)
    if len(x) > EXACT_UP_TO:
        return float(stats.spearmanr(x, y).pvalue)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    ranks_x = stats.rankdata(x)
    centred_x = (ranks_x - ranks_x.mean()) / np.linalg.norm(ranks_x - ranks_x.mean())

    def rho(b: np.ndarray, axis: int = -1) -> np.ndarray:  # Pearson ρ of the ranks
        ranks = stats.rankdata(b, axis=axis)
        ranks = ranks - ranks.mean(axis=axis, keepdims=True)
        return (ranks * centred_x).sum(axis=axis) / np.linalg.norm(ranks, axis=axis)

    test = stats.permutation_test(  # every order of y against the fixed x: n! pairings
        (y,),
        rho,
        permutation_type="pairings",
        n_resamples=np.inf,
        alternative="two-sided",
        vectorized=True,
    )
    return float(test.pvalue)


def correlation_ratio(values: Sequence[float], groups: Sequence) -> float:
    """η = √(between-group sum of squares / total sum of squares) of ``values`` on ``groups``.

    No function of the group correlates with ``values`` (Pearson) beyond η, so a correlation
    that falls short of a target by less than η's shortfall is bounded by the grouping, not by
    the measurement correlated.
    """
    values = _array(values, "correlation_ratio", 2)
    groups = np.asarray(groups)
    total = ((values - values.mean()) ** 2).sum()
    if total == 0:
        return math.nan
    between = sum(
        (groups == g).sum() * (values[groups == g].mean() - values.mean()) ** 2
        for g in np.unique(groups)
    )
    return float(math.sqrt(between / total))


def within_group_spearman(
    x: Sequence[float], y: Sequence[float], groups: Sequence
) -> dict[str, float]:
    """Spearman ρ (and p) of ``x`` and ``y`` after subtracting each group's mean from both."""
    x, y = _array(x, "within_group_spearman", 3), _array(y, "within_group_spearman", 3)
    groups = np.asarray(groups)
    rx, ry = x.copy(), y.copy()
    for g in np.unique(groups):
        rx[groups == g] -= x[groups == g].mean()
        ry[groups == g] -= y[groups == g].mean()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return {"rho": math.nan, "p": math.nan, "n": len(x)}
    result = stats.spearmanr(rx, ry)
    return {"rho": float(result.statistic), "p": float(result.pvalue), "n": len(x)}


def least_squares_change(
    steps: Sequence[float], values: Sequence[float], window: float = 0.2
) -> float:
    """The change over the last ``window`` of the steps that a straight-line fit predicts.

    Fits ``values`` against ``steps`` on the points with ``step >= (1 - window) * max(step)``
    and returns slope × the window's length; NaN with fewer than two points there.
    """
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    keep = np.isfinite(values) & (steps >= (1 - window) * steps.max())
    if keep.sum() < 2 or np.ptp(steps[keep]) == 0:
        return math.nan
    slope = np.polyfit(steps[keep], values[keep], 1)[0]
    return float(slope * window * steps.max())


def holm(p_values: dict[str, float], family: int, alpha: float = 0.05) -> dict[str, dict]:
    """Holm's step-down test of a family of ``family`` hypotheses (statsmodels'
    ``multipletests(method="holm")``). Per hypothesis: ``rejected``, the Holm-adjusted ``p``, and
    ``level``, the confidence 1 − α/(family − k) of the k-th smallest p-value's interval (k from
    0). A NaN p-value, and each hypothesis of the family missing from ``p_values``, counts as 1.

    Holm stops at the first p-value above its level: no later hypothesis is rejected, even one
    whose own interval at its level excludes 0.

    Raises:
        ValueError: If ``p_values`` holds more hypotheses than ``family``.
    """
    if len(p_values) > family:
        raise ValueError(f"{len(p_values)} p-values for a family of {family}: {p_values!r}.")
    order = sorted(p_values, key=lambda h: (math.isnan(p_values[h]), p_values[h]))
    padded = [1.0 if math.isnan(p_values[h]) else p_values[h] for h in order]
    padded += [1.0] * (family - len(order))
    rejected, adjusted, _, _ = multipletests(padded, alpha=alpha, method="holm")
    return {
        h: {
            "rejected": bool(rejected[k]),
            "p": math.nan if math.isnan(p_values[h]) else float(adjusted[k]),
            "level": 1 - alpha / (family - k),
        }
        for k, h in enumerate(order)
    }
