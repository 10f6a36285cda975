"""The attribution study's registered decision rules, at their margins, and its Holm test.

DESIGN.md: a verdict is confirmed (H1: the ensemble's) when the interval lies below −δ, refuted
(H1: not the ensemble's) when it lies inside [−δ, +δ], open otherwise; δ = 0.02 nats.
"""

from __future__ import annotations

import csv
import math

import pytest

from studies import attribution_study as study
from studies.stats import holm

DELTA = 0.02
EPS = 1e-9
H1 = ("H1", "D_M4_tau0.1", "B_signorm_M1")
H2 = ("H2", "D_M4_tau0.1", "C_M4_lambda0")
H3 = ("H3", "F_M4_tau0.1_symmetric", "E_M4_lambda0_nospread")


def _difference(
    hypothesis: str, a: str, b: str, low: float, high: float, metric: str = "NLL"
) -> dict:
    """A row of ``analyse``'s differences, as ``verdicts`` reads it."""
    return {
        "hypothesis": hypothesis,
        "difference": f"{a} − {b}",
        "metric": metric,
        "mean": (low + high) / 2,
        "low": low,
        "high": high,
    }


def _cos_runs(f_cos: list[float], e_cos: list[float]) -> dict:
    """Arms F and E, per seed, with only their regularized σNorm-cos (H3's mechanism)."""
    column = study.COLUMNS["cos_reg"]
    return {
        "F_M4_tau0.1_symmetric": {s: {"metrics": {column: c}} for s, c in enumerate(f_cos)},
        "E_M4_lambda0_nospread": {s: {"metrics": {column: c}} for s, c in enumerate(e_cos)},
    }


def test_the_registered_margin():
    assert study.DELTA == DELTA and study.ALPHA == 0.05 and study.FAMILY == 4


#: (low, high) of the interval -> the verdict, on either side of ±δ.
MARGIN_CASES = [
    ((-0.05, -DELTA - EPS), "confirmed"),  # wholly below −δ
    ((-0.05, -DELTA), "open"),  # touching −δ is not below it
    ((-DELTA, +DELTA), "refuted"),  # the margin itself is inside
    ((-DELTA - EPS, 0.0), "open"),  # just past −δ: not inside
    ((0.0, DELTA + EPS), "open"),  # just past +δ: not inside
    ((-DELTA + EPS, DELTA - EPS), "refuted"),
    ((0.03, 0.05), "open"),  # worse by more than δ: neither
]


@pytest.mark.parametrize(("interval", "expected"), MARGIN_CASES)
def test_h2_at_its_margin(interval, expected):
    verdict = study.verdicts({}, [_difference(*H2, *interval)], failed=set())
    assert verdict == {"H2": expected}


@pytest.mark.parametrize(("interval", "expected"), MARGIN_CASES)
def test_h1_at_its_margin(interval, expected):
    words = {"confirmed": "ensemble's", "refuted": "not the ensemble's", "open": "open"}
    verdict = study.verdicts({}, [_difference(*H1, *interval)], failed=set())
    assert verdict == {"H1": words[expected]}


@pytest.mark.parametrize(("interval", "expected"), MARGIN_CASES)
def test_h3_at_its_margin_when_the_mechanism_happened(interval, expected):
    runs = _cos_runs([0.07, 0.08, 0.10], [0.70, 0.75, 0.80])
    verdict = study.verdicts(runs, [_difference(*H3, *interval)], failed=set())
    assert verdict["H3"] == expected
    assert verdict["H3 mechanism (F cos_reg < E cos_reg in every seed)"] == "True"


def test_h3_is_open_whatever_the_interval_when_one_seed_lacks_the_mechanism():
    runs = _cos_runs([0.07, 0.80, 0.10], [0.70, 0.75, 0.80])  # seed 1: F above E
    for interval in ((-0.05, -DELTA - EPS), (-DELTA, DELTA)):
        verdict = study.verdicts(runs, [_difference(*H3, *interval)], failed=set())
        assert verdict["H3"] == "open"
        assert verdict["H3 mechanism (F cos_reg < E cos_reg in every seed)"] == "False"


def test_an_arm_that_failed_a_check_leaves_the_verdict_open_and_says_what_the_interval_read():
    below = (-0.05, -DELTA - EPS)
    verdict = study.verdicts({}, [_difference(*H2, *below)], failed={"C_M4_lambda0"})
    assert verdict["H2"] == "open (checks failed; by the interval: confirmed)"
    verdict = study.verdicts({}, [_difference(*H1, *below)], failed={"B_signorm_M1"})
    assert verdict["H1"] == "open (checks failed: ['B_signorm_M1']; by the interval: ensemble's)"
    # A failed arm the hypothesis does not read changes nothing.
    verdict = study.verdicts({}, [_difference(*H2, *below)], failed={"A_single"})
    assert verdict["H2"] == "confirmed"


def _h4(first_jg: tuple, first_nll: tuple, second_nll: tuple) -> str:
    first, second = "placement_first_tau0.01", "placement_second_tau0.01"
    differences = [
        _difference("H4", first, "placement_first_tau1", *first_jg, metric="JG"),
        _difference("H4", first, "placement_first_tau1", *first_nll),
        _difference("H4", second, "placement_second_tau1", *second_nll),
    ]
    runs = {name: {} for name in (first, second, "placement_first_tau1", "placement_second_tau1")}
    return study.verdicts(runs, differences, failed=set())["H4"]


@pytest.mark.parametrize(
    ("first_jg", "first_nll", "second_nll", "expected"),
    [
        ((EPS, 0.1), (-0.1, -DELTA - EPS), (-DELTA, DELTA), "confirmed"),
        ((EPS, 0.1), (DELTA + EPS, 0.1), (-DELTA, DELTA), "confirmed"),  # moved either way
        ((0.0, 0.1), (-0.1, -DELTA - EPS), (-DELTA, DELTA), "open"),  # the JG interval touches 0
        ((EPS, 0.1), (-0.1, -DELTA), (-DELTA, DELTA), "open"),  # the first NLL touches −δ
        ((EPS, 0.1), (-0.1, -DELTA - EPS), (-DELTA - EPS, DELTA), "open"),  # today's moved
        ((-0.1, 0.1), (-DELTA, DELTA), (-DELTA, DELTA), "refuted"),  # neither NLL moved
        ((-0.1, 0.1), (-DELTA, DELTA + EPS), (-DELTA, DELTA), "open"),
    ],
)
def test_h4_at_its_margins(first_jg, first_nll, second_nll, expected):
    assert _h4(first_jg, first_nll, second_nll) == expected


FAMILY = (study.FAMILY, study.ALPHA)  # the study's family of four at α = 0.05


def test_holm_levels_follow_the_order_of_the_p_values():
    family = holm({"H1": 0.00298, "H2": 0.796, "H3": 0.359, "H4": 0.617}, *FAMILY)
    assert {h: test["level"] for h, test in family.items()} == pytest.approx(
        {"H1": 1 - 0.05 / 4, "H3": 1 - 0.05 / 3, "H4": 1 - 0.05 / 2, "H2": 1 - 0.05 / 1}
    )
    # A hypothesis without a p-value (its runs missing) comes last, at the least strict level.
    family = holm({"H1": math.nan, "H2": 0.5, "H3": 0.01, "H4": 0.2}, *FAMILY)
    assert family["H1"]["level"] == pytest.approx(0.95)
    assert family["H3"]["level"] == pytest.approx(0.9875)


def test_a_difference_holm_did_not_reject_is_not_claimed_whatever_its_interval():
    below = (-0.05, -DELTA - EPS)
    verdict = study.verdicts({}, [_difference(*H2, *below)], failed=set(), rejected={"H2": False})
    assert verdict["H2"] == "open (Holm stopped before it; by the interval: confirmed)"
    # Holm's decision does not touch an interval inside the margin.
    inside = (-DELTA, DELTA)
    verdict = study.verdicts({}, [_difference(*H2, *inside)], failed=set(), rejected={"H2": False})
    assert verdict["H2"] == "refuted"


def test_paired_contrasts_pair_by_seed_not_by_position():
    nll = study.COLUMNS["NLL"]
    runs = {
        "a": {
            0: {"metrics": {nll: 0.30}},
            1: {"metrics": {nll: 0.40}},
            2: {"metrics": {nll: 0.50}},
        },
        # inserted in another order, and a seed the other arm lacks
        "b": {
            2: {"metrics": {nll: 0.49}},
            3: {"metrics": {nll: 9.0}},
            0: {"metrics": {nll: 0.29}},
            1: {"metrics": {nll: 0.39}},
        },
    }
    d = study._paired(runs, "a", "b", "NLL", 0.95)
    assert d["seeds"] == [0, 1, 2]
    assert d["mean"] == pytest.approx(0.01) and d["low"] == pytest.approx(0.01)
    assert d["high"] == pytest.approx(0.01)  # the same difference in every seed
    assert study._paired(runs | {"b": {0: runs["b"][0]}}, "a", "b", "NLL", 0.95) is None


@pytest.mark.slow
def test_the_stored_runs_give_the_published_verdicts():
    result = study.analyse(study.OUT / "runs")
    with (study.OUT / "verdicts.csv").open(newline="") as file:
        published = {row["hypothesis"]: row["verdict"] for row in csv.DictReader(file)}
    assert result["verdicts"] == published
    assert {h: v for h, v in published.items() if h.startswith("H") and " " not in h} == {
        "H1": "open (checks failed: ['B_signorm_M1']; by the interval: ensemble's)",
        "H2": "open",
        "H3": "open",
        "H4": "open",
    }
