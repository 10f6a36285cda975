"""The registered fine-tune comparison's readings (studies/results/finetune_comparison/DESIGN.md),
from the runs ``signorm-compare`` trained.

For one comparison folder (``--out`` of ``signorm-compare``: ``comparison_runs.csv`` and the run
folders), it checks every run first (learned, no one-class ending, σN-Ens members apart), then
reads, paired by seed, σN-Ens − arm:

* primary: test NLL against Single, Multi-head and Deep Ensembles, Holm's step-down test over
  that family of three (statsmodels'; the k-th smallest p-value's interval, k from 0, at level
  1 − α/(3 − k));
* secondary, no Holm: NLL against the other arms; ECE, accuracy and OOD AUROC against every arm.

Verdicts: *better* / *worse* when the interval excludes 0 (and, for a primary reading, Holm
rejects: once Holm stops at a p-value above its level, a later interval that excludes 0 is
*open*); *equivalent* when TOST at α = 0.05 against the design's margin says so; otherwise
*open*. Seeds missing for an arm shrink its pairs to the seeds both arms ran. ::

    python -m studies.finetune_comparison --runs studies/results/finetune_comparison/digits
    python -m studies.finetune_comparison \\
        --runs studies/results/finetune_comparison/digits_clipped \\
        --unclipped studies/results/finetune_comparison/digits

The second also reads the clipping factor (clipped − unclipped per arm, paired by seed, no
Holm) into ``clipping.md``. ``--lambda-grid`` reads a folder whose methods are σN-Ens at several
λ (``experiments/compare/digits_finetune_lambda.yaml``) by the design's λ rule into
``lambda_grid.md``::

    python -m studies.finetune_comparison --lambda-grid \\
        --runs studies/results/finetune_comparison/digits_lambda
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import yaml

from signorm_lab.reproduction.paired import equivalence_test

from .stats import holm, paired_difference

ALPHA = 0.05
REFERENCE = "signorm"
PRIMARY = ("single", "multi_head", "deep_ensembles")
#: (column of comparison_runs.csv, title, display scale, TOST margin in display units).
METRICS = (
    ("test/cls/NLL", "NLL", 1, 0.02),
    ("test/cls/Acc", "accuracy (points)", 100, 1.5),
    ("test/cal/ECE", "ECE (points)", 100, 1.0),
    ("ood/AUROC", "OOD AUROC (points)", 100, 2.0),
)
#: σN-Ens members count as apart below this regularized σNorm-cos at test (the design's check 3).
APART = 0.99


def read_runs(folder: Path) -> dict[str, dict[int, dict]]:
    """Per method and seed, the row of ``comparison_runs.csv`` and the run's ``results.csv``."""
    runs: dict[str, dict[int, dict]] = {}
    with (folder / "comparison_runs.csv").open(encoding="utf-8") as file:
        for row in csv.DictReader(file):
            with (folder / row["folder"] / "results.csv").open(encoding="utf-8") as results:
                (metrics,) = list(csv.DictReader(results))
            runs.setdefault(row["method"], {})[int(row["seed"])] = {**metrics, **row}
    return runs


def _one_class(run: dict) -> bool:
    """Whether the run ended predicting one class (the routine's health check at test)."""
    return float(run.get("test/health/one_class") or 0) > 0


def _higher_is_better(title: str) -> bool:
    return title != "NLL" and not title.startswith("ECE")


def checks(runs: dict[str, dict[int, dict]], signorm: tuple[str, ...] = (REFERENCE,)) -> list[str]:
    """One line per failed check (empty: every run passed all three); ``signorm`` names the
    σN-Ens methods, whose members must have come apart."""
    failed = []
    for method, seeds in runs.items():
        for seed, run in sorted(seeds.items()):
            if run["learned"] != "True":
                failed.append(f"{method} seed {seed}: did not learn")
            if _one_class(run):
                failed.append(f"{method} seed {seed}: ended predicting one class")
            cos = run.get("test/div/signorm_cos_regularized")
            if method in signorm and not float(cos) < APART:
                failed.append(f"{method} seed {seed}: members not apart (σNorm-cos {cos})")
    return failed


def _difference(runs, arm: str, column: str, scale: float, confidence: float) -> dict | None:
    return _paired(runs[REFERENCE], runs[arm], column, scale, confidence)


def _paired(first: dict, second: dict, column: str, scale: float, confidence: float):
    """``first`` − ``second`` (each: seed → run), paired over the seeds both have."""
    seeds = sorted(set(first) & set(second))
    if len(seeds) < 2:
        return None
    ours = [scale * float(first[s][column]) for s in seeds]
    theirs = [scale * float(second[s][column]) for s in seeds]
    row = paired_difference(ours, theirs, confidence)
    row["seeds"] = seeds
    row["differences"] = [a - b for a, b in zip(ours, theirs, strict=True)]
    return row


def _verdict(row: dict, margin: float, higher_is_better: bool, rejected: bool = True) -> str:
    """The design's verdict words; ``rejected`` is Holm's decision for a primary reading."""
    excludes_zero = row["low"] > 0 or row["high"] < 0
    if excludes_zero and rejected:
        return "better" if (row["low"] > 0) == higher_is_better else "worse"
    if equivalence_test(row["differences"], margin) < ALPHA:
        return f"equivalent (±{margin:g})"
    return "open (Holm stopped before it)" if excludes_zero else "open"


def readings(runs: dict[str, dict[int, dict]]) -> list[dict]:
    """The primary and secondary rows, in the design's order."""
    rows = []
    primary = [arm for arm in PRIMARY if arm in runs]
    p_values = {
        arm: d["p"]
        for arm in primary
        if (d := _difference(runs, arm, "test/cls/NLL", 1, 0.95)) is not None
    }
    family = holm(p_values, len(PRIMARY), ALPHA)
    for arm in [a for a in runs if a != REFERENCE]:
        for column, title, scale, margin in METRICS:
            test = family.get(arm) if column == "test/cls/NLL" else None
            level = test["level"] if test else 1 - ALPHA
            row = _difference(runs, arm, column, scale, level)
            if row is None:
                continue
            rejected = test["rejected"] if test else True
            rows.append(
                {
                    "reading": "primary (Holm)" if test else "secondary",
                    "arm": arm,
                    "metric": title,
                    "seeds": row["seeds"],
                    "mean": row["mean"],
                    "low": row["low"],
                    "high": row["high"],
                    "level": level,
                    "p_holm": test["p"] if test else None,
                    "verdict": _verdict(row, margin, _higher_is_better(title), rejected),
                }
            )
    return sorted(rows, key=lambda r: r["reading"] != "primary (Holm)")


def table(runs: dict[str, dict[int, dict]]) -> str:
    """The checks, then the readings, as Markdown."""
    failed = checks(runs)
    lines = [
        "Checks (learned, no one-class ending, σN-Ens members apart): "
        + ("every run passed" if not failed else "FAILED: " + "; ".join(failed)),
        "",
        "| reading | σN-Ens − arm | metric | seeds | mean | interval | level | Holm p | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in readings(runs):
        digits = 3 if r["metric"] == "NLL" else 2
        holm_p = "" if r["p_holm"] is None else f"{r['p_holm']:.4f}"
        lines.append(
            f"| {r['reading']} | {r['arm']} | {r['metric']} | "
            f"{','.join(map(str, r['seeds']))} | {r['mean']:+.{digits}f} | "
            f"[{r['low']:+.{digits}f}, {r['high']:+.{digits}f}] | "
            f"{100 * r['level']:.1f} % | {holm_p} | {r['verdict']} |"
        )
    lines += [
        "",
        (
            "Holm p: the primary family's Holm-adjusted p-value (statsmodels' multipletests, "
            f"step-down); a primary reading is decided only where it is below {ALPHA:g}."
        ),
    ]
    return "\n".join(lines) + "\n"


def clipping_table(clipped: dict, unclipped: dict) -> str:
    """The design's clipping factor: per arm, clipped − unclipped paired by seed (95 % t
    intervals, no Holm), with the same verdict words (*better* is lower NLL and ECE, higher
    accuracy and AUROC), and the relapses (runs ending in one class) of each."""
    lines = [
        "| arm | metric | seeds | clipped − unclipped | interval | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for arm in [a for a in clipped if a in unclipped]:
        for column, title, scale, margin in METRICS:
            row = _paired(clipped[arm], unclipped[arm], column, scale, 1 - ALPHA)
            if row is None:
                continue
            digits = 3 if title == "NLL" else 2
            verdict = _verdict(row, margin, _higher_is_better(title))
            lines.append(
                f"| {arm} | {title} | {','.join(map(str, row['seeds']))} | "
                f"{row['mean']:+.{digits}f} | "
                f"[{row['low']:+.{digits}f}, {row['high']:+.{digits}f}] | {verdict} |"
            )
    relapses = {
        arm: tuple(sum(map(_one_class, runs[arm].values())) for runs in (clipped, unclipped))
        for arm in clipped
        if arm in unclipped
    }
    lines += [
        "",
        "Runs ending in one class (clipped / unclipped): "
        + ", ".join(f"{arm} {c} / {u}" for arm, (c, u) in relapses.items()),
    ]
    return "\n".join(lines) + "\n"


def strength(run: dict, folder: Path) -> float:
    """The run's λ (``diversity_strength``), read from its saved ``config.yaml``."""
    config = yaml.safe_load((folder / run["folder"] / "config.yaml").read_text(encoding="utf-8"))
    return float(config["routine"]["init_args"]["model"]["init_args"]["diversity_strength"])


def lambda_grid_table(runs: dict[str, dict[int, dict]], strengths: dict[str, float]) -> str:
    """The design's λ rule: the λ with the lowest mean NLL, unless others are equivalent to it
    in NLL (TOST at ±0.02, paired by seed), in which case the most diverse of those (the lowest
    mean σNorm-cos). Per λ the means, and each λ's NLL minus the lowest one's."""
    columns = (*(m[0] for m in METRICS), "test/div/signorm_cos_regularized")

    def mean(method: str, column: str) -> float:
        values = [float(run[column]) for run in runs[method].values()]
        return sum(values) / len(values)

    order = sorted(runs, key=lambda method: strengths[method])
    best = min(order, key=lambda method: mean(method, "test/cls/NLL"))
    failed = checks(runs, signorm=tuple(runs))
    lines = [
        "Checks (learned, no one-class ending, members apart): "
        + ("every run passed" if not failed else "FAILED: " + "; ".join(failed)),
        "",
        (
            "| λ | seeds | NLL | accuracy (%) | ECE (%) | OOD AUROC (%) | σNorm-cos | "
            "NLL − lowest | interval | verdict |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for method in order:
        means = [mean(method, column) for column in columns]
        cells = [f"{means[0]:.3f}", *(f"{100 * m:.2f}" for m in means[1:4]), f"{means[4]:.3f}"]
        if method == best:
            cells += ["lowest mean NLL", "", ""]
        else:
            row = _paired(runs[method], runs[best], "test/cls/NLL", 1, 1 - ALPHA)
            verdict = _verdict(row, METRICS[0][3], higher_is_better=False)
            if _equivalent(row) and not verdict.startswith("equivalent"):
                verdict += f", equivalent (±{METRICS[0][3]:g})"
            cells += [f"{row['mean']:+.3f}", f"[{row['low']:+.3f}, {row['high']:+.3f}]", verdict]
        seeds = ",".join(map(str, sorted(runs[method])))
        lines.append(f"| {strengths[method]:g} | {seeds} | " + " | ".join(cells) + " |")
    chosen, best = _rule_pick(runs, order, mean)
    lines += ["", f"The rule picks λ = {strengths[chosen]:g} ({_why(chosen, best, strengths)})."]
    apart = [m for m in order if not any(f.startswith(f"{m} seed ") for f in failed)]
    if set(apart) != set(order):
        lines += ["", _eligible_pick(runs, strengths, apart, mean)]
    return "\n".join(lines) + "\n"


def _why(chosen: str, best: str, strengths: dict[str, float]) -> str:
    if chosen == best:
        return "the lowest mean NLL"
    return f"equivalent in NLL to λ {strengths[best]:g} (the lowest mean), and more diverse"


def _equivalent(row: dict) -> bool:
    """TOST at the NLL margin: the rule asks for it alone (a λ may be worse by less than it)."""
    return equivalence_test(row["differences"], METRICS[0][3]) < ALPHA


def _rule_pick(runs, candidates: list[str], mean) -> tuple[str, str]:
    """The design's λ rule over ``candidates``: (the pick, the lowest mean NLL). The pick is the
    most diverse (lowest mean σNorm-cos) of the λ equivalent in NLL to the lowest."""
    best = min(candidates, key=lambda method: mean(method, "test/cls/NLL"))
    equivalent = [best] + [
        method
        for method in candidates
        if method != best
        and _equivalent(_paired(runs[method], runs[best], "test/cls/NLL", 1, 1 - ALPHA))
    ]
    return min(equivalent, key=lambda m: mean(m, "test/div/signorm_cos_regularized")), best


def _eligible_pick(runs, strengths: dict[str, float], apart: list[str], mean) -> str:
    """The rule again among the λ whose runs passed every check at every seed (DESIGN.md: a λ
    failing one, such as members not apart, is not eligible as an ensemble method's default)."""
    failing = ", ".join(f"{strengths[m]:g}" for m in runs if m not in apart)
    if not apart:
        return f"Among the λ that passed every check at every seed: none (λ {failing} failed)."
    chosen, best = _rule_pick(runs, apart, mean)
    return (
        f"Among the λ that passed every check at every seed (λ {failing} did not), the rule "
        f"picks λ = {strengths[chosen]:g} ({_why(chosen, best, strengths)})."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs",
        type=Path,
        required=True,
        help="a signorm-compare output folder (comparison_runs.csv)",
    )
    parser.add_argument(
        "--unclipped",
        type=Path,
        help="with --runs the clipped comparison: its unclipped twin, for the clipping factor "
        "(written to clipping.md)",
    )
    parser.add_argument(
        "--lambda-grid",
        action="store_true",
        help="--runs is the λ grid (σN-Ens at several λ): read it by the design's λ rule "
        "(written to lambda_grid.md)",
    )
    args = parser.parse_args(argv)
    runs = read_runs(args.runs)
    if args.lambda_grid:
        strengths = {}
        for method, seeds in runs.items():
            found = {strength(run, args.runs) for run in seeds.values()}
            if len(found) != 1:
                parser.error(f"{method}'s runs are at different λ {sorted(found)}; one λ a method.")
            (strengths[method],) = found
        text = lambda_grid_table(runs, strengths)
        print(text, end="")
        (args.runs / "lambda_grid.md").write_text(text, encoding="utf-8")
        return
    text = table(runs)
    print(text, end="")
    (args.runs / "verdicts.md").write_text(text, encoding="utf-8")
    if args.unclipped is not None:
        clipping = clipping_table(runs, read_runs(args.unclipped))
        print("\nClipping, clipped − unclipped:\n\n" + clipping, end="")
        (args.runs / "clipping.md").write_text(clipping, encoding="utf-8")


if __name__ == "__main__":
    main()
