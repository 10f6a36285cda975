r"""TorchUncertainty ``results.csv`` files → mean ± std rows in the paper's columns.

Each ``--run LABEL=PATH...`` group (one folder per seed, or ``results.csv`` files) becomes
one row: for every paper column, the mean and the sample standard deviation (``ddof=1``; 0
for a single run) over the group's training runs (a ``test --ckpt_path`` re-evaluation of a
run's checkpoint replaces that run's result, it is not another seed; see
:func:`~signorm_lab.reproduction.runs.merge_evaluations`). A NaN or infinite value in
a run makes its column's mean NaN or infinite, and a column some runs logged and others did not
is named on the standard error. The row also holds ``seeds`` and the training budget the runs
shared (``max_epochs``, ``max_steps``, ``limit_train_batches``, ``trained_steps``). The rows are
written as a CSV (``rows.csv``, the input of
:mod:`~signorm_lab.reproduction.regression`) and, appended under the rows of a
published table (``--published main --where dataset=CIFAR-100 arch=WideResNet-28-10``), as
Markdown (``table.md``) and LaTeX (``table.tex``)::

    signorm-results-table \
        --run "σN-Ens (ours)=logs/wrn_c100/signorm" --published main \
        --where dataset=CIFAR-100 arch=WideResNet-28-10 --out tables/wrn_c100

Columns (paper name ← TorchUncertainty 0.13 ``results.csv`` column, unit):

* ``Acc`` ← ``test/cls/Acc``, ``ECE`` ← ``test/cal/ECE``, ``aECE`` ← ``test/cal/aECE``,
  ``AUPR`` ← ``ood/AUPR``, ``AUROC`` ← ``ood/AUROC``, ``FPR95`` ← ``ood/FPR95``: ×100 (%);
* ``NLL`` ← ``test/cls/NLL`` (nats), ``Brier`` ← ``test/cls/Brier``;
* near/far OOD: ``AUROC_near`` ← ``ood_near/AUROC`` (and ``AUPR_``/``FPR95_``, ``_far``), %;
* corruption shift: ``Acc``/``NLL``/``ECE`` at severity ``k`` ← ``shift/s{k}/Acc`` … (tables
  with a ``severity`` key get one row per severity);
* ``Params`` ← ``test/cplx/params`` / 10⁶ (millions);
* ``MAdds`` ← ``test/cplx/flops``, in G multiply-adds per image, see :func:`madds_per_image`;
* the ensemble's diversity, in no paper table (printed after a published table's columns):
  ``signorm_cos`` ← ``test/div/signorm_cos`` (σNorm-cos over all σNorm layers, 1: identical
  members), ``U_mod`` ← ``test/ens_MI`` (the mutual information I[Y; M | x] on the test set, nats),
  ``jensen_gap`` ← ``test/div/jensen_gap`` (the members' mean cross-entropy minus the ensemble's,
  on the test set, nats; :func:`~torch_uncertainty_signorm.evaluation.diversity.jensen_gap`). A
  run of a single model logs none of them: its row leaves them out.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..evaluation.eval_sets import SEVERITIES, ood_metric_name, shift_metric_name
from .published import PublishedTable, load_table
from .runs import (
    TRAINED_STEPS_COLUMN,
    Run,
    check_header,
    find_runs,
    merge_evaluations,
    trained_steps,
)
from .tables import format_table

__all__ = [
    "DIVERSITY_COLUMNS",
    "PAPER_COLUMNS",
    "aggregate",
    "command",
    "madds_per_image",
    "mean_std",
    "missing_columns",
    "paper_metrics",
    "read_rows",
    "run_summary",
    "table_cells",
    "to_latex",
    "write_rows",
]


@dataclass(frozen=True)
class PaperColumn:
    """A column of the paper's tables and the TorchUncertainty metric it is computed from."""

    source: str
    scale: float
    fmt: str


#: Paper column -> (results.csv column, factor to the paper's unit, display format).
PAPER_COLUMNS: dict[str, PaperColumn] = {
    "Acc": PaperColumn("test/cls/Acc", 100, ".1f"),
    "NLL": PaperColumn("test/cls/NLL", 1, ".3f"),
    "ECE": PaperColumn("test/cal/ECE", 100, ".2f"),
    "aECE": PaperColumn("test/cal/aECE", 100, ".2f"),
    "Brier": PaperColumn("test/cls/Brier", 1, ".4f"),
    "AUPR": PaperColumn("ood/AUPR", 100, ".1f"),
    "AUROC": PaperColumn("ood/AUROC", 100, ".1f"),
    "FPR95": PaperColumn("ood/FPR95", 100, ".1f"),
    **{
        f"{metric}_{group}": PaperColumn(ood_metric_name(group, metric), 100, ".2f")
        for group in ("near", "far")
        for metric in ("AUROC", "AUPR", "FPR95")
    },
    "Params": PaperColumn("test/cplx/params", 1e-6, ".2f"),
    "MAdds": PaperColumn("test/cplx/flops", math.nan, ".3g"),  # see madds_per_image
    # The ensemble's diversity (not in the paper's tables): σNorm-cos of the members'
    # importances over all σNorm layers (1: identical members), the mutual information
    # U_mod = I[Y; M | x] on the test set, in nats (TorchUncertainty's test/ens_MI), and the
    # Jensen gap on the test set, in nats (the routine's test/div/jensen_gap).
    "signorm_cos": PaperColumn("test/div/signorm_cos", 1, ".3f"),
    "U_mod": PaperColumn("test/ens_MI", 1, ".4f"),
    "jensen_gap": PaperColumn("test/div/jensen_gap", 1, ".4f"),
}
#: The columns of :data:`PAPER_COLUMNS` that describe the ensemble's diversity: printed after a
#: published table's own columns (which lack them) whenever our runs logged them.
DIVERSITY_COLUMNS = ("signorm_cos", "U_mod", "jensen_gap")
#: Per-severity shift columns: paper column -> (``shift/s{k}/<name>``, factor).
SHIFT_COLUMNS = {"Acc": ("Acc", 100), "NLL": ("NLL", 1), "ECE": ("ECE", 100)}


def madds_per_image(flops: float, images_per_batch: int) -> float:
    r"""G multiply-adds per test image, all members, from TorchUncertainty's ``test/cplx/flops``.

    TorchUncertainty 0.13's ``ClassificationRoutine.test_step`` runs
    :class:`torch.utils.flop_counter.FlopCounterMode` around one forward pass of the *first
    test batch* (``B`` images, before any member repetition; an ensemble's forward
    computes all ``M`` members) and logs the total as ``test/cplx/flops``. PyTorch counts 2
    FLOPs per multiply-add (a matmul of ``(m, k)`` by ``(k, n)`` is ``2mkn``), and only
    matmuls, convolutions and attention (not norms or activations, which papers' MAdds
    omit too). Hence

    .. math::

        \text{MAdds per image} = \frac{\text{flops}}{2\,B} \times 10^{-9}\ \text{G}.

    ``B`` is the test loader's batch size, or the test set size if smaller; with
    test-time augmentation it counts the images of the batch, so the views' cost is
    included per image.

    Raises:
        ValueError: If ``images_per_batch`` is not a positive integer.
    """
    if (
        isinstance(images_per_batch, bool)
        or not isinstance(images_per_batch, int)
        or (images_per_batch < 1)
    ):
        raise ValueError(
            f"images_per_batch must be a positive integer (the first test batch's size), "
            f"got {images_per_batch!r}."
        )
    return flops / (2 * images_per_batch) * 1e-9


def paper_metrics(run: Run, test_batch_size: int | None = None) -> dict[str, float]:
    """One run's metrics in the paper's columns and units (only the columns it logged).

    ``MAdds`` needs the first test batch's size: ``test_batch_size``, else the run's
    ``test_batch_size`` setting; without either it is left out.
    Shift columns are ``s{k}/Acc`` … for each logged severity ``k``.
    """
    row: dict[str, float] = {}
    for name, column in PAPER_COLUMNS.items():
        if column.source in run.metrics and name != "MAdds":
            row[name] = run.metrics[column.source] * column.scale
    batch = test_batch_size if test_batch_size is not None else run.settings.get("test_batch_size")
    if "test/cplx/flops" in run.metrics and batch is not None:
        row["MAdds"] = madds_per_image(run.metrics["test/cplx/flops"], int(batch))
    for k in SEVERITIES:
        for name, (metric, scale) in SHIFT_COLUMNS.items():
            if (source := shift_metric_name(k, metric)) in run.metrics:
                row[f"s{k}/{name}"] = run.metrics[source] * scale
    return row


def mean_std(
    runs: Sequence[Run],
    columns: Sequence[str] | None = None,
    test_batch_size: int | None = None,
    *,
    skip_nonfinite: bool = True,
) -> dict[str, Any]:
    """Mean and sample std (``ddof=1``; 0 for one value, NaN for none) of each column.

    A column is a paper column (``Acc``, see :func:`paper_metrics`) or a raw ``results.csv``
    metric (``test/div/signorm_cos``); a run that did not log it is left out of its mean, which
    is NaN when no run logged it. A run that logged NaN is left out too, unless
    ``skip_nonfinite`` is ``False``: then a NaN or infinite value makes the mean NaN or
    infinite. ``columns`` defaults to the paper columns every run logged (any run, when
    ``skip_nonfinite`` is ``False``). Returns ``{"runs": n, "Acc": mean, "Acc_std": std, ...}``.
    """
    per_run = [
        {
            name: value
            for name, value in (paper_metrics(run, test_batch_size) | dict(run.metrics)).items()
            if not (skip_nonfinite and math.isnan(value))
        }
        for run in runs
    ]
    if columns is None:
        logged = all if skip_nonfinite else any
        columns = [
            name
            for name in _ALL_PAPER_COLUMNS
            if per_run and logged(name in metrics for metrics in per_run)
        ]
    row: dict[str, Any] = {"runs": len(runs)}
    for column in columns:
        values = [metrics[column] for metrics in per_run if column in metrics]
        finite = bool(values) and all(map(math.isfinite, values))
        # sum: NaN if a value is NaN, else the infinite one (fmean raises on inf - inf)
        row[column] = statistics.fmean(values) if finite else sum(values) if values else math.nan
        row[f"{column}_std"] = (
            math.nan if not finite else 0.0 if len(values) == 1 else statistics.stdev(values)
        )
    return row


#: Every column of :func:`paper_metrics`, in the tables' order.
_ALL_PAPER_COLUMNS = [
    *PAPER_COLUMNS,
    *(f"s{k}/{name}" for k in SEVERITIES for name in SHIFT_COLUMNS),
]


def missing_columns(
    runs: Sequence[Run], test_batch_size: int | None = None
) -> dict[str, list[Path]]:
    """The paper columns some of ``runs`` logged and others did not: column -> the
    ``results.csv`` files lacking it."""
    per_run = [(run.path, paper_metrics(run, test_batch_size)) for run in runs]
    return {
        name: [path for path, metrics in per_run if name not in metrics]
        for name in _ALL_PAPER_COLUMNS
        if 0 < sum(name in metrics for _, metrics in per_run) < len(per_run)
    }


def run_summary(runs: Sequence[Run], test_batch_size: int | None = None) -> list[str]:
    """What a row averages, for the console: its training runs and seeds, the evaluations
    merged into one run, and the paper columns some runs lack."""
    merged = merge_evaluations(runs)
    seeds = [str(run.settings.get("seed", "?")) for run in merged]
    lines = [
        (
            f"{len(merged)} training run{'s' * (len(merged) != 1)} (seed"
            f"{'s' * (len(merged) != 1)} {', '.join(seeds)}) from {len(runs)} results.csv"
        )
    ]
    if len(set(seeds) - {"?"}) < len([s for s in seeds if s != "?"]):
        lines.append("warning: training runs share a seed; they are not independent repeats")
    for run in merged:
        if len(run.evaluations) > 1:
            later = ", ".join(str(path.parent) for path in run.evaluations[:-1])
            lines.append(
                f"{run.training_run}: evaluated {len(run.evaluations)} times; the "
                f"latest ({run.path.parent}) counts, not {later}"
            )
    for column, lacking in missing_columns(merged, test_batch_size).items():
        lines.append(
            f"warning: {column} is missing from {len(lacking)} of {len(merged)} runs: "
            + ", ".join(str(path.parent) for path in lacking)
        )
    return lines


def _shared(values: Sequence[Any]) -> Any:
    """The value every run has, else ``None``."""
    return values[0] if values and all(v == values[0] for v in values) else None


def aggregate(
    runs: Sequence[Run], label: str, test_batch_size: int | None = None
) -> dict[str, Any]:
    """One table row: ``label``, ``seeds``, the shared budget and the :func:`mean_std` of every
    paper column a run logged.

    Runs evaluating the same training run count once
    (:func:`~signorm_lab.reproduction.runs.merge_evaluations`); a non-finite value is
    kept (the mean is NaN or infinite). ``seeds`` lists the training runs' seeds
    (``?`` where unknown); ``max_epochs``, ``max_steps``, ``limit_train_batches`` and
    ``trained_steps`` (the optimizer steps the run recorded, see
    :func:`~signorm_lab.reproduction.runs.trained_steps`) are set when every run
    has the same.

    Returns ``{"method": label, "runs": n, "seeds": "0 1 2", "max_epochs": 200, "Acc": mean,
    "Acc_std": std, ...}``.

    Raises:
        ValueError: If ``runs`` is empty.
    """
    if not runs:
        raise ValueError(f"no runs to aggregate for {label!r}.")
    runs = merge_evaluations(runs)
    row: dict[str, Any] = {
        "method": label,
        "runs": len(runs),
        "seeds": " ".join(str(run.settings.get("seed", "?")) for run in runs),
    }
    # Lightning's defaults; by type too: an int limit_train_batches of 1 is one batch, not 1.0.
    unbounded = {"max_steps": -1, "limit_train_batches": 1.0}
    for key in ("max_epochs", "max_steps", "limit_train_batches"):
        value = _shared([run.settings.get(key) for run in runs])
        default = unbounded.get(key)
        if value is not None and (value != default or type(value) is not type(default)):
            row[key] = value
    if _shared([bool(run.settings.get("fast_dev_run")) for run in runs]):
        row["max_steps"] = int(runs[0].settings["fast_dev_run"])  # fast_dev_run: N batches
    steps = [
        int(run.metrics[TRAINED_STEPS_COLUMN])
        if math.isfinite(run.metrics.get(TRAINED_STEPS_COLUMN, math.nan))
        else trained_steps(run.training_run)
        if run.training_run
        else None
        for run in runs
    ]
    if (value := _shared(steps)) is not None:
        row["trained_steps"] = value
    return row | mean_std(runs, test_batch_size=test_batch_size, skip_nonfinite=False)


def _rows_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Aggregated rows as CSV text (columns: union of the rows', first row's order first)."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="")
    writer.writeheader()
    writer.writerows(
        {k: f"{v:.10g}" if isinstance(v, float) else v for k, v in row.items()} for row in rows
    )  # no float noise such as 4.390000000000001
    return buffer.getvalue()


def write_rows(rows: Sequence[Mapping[str, Any]], path: str | Path) -> None:
    """Write aggregated rows as CSV (:func:`_rows_text`), whole
    (:func:`~signorm_lab.safety.atomic_files.replaced_atomically`: a link at ``path`` is
    replaced, never written through)."""
    _write_together({Path(path): _rows_text(rows)})


def _write_together(texts: Mapping[Path, str]) -> None:
    """Write every file of ``texts`` whole, all or none: each into a temporary file beside it
    (:func:`~signorm_lab.safety.atomic_files.replaced_atomically`), and only once all are
    written, each renamed over its name. A write that fails (a full disk) leaves none of them,
    and the temporary files are removed, so that the command runs again as it did the first
    time."""
    from contextlib import ExitStack

    from ..safety.atomic_files import replaced_atomically

    with ExitStack() as stack:
        for path, text in texts.items():
            partial = stack.enter_context(replaced_atomically(path))
            partial.write_text(text, newline="")


#: Columns of a rows CSV that hold numbers (the metrics, their stds, the runs' budget).
_NUMBER_COLUMNS = frozenset(
    {"runs", "max_epochs", "max_steps", "limit_train_batches", "trained_steps"}
)


def _numeric_column(key: str) -> bool:
    base = key.removesuffix("_std")
    if base.startswith("s") and "/" in base:  # a shift column, s3/Acc
        base = base.partition("/")[2]
    return key in _NUMBER_COLUMNS or base in PAPER_COLUMNS


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read rows written by :func:`write_rows` (numbers as floats, ``nan`` as NaN); an empty
    cell is a value the row does not hold, left out of it. ``seeds`` stays text.

    Raises:
        ValueError: If the file is not UTF-8, the header names a column twice, a metric's
            cell is not a number (a word, a spreadsheet formula such as ``=1+1``), a field is
            over the CSV reader's limit, or a row has more cells than the header; the message
            names the cell.
    """
    from ..safety.files import read_regular

    path = Path(path)
    try:  # a BOM is no part of a name
        text = read_regular(path, "rows", 16 << 20, "a rows CSV").decode().removeprefix("\ufeff")
    except UnicodeDecodeError as error:  # a label or a name would read as another
        raise ValueError(
            f"{path} is not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
            f"{error.start}); a rows CSV is the text signorm-results-table writes."
        ) from None
    rows = []
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, [])
        check_header(header, path)
        for number, fields in enumerate(reader, start=2):
            if len(fields) > len(header):
                raise ValueError(
                    f"{path}: line {number} has {len(fields)} cells but the "
                    f"header has {len(header)}."
                )
            row = {}
            for key, cell in zip(header, fields, strict=False):
                if cell == "":
                    continue
                row[key] = _rows_cell(key, cell, path, number)
            rows.append(row)
    except csv.Error as error:  # a field over the csv module's limit (128 kB), a NUL byte
        raise ValueError(f"{path} is not a rows CSV ({error}).") from None
    return rows


def _rows_cell(key: str, text: str, path: Path, line: int) -> Any:
    if key == "seeds":
        return text
    try:
        return float(text)
    except ValueError:
        if _numeric_column(key) or text[:1] in ("=", "+", "-", "@"):
            raise ValueError(
                f"{path}: line {line}, column {key!r} holds {text!r:.60}, not a "
                f"number (a formula or text); a rows CSV holds numbers in its "
                f"metric columns."
            ) from None
        return text


def _format(value: Any, std: Any, column: str) -> str:
    if not isinstance(value, float):
        return "--"
    if math.isnan(value):
        return "NaN"  # logged as NaN: broken, unlike "--" (not logged)
    fmt = PAPER_COLUMNS[column].fmt if column in PAPER_COLUMNS else ".3f"
    text = f"{value:{fmt}}"
    if isinstance(std, float) and std > 0:
        text += f" ± {std:{fmt}}"
    return text


def _our_rows(
    table: PublishedTable | None, rows: Sequence[Mapping[str, Any]], where: Mapping[str, str]
) -> list[dict[str, str]]:
    """Our aggregated rows as display cells in the published table's columns."""
    keys = table.key_columns if table else ["method"]
    metric_columns = _metric_columns(table, rows)
    severities = "severity" in keys
    out = []
    for row in rows:
        for k in SEVERITIES if severities else (None,):
            cells = {key: str(where.get(key, "")) for key in keys}
            label = f"{row['method']} (n={row['runs']:g})"
            cells["method" if "method" in keys else keys[-1]] = label
            prefix = ""
            if k is not None:
                cells["severity"], prefix = str(k), f"s{k}/"
            for column in metric_columns:
                cells[column] = _format(
                    row.get(prefix + column), row.get(f"{prefix}{column}_std"), column
                )
            out.append(cells)
    return out


def _metric_columns(table: PublishedTable | None, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if table is not None:
        return [c for c in table.metric_columns if not c.endswith("_std")] + [
            c
            for c in DIVERSITY_COLUMNS
            if c not in table.metric_columns and any(c in row for row in rows)
        ]
    return [c for c in PAPER_COLUMNS if any(c in row for row in rows)]


def table_cells(
    table: PublishedTable | None,
    rows: Sequence[Mapping[str, Any]],
    where: Mapping[str, str] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Header and body: the published rows matching ``where``, then ours.

    Key columns fixed by ``where`` are dropped; published ``X ± X_std`` pairs are joined; a
    published value with an erratum in the table's sidecar shows the corrected value and the
    printed one.
    """
    where = dict(where or {})
    metric_columns = _metric_columns(table, rows)
    keys = [k for k in (table.key_columns if table else ["method"]) if k not in where]
    body: list[dict[str, str]] = []
    if table is not None:
        for row in table.select_text(**where):
            cells = {k: row[k] for k in keys}
            errata = table.errata(row)
            for column in metric_columns:
                std = row.get(f"{column}_std", "")
                cells[column] = (row.get(column) or "--") + (f" ± {std}" if std else "")
                if column in errata:
                    fmt = PAPER_COLUMNS[column].fmt if column in PAPER_COLUMNS else "g"
                    cells[column] = (
                        f"{errata[column]['corrected']:{fmt}} (erratum; printed {row[column]})"
                    )
            body.append(cells)
    body += _our_rows(table, rows, where)
    header = keys + metric_columns
    return header, [[cells.get(c, "") for c in header] for cells in body]


def _latex_escape(text: str) -> str:
    for char, escaped in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("_", r"\_"),
        ("#", r"\#"),
        ("σ", r"$\sigma$"),
        ("±", r"$\pm$"),
    ):
        text = text.replace(char, escaped)
    return text


def to_latex(
    header: Sequence[str],
    body: Sequence[Sequence[str]],
    caption: str = "",
    label: str = "",
    num_key_columns: int = 1,
) -> str:
    """A booktabs ``table`` environment; ``caption`` is LaTeX already (the paper's own)."""
    spec = "l" * num_key_columns + "r" * (len(header) - num_key_columns)
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{caption}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(map(_latex_escape, header)) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(map(_latex_escape, row)) + r" \\" for row in body]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def _parse_pairs(pairs: Sequence[str], option: str) -> dict[str, str]:
    parsed = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{option} expects NAME=VALUE, got {pair!r}.")
        parsed[name] = value
    return parsed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="signorm-results-table",
        description="Collect TorchUncertainty results.csv files into mean ± std rows and append "
        "them to a published table (Markdown, LaTeX, CSV).",
    )
    parser.add_argument(
        "--run",
        action="append",
        required=True,
        metavar="LABEL=PATH[,PATH...]",
        help="one row: its label and the runs (folders searched for results.csv, "
        "or files) averaged into it; repeat for several rows",
    )
    parser.add_argument("--published", help="published table to append to, e.g. main, rn18, vit")
    parser.add_argument(
        "--where",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="published rows to keep, e.g. dataset=CIFAR-100 arch=ResNet-50 "
        "(aliases such as arch=WRN-28-10, method=sigmaN-Ens are accepted)",
    )
    parser.add_argument(
        "--test-batch-size",
        type=int,
        help="size of the first test batch, for MAdds per image (default: from "
        "each run's settings.json or config.yaml)",
    )
    parser.add_argument("--out", default=".", help="folder for rows.csv, table.md and table.tex")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace rows.csv, table.md and table.tex when --out holds them "
        "(refused otherwise: nothing is written)",
    )
    parser.add_argument(
        "--select",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="the runs of each row when its folders hold runs of different "
        "settings (refused otherwise), e.g. tau=0.1",
    )
    return parser


#: The files the command writes into ``--out``.
OUTPUT_NAMES = ("rows.csv", "table.md", "table.tex")


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` that is no folder, or that holds one of :data:`OUTPUT_NAMES` (a
    file the command did not write this time) unless ``overwrite``."""
    import os

    if os.path.lexists(out) and not out.is_dir():
        raise ValueError(
            f"--out {out} is a file, not a folder: give the folder to write "
            f"{', '.join(OUTPUT_NAMES)} into."
        )
    present = [name for name in OUTPUT_NAMES if os.path.lexists(out / name)]
    if present and not overwrite:
        raise ValueError(
            f"--out {out} already holds {', '.join(present)}: nothing was "
            f"written. Choose another folder, or pass --overwrite to replace them."
        )
    for name in present:
        if (out / name).is_dir() and not (out / name).is_symlink():
            raise ValueError(f"--out {out}: {name} is a folder; nothing was written.")


def main(argv: Sequence[str] | None = None) -> tuple[list[str], list[list[str]]]:
    from .run_groups import select_runs

    parser = _parser()
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        _check_out(out, args.overwrite)
        where = _parse_pairs(args.where, "--where")
        groups = _parse_pairs(args.run, "--run")
        table = load_table(args.published) if args.published else None
        if table is not None:
            if not table.select(**where):
                raise ValueError(table.no_match_message(**where))
            where = table.resolve(**where)
        # each row: runs of one settings group, none on stand-in data (refused, named)
        found = {
            label: select_runs(find_runs(paths.split(",")), args.select, label)
            for label, paths in groups.items()
        }
    except (ValueError, OSError) as error:  # one line: no usage block above the reason
        print(f"{parser.prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    rows = []
    for label, runs in found.items():
        for line in run_summary(runs, args.test_batch_size):
            print(f"{label}: {line}", file=sys.stderr)
        rows.append(aggregate(runs, label, args.test_batch_size))
    header, body = table_cells(table, rows, where)
    num_keys = len(header) - len(_metric_columns(table, rows))
    caption = f"{table.meta['caption']} Our rows appended." if table else ""
    label = f"{table.label}-ours" if table else ""
    markdown = format_table(header, body, markdown=True)
    try:  # all three or none: a full disk leaves nothing that would block the next run
        out.mkdir(parents=True, exist_ok=True)
        _write_together(
            {
                out / "rows.csv": _rows_text(rows),
                out / "table.md": markdown,
                out / "table.tex": to_latex(header, body, caption, label, num_keys),
            }
        )
    except OSError as error:
        print(
            f"{parser.prog}: error: --out {out}: {error.strerror or error}; nothing was "
            f"written (free space or choose another folder, then run again).",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    print(markdown)
    return header, body


def command(argv: Sequence[str] | None = None) -> int:
    """The ``signorm-results-table`` command: :func:`main`, exit status 0 (2 on bad usage)."""
    main(argv)
    return 0


if __name__ == "__main__":
    sys.exit(command())
