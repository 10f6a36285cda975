"""Seed-level statistics of a comparison: a mean with its t interval, and an equivalence test.

The training seed is the unit: a paired difference is one number per seed (method − σN-Ens on
that seed), and its interval is Student's t over those numbers (scipy's). "Level" is claimed only
by :func:`equivalence_test` (statsmodels' two one-sided tests against a margin fixed before the
runs), never from an interval that merely holds zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

__all__ = ["equivalence_test", "mean_interval"]


def _sample(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) < 1:
        raise ValueError(f"{name} needs a 1-D sample of at least 1 value, got shape {array.shape}.")
    return array


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> dict[str, float]:
    """``mean``, ``low``, ``high`` (two-sided t interval, :func:`scipy.stats.ttest_1samp`'s; NaN
    bounds for one value, both bounds the mean for equal values) and ``n``.

    Raises:
        ValueError: If ``values`` is not a non-empty 1-D sample.
    """
    x = _sample(values, "mean_interval")
    mean, n = float(x.mean()), len(x)
    if n < 2:
        return {"mean": mean, "low": math.nan, "high": math.nan, "n": n}
    if np.ptp(x) == 0:  # no spread: scipy warns and divides by zero
        return {"mean": mean, "low": mean, "high": mean, "n": n}
    interval = stats.ttest_1samp(x, 0.0).confidence_interval(confidence)
    return {"mean": mean, "low": float(interval.low), "high": float(interval.high), "n": n}


def equivalence_test(differences: Sequence[float], margin: float) -> float:
    """p-value of TOST (statsmodels' ``DescrStatsW.ttost_mean``): the larger of the two one-sided
    t-tests that the mean difference is above ``-margin`` and below ``+margin``. Equivalence at
    level α when it is below α (the (1 − 2α) interval then lies inside ``±margin``).

    Raises:
        ValueError: If ``margin`` is not a positive finite number, or fewer than two differences.
    """
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be a positive finite number, got {margin!r}.")
    d = _sample(differences, "equivalence_test")
    if not np.isfinite(d).all():
        raise ValueError(f"equivalence_test needs finite differences, got {list(differences)!r}.")
    if len(d) < 2:
        raise ValueError(f"equivalence_test needs at least two differences, got {len(d)}.")
    if np.ptp(d) == 0:  # no spread: the t statistics are infinite
        return 0.0 if abs(d.mean()) < margin else 1.0
    # Imported here: signorm-compare's start needs only mean_interval.
    from statsmodels.stats.weightstats import DescrStatsW

    p_value, _, _ = DescrStatsW(d).ttost_mean(-margin, margin)
    return float(p_value)
