"""Regression check: does a reproduction stay within tolerance of a published or reference row?

Compares one row of results (a ``rows.csv`` written by
:mod:`~signorm_lab.reproduction.results_table`, or TorchUncertainty
``results.csv`` runs, averaged) with one expected row: a published table's
(``--published main --where dataset=CIFAR-100 arch=ResNet-50 method=σN-Ens``; ASCII spellings
such as ``method=sigmaN-Ens arch=WRN-28-10`` are accepted) or a reference CSV's
(``--reference ref.csv``, first row unless ``--reference-where``).

Every metric the expected row holds is checked: ``|ours - expected| <= tolerance``, with
tolerances in the table's units (percentage points for Acc, ECE, AUROC ...), except MAdds whose
tolerance is relative (a fraction of the expected value; ``--tol MAdds=5%``). Where the expected
row carries its spread (a reference row of ``runs >= 2`` seeds with ``<metric>_std``), a metric's
tolerance is the half-width of the prediction interval for our row around it
(:func:`spread_tolerance`: a correct run, a draw like the reference's seeds, fails some metric with
probability at most ``1 - --level``); elsewhere it is :data:`DEFAULT_TOLERANCES`'s, and ``--tol``
overrides either. The report names each tolerance's origin. A metric that our
row lacks, or holds as NaN or infinity, fails and is named as such; only ``--exclude METRIC``
(or ``--metrics``, the metrics to check) leaves one out, and the report lists it. A published
value the table's sidecar lists as an erratum (e.g. the CIFAR-10 Params of σN-Ens and
FiLM-Ensemble, which the paper copied from CIFAR-100) is compared with its corrected value and
labelled ``erratum`` in the report.

The report first says what was compared: the number of training runs and their seeds (a ``test``
re-run of a checkpoint is the same training run, see
:func:`~signorm_lab.reproduction.runs.merge_evaluations`; ``--min-seeds N`` fails a
row of fewer distinct seeds), and the runs' training budget beside the protocol's (a short run is a
smoke test, not a reproduction). It then prints a diff of every metric and exits with status 1
if any metric fails or too few seeds were found, 0 otherwise, 2 on bad usage, so it can gate a CI
job (see ``docs/tooling.md``, or :func:`check_reproduction` inside a pytest test)::

    signorm-regression logs/digits \\
        --reference docs/reference/digits_signorm.csv --tol Acc=1.0
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats

from .published import load_table, same_key
from .results_table import (
    DIVERSITY_COLUMNS,
    aggregate,
    missing_columns,
    read_rows,
    run_summary,
)
from .run_groups import select_runs
from .runs import Run, find_runs, merge_evaluations, result_rows
from .tables import format_table

__all__ = [
    "DEFAULT_LEVEL",
    "DEFAULT_TOLERANCES",
    "MAX_RELATIVE_TOLERANCE",
    "MAX_TOLERANCE",
    "RELATIVE_TOLERANCES",
    "Comparison",
    "ReproductionError",
    "check_reproduction",
    "compare_rows",
    "format_report",
    "main",
    "spread_tolerance",
]

#: Default absolute tolerances, in the paper's units: percentage points for Acc, ECE, aECE,
#: AUPR, AUROC and FPR95 (and near/far OOD), nats for NLL, millions for Params. Seed-to-seed
#: spread on CIFAR is a few tenths of a point (the paper's stds), so these flag real drifts,
#: not noise.
DEFAULT_TOLERANCES: dict[str, float] = {
    "Acc": 0.5,
    "NLL": 0.02,
    "ECE": 1.0,
    "aECE": 1.0,
    "Brier": 0.01,
    "AUPR": 1.0,
    "AUROC": 1.0,
    "FPR95": 2.0,
    "AUROC_near": 1.0,
    "AUROC_far": 1.0,
    "AUPR_near": 1.0,
    "AUPR_far": 1.0,
    "FPR95_near": 2.0,
    "FPR95_far": 2.0,
    "Params": 0.01,
    # The ensemble's diversity (results_table.DIVERSITY_COLUMNS), checked when a reference row
    # holds it: σNorm-cos (a cosine), U_mod and the Jensen gap (nats). An ensemble whose members
    # became one model has all three at their floor (1, 0, 0), far outside these.
    "signorm_cos": 0.05,
    "U_mod": 0.02,
    "jensen_gap": 0.02,
}
#: Default relative tolerances (fractions of the expected value). MAdds spans 0.48 to 24 G per
#: image: the paper's two decimals alone are off by up to 1.1% at 0.48 G, and PyTorch's flop
#: counter omits the normalization layers' few multiply-adds (0.7% for σN-Ens ResNet-18).
RELATIVE_TOLERANCES: dict[str, float] = {"MAdds": 0.02}
#: The widest tolerances accepted: an absolute one of a whole percentage scale, a relative one
#: of the expected value itself. Wider passes any value: a check that checks nothing.
MAX_TOLERANCE, MAX_RELATIVE_TOLERANCE = 100.0, 1.0
#: The family-wise level of the tolerances derived from a reference row's spread.
DEFAULT_LEVEL = 0.99
#: Columns of a results row that describe the runs rather than measure them.
_RUN_COLUMNS = frozenset(
    {"runs", "seeds", "max_epochs", "max_steps", "limit_train_batches", "trained_steps"}
)
#: The trainer arguments that make up a budget, in the order they are printed.
_BUDGET_KEYS = ("max_epochs", "max_steps", "limit_train_batches", "trained_steps")


@dataclass(frozen=True)
class Comparison:
    """One metric: our value, the expected one, the tolerance and the verdict.

    ``relative`` tolerances are fractions of ``|expected|``; ``origin`` says where the tolerance
    comes from (``"default"``, ``"--tol"``, or the reference's spread); ``note`` labels the
    expected value (``"erratum"`` when it corrects the published one). ``problem`` says why our
    value cannot be compared (``"missing from the run"``, ``"NaN in the run"``, ...): such a
    metric fails. An ``excluded`` metric was left out on request: it neither passes nor fails.
    """

    metric: str
    ours: float | None
    expected: float
    tolerance: float
    relative: bool = False
    note: str = ""
    problem: str = ""
    excluded: bool = False
    origin: str = "default"

    @property
    def delta(self) -> float:
        return math.nan if self.ours is None else self.ours - self.expected

    @property
    def allowed(self) -> float:
        """The largest ``|delta|`` that passes, in the metric's unit."""
        return self.tolerance * abs(self.expected) if self.relative else self.tolerance

    @property
    def ok(self) -> bool:
        """Passes: excluded, or a finite value within tolerance."""
        if self.excluded:
            return True
        return not self.problem and abs(self.delta) <= self.allowed + 1e-12

    @property
    def verdict(self) -> str:
        if self.excluded:
            return "excluded"
        if self.problem:
            return f"FAIL ({self.problem})"
        return "ok" if self.ok else "FAIL"


def _is_metric(name: str, value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not name.endswith("_std")
        and name not in _RUN_COLUMNS
    )


def _problem(value: Any) -> str:
    if value is None:
        return "missing from the run"
    if math.isnan(value):
        return "NaN in the run"
    if math.isinf(value):
        return "infinite in the run"
    return ""


def spread_tolerance(
    std: float, reference_runs: int, our_runs: int = 1, metrics: int = 1, level: float = 0.99
) -> float:
    """Half-width of the prediction interval for the mean of ``our_runs`` new runs around the
    mean of ``reference_runs`` seeds whose sample standard deviation is ``std``:
    scipy's Student t interval on ``reference_runs − 1`` degrees of freedom, scale
    ``std · √(1/our_runs + 1/reference_runs)``, at confidence ``1 − α / metrics``, ``α = 1 −
    level`` (Bonferroni over the ``metrics`` checked): if the seeds' metrics are roughly normal,
    a run like the reference's fails any of the ``metrics`` with probability at most ``α``.

    Raises:
        ValueError: If ``reference_runs < 2``, ``our_runs`` or ``metrics < 1``, ``std`` is
            negative or not finite, or ``level`` is not in (0, 1).
    """
    if reference_runs < 2 or our_runs < 1 or metrics < 1:
        raise ValueError(
            f"a prediction interval needs >= 2 reference runs, >= 1 of ours and >= 1 metric, "
            f"got {reference_runs}, {our_runs} and {metrics}."
        )
    if not (math.isfinite(std) and std >= 0):
        raise ValueError(f"std must be a finite number >= 0, got {std!r}.")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.99, got {level!r}.")
    scale = std * math.sqrt(1 / our_runs + 1 / reference_runs)  # the sd of ours - reference
    _, high = stats.t.interval(1 - (1 - level) / metrics, reference_runs - 1, scale=scale)
    return float(high)


def spread_tolerances(
    expected: Mapping[str, Any], our_runs: int, level: float, skip: Sequence[str] = ()
) -> tuple[dict[str, float], str]:
    """:func:`spread_tolerance` of every metric whose spread ``expected`` carries (``runs >= 2``,
    a ``<metric>_std`` above 0; a metric that does not vary with the seed, such as Params, keeps
    its default), but those in ``skip``; and their origin, e.g. ``"99% PI, 10 seeds"``."""
    runs = expected.get("runs")
    if not isinstance(runs, (int, float)) or isinstance(runs, bool) or runs < 2:
        return {}, ""
    spread = {
        name: float(expected[f"{name}_std"])
        for name, value in expected.items()
        if _is_metric(name, value)
        and name not in skip
        and isinstance(expected.get(f"{name}_std"), (int, float))
        and math.isfinite(float(expected[f"{name}_std"]))
        and float(expected[f"{name}_std"]) > 0
    }
    tolerances = {
        name: spread_tolerance(std, int(runs), our_runs, len(spread), level)
        for name, std in spread.items()
    }
    return tolerances, f"{level * 100:g}% PI, {int(runs)} seeds"


def compare_rows(
    ours: Mapping[str, Any],
    expected: Mapping[str, Any],
    tolerances: Mapping[str, float] | None = None,
    metrics: Sequence[str] | None = None,
    relative_tolerances: Mapping[str, float] | None = None,
    notes: Mapping[str, str] | None = None,
    exclude: Sequence[str] = (),
    problems: Mapping[str, str] | None = None,
    derived: Mapping[str, float] | None = None,
    derived_origin: str = "spread",
) -> list[Comparison]:
    """Compare every metric the expected row holds (or only ``metrics``), each under its
    tolerance.

    A metric our row lacks, or holds as NaN or infinity, fails with its ``problem`` named
    (``problems`` adds reasons found elsewhere, e.g. ``{"AUROC": "missing from 1 of 3 runs"}``);
    ``exclude`` leaves metrics out (reported as excluded). ``tolerances`` (absolute) and
    ``relative_tolerances`` (fractions of the expected value) override
    :data:`DEFAULT_TOLERANCES` and :data:`RELATIVE_TOLERANCES` per metric, the last given kind
    winning; ``derived`` tolerances (from the expected row's spread, :func:`spread_tolerances`)
    stand between the two, labelled ``derived_origin``; a metric with no tolerance is compared
    exactly. ``notes`` label expected values
    (e.g. ``{"Params": "erratum"}``). Expected values that are NaN (not reported) are not
    metrics of the row.

    Raises:
        ValueError: If a requested or excluded metric is not in the expected row, a tolerance
            is negative or wider than :data:`MAX_TOLERANCE` (:data:`MAX_RELATIVE_TOLERANCE`),
            an expected value is infinite, every metric is excluded, or the expected row holds
            no metric.
    """
    tolerances, relative = dict(tolerances or {}), dict(relative_tolerances or {})
    given = set(tolerances) | set(relative)
    derived = {k: v for k, v in (derived or {}).items() if k not in given}
    origins = dict.fromkeys(derived, derived_origin) | dict.fromkeys(given, "--tol")
    absolute = {k: v for k, v in DEFAULT_TOLERANCES.items() if k not in relative} | derived
    relative = {k: v for k, v in RELATIVE_TOLERANCES.items() if k not in absolute} | relative
    absolute |= tolerances
    relative = {k: v for k, v in relative.items() if k not in tolerances}
    if negative := {k: v for k, v in (absolute | relative).items() if not v >= 0}:
        raise ValueError(f"tolerances must be >= 0, got {negative}.")
    for kind, values, bound in (
        ("absolute", absolute, MAX_TOLERANCE),
        ("relative", relative, MAX_RELATIVE_TOLERANCE),
    ):
        if wide := {k: v for k, v in values.items() if not v <= bound}:
            name, value = next(iter(wide.items()))
            raise ValueError(
                f"the {kind} tolerance {name}={value:g} is wider than {bound:g}"
                f"{' (100%)' if kind == 'relative' else ' (a whole percentage scale)'}: it "
                f"would pass any value; give a tolerance in the table's units, e.g. "
                f"Acc=0.5."
            )
    expected_values = {
        k: float(v) for k, v in expected.items() if _is_metric(k, v) and not math.isnan(float(v))
    }
    if not expected_values:
        raise ValueError(f"the expected row holds no metric: {dict(expected)}.")
    if infinite := sorted(k for k, v in expected_values.items() if math.isinf(v)):
        raise ValueError(
            f"the expected row holds {infinite[0]}={expected_values[infinite[0]]}: "
            f"an infinite expected value would pass or fail any result; give the "
            f"reference a finite value (or leave the cell empty)."
        )
    for option, names in (("metric", metrics or ()), ("excluded metric", exclude)):
        if unknown := [name for name in names if name not in expected_values]:
            raise ValueError(
                f"{option} {unknown[0]!r} is not in the expected row; it holds "
                f"{sorted(expected_values)}."
            )
    names = list(metrics) if metrics else list(expected_values)
    names += [name for name in exclude if name not in names]
    if all(name in exclude for name in names):
        raise ValueError(
            f"every metric of the expected row is excluded ({', '.join(names)}): "
            f"nothing would be compared; exclude fewer metrics."
        )
    notes, problems = notes or {}, problems or {}
    comparisons = []
    for name in names:
        value = ours.get(name)
        value = float(value) if _is_metric(name, value) else None
        comparisons.append(
            Comparison(
                name,
                value,
                expected_values[name],
                relative.get(name, absolute.get(name, 0.0)),
                name in relative,
                notes.get(name, ""),
                problems.get(name) or _problem(value),
                name in exclude,
                origins.get(name, "default"),
            )
        )
    return comparisons


def _number(value: float | None, digits: str = ".4g") -> str:
    return "--" if value is None else f"{value:{digits}}"


def format_report(comparisons: Sequence[Comparison], context: Sequence[str] = ()) -> str:
    """A readable diff: the ``context`` lines, one line per metric (failures marked ``FAIL``
    with their reason), and a last line counting the failures."""
    body = [
        [
            c.metric,
            _number(c.ours),
            f"{c.expected:.4g}",
            "--" if c.problem or c.ours is None else f"{c.delta:+.4g}",
            f"{c.tolerance * 100:g}%" if c.relative else f"{c.tolerance:.4g}",
            c.origin,
            c.verdict + (f"  ({c.note})" if c.note else ""),
        ]
        for c in comparisons
    ]
    table = format_table(
        ["metric", "ours", "expected", "delta", "tol", "tol from", "verdict"],
        body,
        align="lrrrrll",
    )
    checked = [c for c in comparisons if not c.excluded]
    failed = [c for c in checked if not c.ok]
    summary = f"{len(failed)} of {len(checked)} metrics failed" + (
        ": " + ", ".join(f"{c.metric} ({c.problem or 'out of tolerance'})" for c in failed)
        if failed
        else ""
    )
    if excluded := [c.metric for c in comparisons if c.excluded]:
        summary += f"; excluded: {', '.join(excluded)}"
    return "".join(line + "\n" for line in context) + table + summary


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
        if cast is float and not 0 <= parsed[name] < math.inf:
            raise ValueError(
                f"{option} {name}={value}: expected a finite number >= 0 (an "
                f"infinite or NaN tolerance would pass any value)."
            )
    return parsed


@dataclass
class _Ours:
    """Our row, what it averages (for the report) and the problems found run by run."""

    row: dict[str, Any]
    context: list[str]
    problems: dict[str, str]


def _load_ours(
    path: str, row_label: str | None, select: Sequence[str] = (), allow_unknown: bool = False
) -> _Ours:
    """Our row: a ``rows.csv`` (by ``method`` label, else its only row) or runs to average,
    those of one settings group (:func:`~signorm_lab.reproduction.run_groups.
    select_runs`: runs of different settings are refused unless ``select`` picks one group)."""
    file = Path(path)
    if file.is_file() and file.name != "results.csv":
        rows = read_rows(file)
        if row_label is not None:
            rows = [r for r in rows if same_key(row_label, r.get("method"))]
        if len(rows) != 1:
            labels = [str(r.get("method")) for r in read_rows(file)]
            raise ValueError(
                f"{path} holds {len(rows)} rows"
                + (f" labelled {row_label!r}" if row_label else "")
                + f"; pass --row LABEL to pick one of {labels}."
            )
        row = rows[0]
        runs = row.get("runs")
        seeds = f" (seeds {row['seeds']})" if row.get("seeds") else ""
        count = "an unknown number of" if runs is None else f"{runs:g}"
        plural = "" if runs == 1 else "s"
        return _Ours(
            row,
            [(f"ours: row {row.get('method')!r} of {path}: {count} training run{plural}{seeds}")],
            {},
        )
    found = find_runs([path])
    why = {str(run.path.parent): reason for run in found if (reason := _no_settings(run))}
    unknown = sorted(why)
    if unknown and not allow_unknown:
        first = unknown[0]
        raise ValueError(
            f"the settings of {len(unknown)} run(s) under {path} cannot be read ({first}: "
            f"{why[first]}{'; and others' if len(unknown) > 1 else ''}): runs of another τ, M "
            f"or budget could be averaged as seeds of one method. Point at the runs' folders "
            f"as the command wrote them, or pass --allow-unknown-settings to compare them anyway."
        )
    runs = select_runs(found, select, path)
    merged = merge_evaluations(runs)
    problems = {
        column: f"missing from {len(lacking)} of {len(merged)} runs"
        for column, lacking in missing_columns(merged).items()
    }
    context = [f"ours: {path}: {line}" for line in run_summary(runs)]
    for run in merged:  # rows a test did not write were refused (select_runs)
        if (count := result_rows(run.path)) > 1:
            context.append(
                f"note: {run.path} holds {count} result rows (one per test logged "
                f"there); its last row counts"
            )
    if unknown:
        context.append(
            f"warning: the settings of {len(unknown)} run(s) could not be read (no "
            f"config.yaml or settings.json, or one holding no settings), so they were not "
            f"compared: averaged as seeds of one method on --allow-unknown-settings"
        )
    return _Ours(aggregate(runs, row_label or "ours"), context, problems)


def _no_settings(run: Run) -> str:
    """Why the settings of ``run`` cannot be read, or ``""``: its folder (or its training run's)
    holds neither ``config.yaml`` nor ``settings.json``, or they hold no setting but the seed
    (``{}``, an empty file: no τ, M or budget to tell runs apart)."""
    from .run_groups import run_settings
    from .runs import SETTINGS_FILENAME

    folders = {run.path.parent, *([run.training_run] if run.training_run else [])}
    saved = [
        folder
        for folder in folders
        if any(os.path.lexists(folder / name) for name in ("config.yaml", SETTINGS_FILENAME))
    ]
    if not saved:
        return "no config.yaml or settings.json beside results.csv"
    if any(run_settings(folder) for folder in saved):
        return ""
    return "its config.yaml or settings.json holds no setting but the seed"


def _load_expected(
    args: argparse.Namespace,
) -> tuple[dict[str, Any], dict[str, str], str, dict[str, Any] | None]:
    """The expected row, notes on its values (errata corrected), what it is, and the budget of
    the protocol behind it (``None`` when unknown)."""
    if args.published:
        table = load_table(args.published)
        where = _pairs(args.where, "--where")
        row = dict(table.row(**where))
        notes = {}
        for column, erratum in table.errata(row).items():
            row[column] = erratum["corrected"]
            notes[column] = f"erratum: paper prints {erratum['published']:g}"
        keys = ", ".join(f"{k}={row[k]}" for k in table.key_columns)
        return row, notes, f"published table {args.published!r}, row {keys}", table.budget(row)
    rows = read_rows(args.reference)
    if args.reference_where:
        keys = _pairs(args.reference_where, "--reference-where")
        matching = [r for r in rows if all(same_key(v, r.get(k, "")) for k, v in keys.items())]
        if not matching:
            valid = {k: sorted({str(r.get(k, "")) for r in rows}) for k in keys}
            raise ValueError(
                f"no reference row in {args.reference} matches {keys}; valid values: {valid}."
            )
        rows = matching
    if not rows:
        raise ValueError(f"{args.reference} holds no reference row.")
    if len(rows) > 1:
        labels = [str(r.get("method")) for r in rows]
        raise ValueError(
            f"{args.reference} holds {len(rows)} reference rows"
            + (" matching --reference-where" if args.reference_where else "")
            + f" ({', '.join(labels[:5])}); a check compares with one: pick it "
            f"with --reference-where method=LABEL."
        )
    row = rows[0]
    budget = {k: row[k] for k in _BUDGET_KEYS if k in row} or None
    return row, {}, f"reference {args.reference}, row {row.get('method')!r}", budget


def _empty_reference_cells(path: str, row: Mapping[str, Any]) -> list[str]:
    """Columns of the reference file's header that ``row`` leaves empty (``read_rows`` drops
    empty cells: without this, a metric whose reference cell is empty would go unmentioned)."""
    from ..safety.files import read_regular

    text = read_regular(path, "reference", 16 << 20, "a rows CSV").decode("utf-8", "replace")
    header = next(csv.reader(io.StringIO(text, newline="")), [])
    return [column for column in header if column and column not in row]


def _budget_text(budget: Mapping[str, Any] | None) -> str:
    if not budget:
        return "unknown"
    text = ", ".join(
        f"{k}={budget[k]:g}" if isinstance(budget[k], float) else f"{k}={budget[k]}"
        for k in (*_BUDGET_KEYS, "fast_dev_run")
        if k in budget
    )
    return text + (f" ({budget['source']})" if budget.get("source") else "")


def _shorter(ours: Mapping[str, Any], expected: Mapping[str, Any] | None) -> bool:
    """Whether our budget is known to be below the expected one: fewer epochs or steps, or a
    part of each epoch (``limit_train_batches``) where the expected row trained on all of it."""
    if not expected:
        return False
    limit = ours.get("limit_train_batches")
    whole = isinstance(limit, float) and limit == 1.0  # Lightning: int 1 is one batch, 1.0 all
    if limit is not None and not whole and limit != expected.get("limit_train_batches"):
        return True
    for key in ("max_epochs", "max_steps", "trained_steps"):
        mine, theirs = ours.get(key), expected.get(key)
        if (
            isinstance(theirs, (int, float))
            and theirs > 0
            and isinstance(mine, (int, float))
            and 0 <= mine < theirs
        ):
            return True
    return False


def _runs_text(row: Mapping[str, Any]) -> str:
    runs = int(row.get("runs") or 1)
    return "one new run" if runs == 1 else f"the mean of {runs} new runs"


def _budget_differs(ours: Mapping[str, Any], expected: Mapping[str, Any] | None) -> str:
    """Why our budget is not a reference row's (a reference is the recipe as shipped: another
    number of epochs or steps is another experiment, whatever its metrics), or ``""``."""
    if not expected:
        return ""
    for key in ("max_epochs", "max_steps", "limit_train_batches"):
        if key in expected and key in ours and ours[key] != expected[key]:
            return (
                f"our runs trained with {key}={ours[key]:g}, the reference row with "
                f"{key}={expected[key]:g}: a check of another budget (run the reference's recipe "
                f"as it is, or build a reference row for this budget)"
            )
    return ""


def _seed_count(row: Mapping[str, Any]) -> int:
    """Distinct seeds of a row (an unknown seed counts as its own); ``runs`` without seeds."""
    seeds = str(row.get("seeds", "")).split()
    if not seeds:
        return int(row.get("runs", 0) or 0)
    return len({s for s in seeds if s != "?"}) + seeds.count("?")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="signorm-regression",
        description="Compare results with a published or reference row under per-metric "
        "tolerances; exit 1 when a metric of the expected row is out of tolerance, missing, NaN "
        "or infinite in ours, or when fewer seeds than --min-seeds were found.",
        epilog="Default tolerances: "
        + ", ".join(
            [f"{k}={v:g}" for k, v in DEFAULT_TOLERANCES.items()]
            + [f"{k}={v * 100:g}%" for k, v in RELATIVE_TOLERANCES.items()]
        ),
    )
    parser.add_argument(
        "results", help="rows.csv of results_table, a results.csv, or a folder of runs"
    )
    parser.add_argument("--row", help="label (method column) of the row to check in a rows.csv")
    expected = parser.add_mutually_exclusive_group(required=True)
    expected.add_argument("--published", help="published table name, e.g. main, rn18, mscaling")
    expected.add_argument("--reference", help="reference rows CSV (results_table format)")
    parser.add_argument(
        "--where",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="the published row, e.g. dataset=CIFAR-100 arch=ResNet-50 "
        "method=σN-Ens (or arch=WRN-28-10 method=sigmaN-Ens)",
    )
    parser.add_argument(
        "--reference-where",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="the reference row (default: the first)",
    )
    parser.add_argument(
        "--tol",
        nargs="*",
        default=[],
        metavar="METRIC=TOL",
        help="override tolerances, e.g. Acc=1.0 NLL=0.05 (absolute) or "
        "MAdds=5%% (relative to the expected value)",
    )
    parser.add_argument("--metrics", nargs="*", help="check only these metrics")
    parser.add_argument(
        "--exclude",
        nargs="*",
        default=[],
        metavar="METRIC",
        help="leave these metrics of the expected row out (e.g. AUPR AUROC FPR95 "
        "for a run without OOD evaluation); the report lists them",
    )
    parser.add_argument(
        "--select",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="the runs to average when the folder holds runs of different "
        "settings (which are refused otherwise), e.g. tau=0.1 "
        "target_diversity=unset; KEY is a setting of the runs' config.yaml "
        "(its last parts suffice)",
    )
    parser.add_argument(
        "--allow-unknown-settings",
        action="store_true",
        help="average results.csv files whose settings cannot be read (no "
        "config.yaml or settings.json beside them, or ones holding no setting but "
        "the seed; refused otherwise), saying so in the report",
    )
    parser.add_argument(
        "--level",
        type=float,
        default=DEFAULT_LEVEL,
        help="the family-wise level of the tolerances derived from a reference row's spread "
        f"(default {DEFAULT_LEVEL:g}: a correct run fails some metric with probability at most "
        f"{1 - DEFAULT_LEVEL:.2g})",
    )
    parser.add_argument(
        "--min-seeds",
        type=int,
        default=1,
        metavar="N",
        help="fail unless our row averages at least N distinct seeds (default 1)",
    )
    return parser


def _check(args: argparse.Namespace) -> tuple[str, bool]:
    """The report and whether the check passed.

    Raises:
        ValueError: On bad input (the message says which and what is valid).
    """
    if args.min_seeds < 1:
        raise ValueError(f"--min-seeds must be >= 1, got {args.min_seeds}.")
    tolerances = _pairs([t for t in args.tol if not t.endswith("%")], "--tol", float)
    relative = {
        name: value / 100
        for name, value in _pairs(
            [t.removesuffix("%") for t in args.tol if t.endswith("%")], "--tol", float
        ).items()
    }
    if not 0 < args.level < 1:
        raise ValueError(f"--level must be in (0, 1), e.g. 0.99, got {args.level:g}.")
    expected, notes, described, budget = _load_expected(args)
    ours = _load_ours(args.results, args.row, args.select, args.allow_unknown_settings)
    checked = [
        name
        for name in (args.metrics or expected)
        if name not in args.exclude and name not in tolerances and name not in relative
    ]
    derived, origin = spread_tolerances(
        {k: v for k, v in expected.items() if not _is_metric(k, v) or k in checked},
        int(ours.row.get("runs") or 1),
        args.level,
    )
    comparisons = compare_rows(
        ours.row,
        expected,
        tolerances,
        args.metrics,
        relative,
        notes,
        args.exclude,
        ours.problems,
        derived,
        origin,
    )
    seeds = _seed_count(ours.row)
    our_budget = {k: ours.row[k] for k in _BUDGET_KEYS if k in ours.row}
    context = [
        *ours.context,
        f"expected: {described}",
        f"budget: ours {_budget_text(our_budget)} | expected {_budget_text(budget)}",
    ]
    if unchecked := [
        f"{name} {ours.row[name]:.4g}"
        for name in DIVERSITY_COLUMNS
        if isinstance(ours.row.get(name), float) and name not in expected
    ]:
        context.append(f"diversity (ours; the expected row has none): {', '.join(unchecked)}")
    if args.reference and (
        empty := [
            name
            for name in _empty_reference_cells(args.reference, expected)
            if _is_metric(name, ours.row.get(name))
        ]
    ):
        context.append(
            f"not compared (empty in the reference row, present in ours): "
            f"{', '.join(empty)}; give the reference a value or pass --metrics"
        )
    if derived:
        context.append(
            f"tolerances from the reference's spread ({origin}): each metric's prediction "
            f"interval for {_runs_text(ours.row)} around the reference's mean, at "
            f"{args.level * 100:g}% over its {len(derived)} metrics together (Bonferroni)"
        )
    budget_differs = args.reference and _budget_differs(ours.row, budget)
    if budget_differs:
        context.append(f"FAIL: {budget_differs}")
    elif _shorter(ours.row, budget):
        context.append(
            "warning: our runs trained on a smaller budget than the expected row's: "
            "a smoke test, not a reproduction"
        )
    passed = all(c.ok for c in comparisons) and not budget_differs
    report = format_report(comparisons, context)
    if seeds < args.min_seeds:
        passed = False
        report += (
            f"\nFAIL: {seeds} distinct seed{'s' * (seeds != 1)} averaged, --min-seeds "
            f"{args.min_seeds} required"
        )
    return report, passed


class ReproductionError(AssertionError):
    """A reproduction left its expected row (raised by :func:`check_reproduction`)."""


def check_reproduction(results: str | Path, *options: str) -> str:
    """Run the check from Python (e.g. in a pytest test of a CI job) and return its report.

    ``options`` are the command's (``"--published", "main", "--where", ...``)::

        def test_reproduces_the_paper():
            check_reproduction("logs/wrn_c100/signorm", "--published", "main", "--where",
                               "dataset=CIFAR-100", "arch=WRN-28-10", "method=sigmaN-Ens",
                               "--min-seeds", "3")

    Raises:
        ReproductionError: If a metric fails or too few seeds were found; its message is the
            report.
        ValueError: On bad options.
    """
    report, passed = _check(_parser().parse_args([str(results), *map(str, options)]))
    if not passed:
        raise ReproductionError(report)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; returns (and, from the command line, exits with) 0 or 1."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        report, passed = _check(args)
    except (ValueError, OSError) as error:  # one line: no usage block above the reason
        print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    print(report)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
