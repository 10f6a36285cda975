"""Seed-level statistics of a comparison: a mean with its t interval, and an equivalence test.

The training seed is the unit: a paired difference is one number per seed (method − σN-Ens on
that seed), and its interval is Student's t over those numbers. "Level" is claimed only by
:func:`equivalence_test` (two one-sided tests against a margin fixed before the runs), never
from an interval that merely holds zero.
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
    """``mean``, ``low``, ``high`` (two-sided t interval; NaN bounds for one value) and ``n``.

    Raises:
        ValueError: If ``values`` is not a non-empty 1-D sample.
    """
    x = _sample(values, "mean_interval")
    mean, n = float(x.mean()), len(x)
    if n < 2:
        return {"mean": mean, "low": math.nan, "high": math.nan, "n": n}
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def equivalence_test(differences: Sequence[float], margin: float) -> float:
    """p-value of TOST: the larger of the two one-sided t-tests that the mean difference is
    above ``-margin`` and below ``+margin``. Equivalence at level α when it is below α (the
    (1 − 2α) interval then lies inside ``±margin``).

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
    se = d.std(ddof=1) / math.sqrt(len(d))
    if se == 0:
        return 0.0 if abs(d.mean()) < margin else 1.0
    lower = stats.t.sf((d.mean() + margin) / se, len(d) - 1)  # H0: mean <= -margin
    upper = stats.t.cdf((d.mean() - margin) / se, len(d) - 1)  # H0: mean >= +margin
    return float(max(lower, upper))
