"""The studies' statistics against closed forms and scipy."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from studies import stats


def test_mean_interval_is_the_t_interval():
    values = [1.0, 2.0, 4.0, 7.0]
    row = stats.mean_interval(values)
    half = scipy_stats.t.ppf(0.975, 3) * np.std(values, ddof=1) / 2
    assert row["mean"] == 3.5 and row["low"] == pytest.approx(3.5 - half)
    assert row["high"] == pytest.approx(3.5 + half)
    assert math.isnan(stats.mean_interval([1.0])["low"])


def test_paired_difference_removes_what_pairs_share():
    base = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    a, b = base + np.array([1.1, 0.9, 1.0, 1.2, 0.8]), base
    paired = stats.paired_difference(a, b)
    assert paired["mean"] == pytest.approx(1.0)
    assert 0.7 < paired["low"] < 1.0 < paired["high"] < 1.3 and paired["p"] < 1e-3
    # Unpaired, the shared spread swamps the same difference.
    assert stats.welch_difference(a, b)["p"] > 0.5
    with pytest.raises(ValueError, match="equal lengths"):
        stats.paired_difference([1.0, 2.0], [1.0, 2.0, 3.0])


def test_one_sided_welch_test():
    low, high = [1.0, 1.1, 0.9, 1.05], [2.0, 2.1, 1.9, 2.05]
    assert stats.welch_difference(low, high, alternative="less")["p"] < 1e-3
    assert stats.welch_difference(low, high, alternative="greater")["p"] > 0.99


def test_spearman_interval_covers_a_perfect_and_excludes_it_for_noise():
    x = np.arange(30.0)
    perfect = stats.spearman_interval(x, -x, n_resamples=999)
    assert perfect["rho"] == pytest.approx(-1)
    assert perfect["low"] == pytest.approx(-1) and perfect["high"] == pytest.approx(-1)
    noise = stats.spearman_interval(x, np.random.default_rng(0).normal(size=30), n_resamples=999)
    assert noise["low"] < 0 < noise["high"] and noise["high"] - noise["low"] > 0.4


def test_correlation_ratio_bounds_any_function_of_the_group():
    rng = np.random.default_rng(0)
    groups = np.repeat([0, 1, 2], 10)
    values = groups * 1.0 + rng.normal(scale=1.0, size=30)
    eta = stats.correlation_ratio(values, groups)
    for f in (lambda g: g, lambda g: g**2, lambda g: -np.exp(g)):
        assert abs(scipy_stats.pearsonr(f(groups), values).statistic) <= eta + 1e-12
    assert stats.correlation_ratio(groups * 1.0, groups) == pytest.approx(1.0)


def test_within_group_spearman_ignores_what_the_groups_explain():
    groups = np.repeat([0, 1, 2], 5)
    noise = np.random.default_rng(1).normal(size=15)
    x, y = groups * 10.0 + noise, groups * 10.0 - noise
    assert scipy_stats.spearmanr(x, y).statistic > 0.7  # the groups make them agree
    assert stats.within_group_spearman(x, y, groups)["rho"] == pytest.approx(-1.0)


def test_least_squares_change_over_the_last_fifth():
    steps = np.arange(0, 101)
    flat_end = np.where(steps < 80, 1.0 - steps / 80, 0.0) + 0.001 * steps
    assert stats.least_squares_change(steps, flat_end) == pytest.approx(0.02)
    assert stats.least_squares_change(steps, 2.0 * steps) == pytest.approx(40.0)


def test_spearman_p_is_exact_for_a_handful_of_points():
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 4.0, 3.0, 2.0, 1.0]
    assert stats.spearman_p(x, y) == pytest.approx(2 / 120)  # ρ = -1 and ρ = +1 of 120
    assert scipy_stats.spearmanr(x, y).pvalue < 1e-20  # the t approximation's
    # Three tied σNorm-cos values (the members never moved): the order is only partly known.
    tied = stats.spearman_p([0.1, 0.5, 1.0, 1.0, 1.0], [0.9, 0.5, 0.1, 0.1, 0.1])
    assert tied > 0.05
    many = np.arange(20.0)
    assert stats.spearman_p(many, many) == pytest.approx(scipy_stats.spearmanr(many, many).pvalue)


def test_spearman_with_ties_in_tau_is_below_one_and_its_p_is_exact():
    """The tweets study's T3: 7 runs at τ = 0.04 (2), 0.08 (3), 0.16 (2) whose regularized
    σNorm-cos is in perfect order. The ties cap ρ below 1, and the exact p counts the pairings."""
    tau = [0.04, 0.04, 0.08, 0.08, 0.08, 0.16, 0.16]
    cos = [0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70]
    # Ranks of τ: 1.5 1.5 4 4 4 6.5 6.5 against 1..7: ρ = 42 / √(49.5 · 28) = 5 / (2√7).
    rho = scipy_stats.spearmanr(tau, cos).statistic
    assert rho == pytest.approx(5 / (2 * math.sqrt(7))) and rho == pytest.approx(0.945, abs=5e-4)
    assert stats.spearman_interval(tau, cos, n_resamples=99)["rho"] == pytest.approx(rho)
    # |ρ| is at its maximum for the 2!·3!·2! = 24 orders of σNorm-cos that keep each τ group
    # below the next, and for the 24 reversed: 48 of the 7! = 5040 pairings, p = 1/105.
    assert stats.spearman_p(tau, cos) == pytest.approx(48 / 5040, rel=1e-12)
    assert stats.spearman_p(tau, cos) != pytest.approx(scipy_stats.spearmanr(tau, cos).pvalue)
    # Reversing σNorm-cos flips the sign, not the p-value.
    assert stats.spearman_p(tau, cos[::-1]) == pytest.approx(48 / 5040, rel=1e-12)


def test_paired_difference_is_the_t_interval_of_the_per_seed_differences():
    """Seeds 0-4 of two arms, paired by seed: the interval is the hand-computed t interval of the
    five differences and scipy's paired test's own interval; pairing other seeds changes it."""
    a = np.array([0.30, 0.28, 0.35, 0.31, 0.29])
    b = np.array([0.31, 0.30, 0.34, 0.35, 0.30])
    d = a - b  # -0.01 -0.02 +0.01 -0.04 -0.01
    mean, sd = d.mean(), math.sqrt(((d - d.mean()) ** 2).sum() / 4)
    assert mean == pytest.approx(-0.014) and sd == pytest.approx(math.sqrt(0.00132 / 4))
    half = 2.7764451051977987 * sd / math.sqrt(5)  # t(0.975, 4)
    row = stats.paired_difference(a, b)
    assert row["mean"] == pytest.approx(mean) and row["n"] == 5
    assert row["low"] == pytest.approx(mean - half) and row["high"] == pytest.approx(mean + half)
    scipy_interval = scipy_stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (row["low"], row["high"]) == pytest.approx((scipy_interval.low, scipy_interval.high))
    t = mean / (sd / math.sqrt(5))
    assert row["p"] == pytest.approx(2 * scipy_stats.t.sf(abs(t), 4))
    # A Holm level widens it by the t quantile alone.
    wide = stats.paired_difference(a, b, 1 - 0.05 / 4)
    assert wide["high"] - wide["mean"] == pytest.approx(
        scipy_stats.t.ppf(1 - 0.05 / 8, 4) * sd / math.sqrt(5)
    )
    # The pairing matters: b in another seed order gives another interval.
    shuffled = stats.paired_difference(a, b[[1, 2, 3, 4, 0]])
    assert shuffled["mean"] == pytest.approx(mean)
    assert shuffled["high"] - shuffled["low"] != pytest.approx(row["high"] - row["low"])
    # Equal differences: no spread, a degenerate interval and p 0 (or 1 for no difference).
    c = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    constant = stats.paired_difference(c + 0.5, c)
    assert constant["low"] == constant["high"] == 0.5
    assert constant["p"] == 0.0 and stats.paired_difference(c, c)["p"] == 1.0


def test_holm_steps_down_and_rejects_nothing_after_its_first_non_rejection():
    """The three-seed tweets clipped primary family (σN-Ens − Single, − Multi-head, − Deep
    Ensembles, test NLL, seeds 0-2 of the stored runs): Deep Ensembles' p = 0.023 is below its
    own level α/2, but Single's 0.018, the smallest, is above α/3, so Holm rejects nothing."""
    p = {"single": 0.018212, "multi_head": 0.317747, "deep_ensembles": 0.023147}
    family = stats.holm(p, 3)
    assert not any(test["rejected"] for test in family.values())
    assert p["deep_ensembles"] < 0.05 / 2 == pytest.approx(1 - family["deep_ensembles"]["level"])
    # Adjusted p-values step down: max over the smaller ones of (m − k) p_(k).
    assert family["single"]["p"] == family["deep_ensembles"]["p"] == pytest.approx(3 * 0.018212)
    # Below α/3 the smallest is rejected, and then the next at α/2.
    family = stats.holm({**p, "single": 0.016}, 3)
    assert [h for h, test in family.items() if test["rejected"]] == ["single", "deep_ensembles"]


def test_holm_counts_a_missing_or_nan_test_as_not_rejected_and_keeps_the_family_size():
    family = stats.holm({"a": 0.001, "b": math.nan}, 4)
    assert family["a"]["rejected"] and family["a"]["level"] == pytest.approx(1 - 0.05 / 4)
    assert not family["b"]["rejected"] and math.isnan(family["b"]["p"])
    assert family["b"]["level"] == pytest.approx(1 - 0.05 / 3)
    with pytest.raises(ValueError, match="3 p-values for a family of 2"):
        stats.holm({"a": 0.1, "b": 0.2, "c": 0.3}, 2)
