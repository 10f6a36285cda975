"""Regression check: does a reproduction stay within tolerance of a published or reference row?

Compares one row of results (a ``rows.csv`` written by
:mod:`~torch_uncertainty_signorm.paper.results_table`, or TorchUncertainty
``results.csv`` runs, averaged) with one expected row: a published table's
(``--published main --where dataset=CIFAR-100 arch=ResNet-50 method=σN-Ens``) or a
reference CSV's (``--reference ref.csv``, first row unless ``--reference-where``). Each metric
present in both rows must satisfy ``|ours - expected| <= tolerance``, with tolerances in the
table's units (percentage points for Acc, ECE, AUROC ...), except MAdds whose tolerance is
relative (a fraction of the expected value; ``--tol MAdds=5%``). A published value the table's
sidecar lists as an erratum (e.g. the CIFAR-10 Params of σN-Ens and FiLM-Ensemble, which the
paper copied from CIFAR-100) is compared with its corrected value and labelled ``erratum`` in
the report. The command prints a diff of every compared metric and exits with status 1 if any is
out of tolerance, 0 otherwise, 2 on bad usage, so it can gate a CI job::

    python -m torch_uncertainty_signorm.paper.regression logs/digits \\
        --reference docs/reference/digits_signorm.csv --tol Acc=1.0
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .published import load_table
from .runs import find_runs
from .results_table import aggregate, read_rows
from .tables import format_table

__all__ = [
    "DEFAULT_TOLERANCES", "RELATIVE_TOLERANCES", "Comparison", "compare_rows", "format_report",
    "main",
]

#: Default absolute tolerances, in the paper's units: percentage points for Acc, ECE, aECE,
#: AUPR, AUROC and FPR95 (and near/far OOD), nats for NLL, millions for Params. Seed-to-seed
#: spread on CIFAR is a few tenths of a point (the paper's stds), so these flag real drifts,
#: not noise.
DEFAULT_TOLERANCES: dict[str, float] = {
    "Acc": 0.5, "NLL": 0.02, "ECE": 1.0, "aECE": 1.0, "Brier": 0.01,
    "AUPR": 1.0, "AUROC": 1.0, "FPR95": 2.0,
    "AUROC_near": 1.0, "AUROC_far": 1.0, "AUPR_near": 1.0, "AUPR_far": 1.0,
    "FPR95_near": 2.0, "FPR95_far": 2.0,
    "Params": 0.01,
}
#: Default relative tolerances (fractions of the expected value). MAdds spans 0.48 to 24 G per
#: image: the paper's two decimals alone are off by up to 1.1% at 0.48 G, and PyTorch's flop
#: counter omits the normalisation layers' few multiply-adds (0.7% for σN-Ens ResNet-18).
RELATIVE_TOLERANCES: dict[str, float] = {"MAdds": 0.02}


@dataclass(frozen=True)
class Comparison:
    """One metric: our value, the expected one, the tolerance and the verdict.

    ``relative`` tolerances are fractions of ``|expected|``; ``note`` labels the expected value
    (``"erratum"`` when it corrects the published one).
    """

    metric: str
    ours: float
    expected: float
    tolerance: float
    relative: bool = False
    note: str = ""

    @property
    def delta(self) -> float:
        return self.ours - self.expected

    @property
    def allowed(self) -> float:
        """The largest ``|delta|`` that passes, in the metric's unit."""
        return self.tolerance * abs(self.expected) if self.relative else self.tolerance

    @property
    def ok(self) -> bool:
        return abs(self.delta) <= self.allowed + 1e-12


def _numeric(row: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in row.items() if isinstance(v, (int, float))
            and not isinstance(v, bool) and not math.isnan(float(v)) and not k.endswith("_std")
            and k != "runs"}


def compare_rows(ours: Mapping[str, Any], expected: Mapping[str, Any],
                 tolerances: Mapping[str, float] | None = None,
                 metrics: Sequence[str] | None = None,
                 relative_tolerances: Mapping[str, float] | None = None,
                 notes: Mapping[str, str] | None = None) -> list[Comparison]:
    """Compare the numeric metrics the two rows share (or ``metrics``), each under its tolerance.

    ``tolerances`` (absolute) and ``relative_tolerances`` (fractions of the expected value)
    override :data:`DEFAULT_TOLERANCES` and :data:`RELATIVE_TOLERANCES` per metric, the last
    given kind winning; a shared metric with no tolerance is compared exactly. ``notes`` label
    expected values (e.g. ``{"Params": "erratum"}``).

    Raises:
        ValueError: If a requested metric is missing from a row, a tolerance is negative, or
            the rows share no metric.
    """
    tolerances, relative = dict(tolerances or {}), dict(relative_tolerances or {})
    absolute = {k: v for k, v in DEFAULT_TOLERANCES.items() if k not in relative} | tolerances
    relative = {k: v for k, v in RELATIVE_TOLERANCES.items() if k not in tolerances} | relative
    if negative := {k: v for k, v in (absolute | relative).items() if not v >= 0}:
        raise ValueError(f"tolerances must be >= 0, got {negative}.")
    ours_values, expected_values = _numeric(ours), _numeric(expected)
    if metrics:
        for name in metrics:
            for which, values in (("our row", ours_values), ("the expected row", expected_values)):
                if name not in values:
                    raise ValueError(f"metric {name!r} is not in {which}; it has "
                                     f"{sorted(values)}.")
        names = list(metrics)
    else:
        names = [k for k in expected_values if k in ours_values]
    if not names:
        raise ValueError(f"the rows share no metric: ours {sorted(ours_values)}, expected "
                         f"{sorted(expected_values)}.")
    notes = notes or {}
    return [Comparison(n, ours_values[n], expected_values[n], relative.get(n, absolute.get(n, 0.0)),
                       n in relative, notes.get(n, "")) for n in names]


def format_report(comparisons: Sequence[Comparison]) -> str:
    """A readable diff: one line per metric, out-of-tolerance lines marked ``FAIL``."""
    body = [[c.metric, f"{c.ours:.4g}", f"{c.expected:.4g}", f"{c.delta:+.4g}",
             f"{c.tolerance * 100:g}%" if c.relative else f"{c.tolerance:.4g}",
             ("ok" if c.ok else "FAIL") + (f"  ({c.note})" if c.note else "")]
            for c in comparisons]
    table = format_table(["metric", "ours", "expected", "delta", "tol", "verdict"], body,
                         align="lrrrrl")
    failed = [c.metric for c in comparisons if not c.ok]
    return table + (f"{len(failed)} of {len(comparisons)} metrics out of tolerance"
                    + (f": {', '.join(failed)}" if failed else ""))


def _pairs(pairs: Sequence[str], option: str, cast=str) -> dict[str, Any]:
    parsed = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{option} expects NAME=VALUE, got {pair!r}.")
        try:
            parsed[name] = cast(value)
        except ValueError:
            raise ValueError(f"{option} {name}: expected a number, got {value!r}.") from None
    return parsed


def _load_ours(path: str, row_label: str | None) -> dict[str, Any]:
    """Our row: a ``rows.csv`` (by ``method`` label, else its only row) or runs to average."""
    file = Path(path)
    if file.is_file() and file.name != "results.csv":
        rows = read_rows(file)
        if row_label is not None:
            rows = [r for r in rows if r.get("method") == row_label]
        if len(rows) != 1:
            raise ValueError(f"{path} holds {len(rows)} rows"
                             + (f" labelled {row_label!r}" if row_label else "")
                             + "; pass --row LABEL to pick one.")
        return rows[0]
    return aggregate(find_runs([path]), row_label or "ours")


def _load_expected(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    """The expected row and notes on its values: a published row with its errata corrected."""
    if args.published:
        table = load_table(args.published)
        row = dict(table.row(**_pairs(args.where, "--where")))
        notes = {}
        for column, erratum in table.errata(row).items():
            row[column] = erratum["corrected"]
            notes[column] = f"erratum: paper prints {erratum['published']:g}"
        return row, notes
    rows = read_rows(args.reference)
    if args.reference_where:
        keys = _pairs(args.reference_where, "--reference-where")
        rows = [r for r in rows if all(str(r.get(k)) == v for k, v in keys.items())]
    if not rows:
        raise ValueError(f"no reference row in {args.reference} matches {args.reference_where}.")
    return rows[0], {}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_uncertainty_signorm.paper.regression",
        description="Compare results with a published or reference row under per-metric "
        "tolerances; exit 1 when a metric is out of tolerance.",
        epilog="Default tolerances: " + ", ".join(
            [f"{k}={v:g}" for k, v in DEFAULT_TOLERANCES.items()]
            + [f"{k}={v * 100:g}%" for k, v in RELATIVE_TOLERANCES.items()]),
    )
    parser.add_argument("results",
                        help="rows.csv of results_table, a results.csv, or a folder of runs")
    parser.add_argument("--row", help="label (method column) of the row to check in a rows.csv")
    expected = parser.add_mutually_exclusive_group(required=True)
    expected.add_argument("--published", help="published table name, e.g. main, rn18, mscaling")
    expected.add_argument("--reference", help="reference rows CSV (results_table format)")
    parser.add_argument("--where", nargs="*", default=[], metavar="KEY=VALUE",
                        help="the published row, e.g. dataset=CIFAR-100 arch=ResNet-50 "
                        "method=σN-Ens")
    parser.add_argument("--reference-where", nargs="*", default=[], metavar="KEY=VALUE",
                        help="the reference row (default: the first)")
    parser.add_argument("--tol", nargs="*", default=[], metavar="METRIC=TOL",
                        help="override tolerances, e.g. Acc=1.0 NLL=0.05 (absolute) or "
                        "MAdds=5%% (relative to the expected value)")
    parser.add_argument("--metrics", nargs="*", help="compare only these metrics")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; returns (and, from the command line, exits with) 0 or 1."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        tolerances = _pairs([t for t in args.tol if not t.endswith("%")], "--tol", float)
        relative = {name: value / 100 for name, value in _pairs(
            [t.removesuffix("%") for t in args.tol if t.endswith("%")], "--tol", float).items()}
        expected, notes = _load_expected(args)
        comparisons = compare_rows(_load_ours(args.results, args.row), expected, tolerances,
                                   args.metrics, relative, notes)
    except ValueError as error:
        parser.error(str(error))
    print(format_report(comparisons))
    return 0 if all(c.ok for c in comparisons) else 1


if __name__ == "__main__":
    sys.exit(main())
