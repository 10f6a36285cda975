"""``signorm-compare``: σN-Ens against the methods a user would pick instead, in one table.

A comparison file (``experiments/compare/*.yaml``) names one recipe per method, the seeds and
the method the others are compared with (σN-Ens). Every run goes through the
``torch-uncertainty`` command as a user would run its recipe (each recipe's own datamodule,
budget and optimizer; the comparison's recipes are written alike), with its seed, its logs under
``--out/<method>/seed_<s>/`` and :class:`~signorm_lab.callbacks.RunRecordCallback`
added. Runs are interleaved, every method for one seed before the next seed, so that time
ratios compare runs made under the same load.

The table holds, per method: each metric (mean over seeds); its paired difference σN-Ens −
method with a t interval over seeds (the seed is the unit) and what it shows; the cost
(parameters; fit and test time as ratios to σN-Ens, median over seeds); and whether each run
learned: accuracy above the majority class and NLL below the class frequencies' NLL, for the
ensemble and for every member it reports, by :data:`LEARNED_MARGINS`.

A finished run (``results.csv`` and ``run_record.json`` in its folder) is reused when the
comparison runs again; one interrupted while training resumes from its ``interrupted.ckpt``;
one interrupted while testing after its fit (its record names the fit's best checkpoint, no
test has ended) is tested from that checkpoint into its own folder, not trained again.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..callbacks.run_record import RUN_RECORD_FILENAME
from ..safety.atomic_files import replaced_atomically
from ..safety.files import read_regular, read_yaml
from ..safety.run_lock import run_folder_lock
from .paired import mean_interval
from .runs import RESULTS_FILENAME, read_results
from .tables import format_table

__all__ = [
    "LEARNED_MARGINS",
    "METRICS",
    "Comparison",
    "MethodRuns",
    "command",
    "main",
    "read_comparison",
    "run_folder",
]

#: (results.csv key, column title, scale, digits, higher is better).
METRICS = (
    ("test/cls/Acc", "Acc (%)", 100, 1, True),
    ("test/cls/NLL", "NLL", 1, 3, False),
    ("test/cal/ECE", "ECE (%)", 100, 2, False),
    ("test/cls/Brier", "Brier", 1, 3, False),
    ("ood/AUROC", "OOD AUROC (%)", 100, 1, True),
)
#: A run has learned when its accuracy is this many points above the majority class's and its
#: NLL this many nats below the class frequencies' (for the ensemble and each member): closer
#: than that, its metrics describe an untrained model and say nothing about the method.
LEARNED_MARGINS = {"accuracy_points": 5.0, "nll_nats": 0.05}
STAND_IN_MARKER = "STAND_IN_DATA.txt"
CALLBACK = "signorm_lab.callbacks.RunRecordCallback"
#: Options the comparison sets on every run itself: given again, one of them would be dropped.
RESERVED_OPTIONS = ("--seed_everything", "--trainer.logger", "--ckpt_path")
_METHOD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: The members' diversity that the summary prints (results.csv key).
SIGNORM_COS = "test/div/signorm_cos"
_MEMBER_ACC = re.compile(r"test/member_(\d+)/Acc")


@dataclass(frozen=True)
class Comparison:
    """A comparison file, checked: recipes per method, seeds, the reference method, options."""

    path: Path
    methods: Mapping[str, Mapping[str, Any]]
    reference: str
    seeds: tuple[int, ...]
    args: tuple[str, ...] = ()


def _fail(where: str, message: str) -> ValueError:
    return ValueError(f"{where}: {message}")


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, f"expected a list of strings, got {value!r}.")
    if reserved := [v for v in value if v.startswith(RESERVED_OPTIONS)]:
        raise _fail(
            where,
            f"{reserved[0]!r} is set by signorm-compare for every run (the seed "
            f"from --seeds, the logger under --out, the resume checkpoint); "
            f"options starting with {', '.join(RESERVED_OPTIONS)} are refused.",
        )
    return tuple(value)


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(type(v) is int and v >= 0 for v in value)
        or len(set(value)) < len(value)
    ):
        raise _fail(where, f"expected a non-empty list of distinct integers >= 0, got {value!r}.")
    return tuple(value)


def read_comparison(path: str | Path) -> Comparison:
    """Read and check a comparison file; recipe paths are relative to the file.

    Raises:
        ValueError: Naming the key and the value that is wrong, and what would be valid.
    """
    path = Path(path)
    tree = read_yaml(path, "--config")
    if not isinstance(tree, Mapping):
        raise _fail(
            str(path),
            f"expected a mapping with 'methods', 'reference' and 'seeds', "
            f"got {type(tree).__name__}.",
        )
    if unknown := set(tree) - {"methods", "reference", "seeds", "args", "description"}:
        raise _fail(
            str(path),
            f"unknown key(s) {sorted(unknown)}; valid: methods, reference, "
            "seeds, args, description.",
        )
    methods = tree.get("methods")
    if not isinstance(methods, Mapping) or len(methods) < 2:
        raise _fail(
            f"{path}: methods",
            f"expected a mapping of at least two methods (name: recipe), got {methods!r}.",
        )
    checked: dict[str, dict[str, Any]] = {}
    for name, given in methods.items():
        where = f"{path}: methods.{name}"
        if not isinstance(name, str) or not _METHOD_NAME.fullmatch(name):
            raise _fail(where, "a method name is letters, digits, '_', '.' or '-'.")
        spec = {"recipe": given} if isinstance(given, str) else given
        if not isinstance(spec, Mapping) or not isinstance(spec.get("recipe"), str):
            raise _fail(
                where,
                f"expected a recipe path or {{recipe: PATH, label: TEXT, args: "
                f"[...]}}, got {spec!r}.",
            )
        if unknown := set(spec) - {"recipe", "label", "args"}:
            raise _fail(where, f"unknown key(s) {sorted(unknown)}; valid: recipe, label, args.")
        recipe = (path.parent / spec["recipe"]).resolve()
        if not recipe.is_file():
            raise _fail(
                where, f"recipe '{spec['recipe']}' is not a file (read relative to {path.parent})."
            )
        checked[name] = {
            "recipe": recipe,
            "label": str(spec.get("label", name)),
            "args": _strings(spec.get("args", []), f"{where}.args"),
        }
    reference = tree.get("reference")
    if reference not in checked:
        raise _fail(
            f"{path}: reference", f"{reference!r} is not one of the methods {list(checked)}."
        )
    return Comparison(
        path,
        checked,
        reference,
        _seeds(tree.get("seeds"), f"{path}: seeds"),
        _strings(tree.get("args", []), f"{path}: args"),
    )


@dataclass
class MethodRuns:
    """One method's finished runs: per seed, its metrics and run record."""

    label: str
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    folders: dict[int, Path] = field(default_factory=dict)
    stand_in: bool = False


def run_folder(out: Path, method: str, seed: int) -> Path:
    """Where a method's run at ``seed`` logs: ``<out>/<method>/seed_<seed>/version_<n>``."""
    return out / method / f"seed_{seed}"


def _versions(folder: Path) -> list[Path]:
    found = [p for p in folder.glob("version_*") if p.name[8:].isdigit() and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name[8:]))


def _finished(version: Path) -> bool:
    record = version / RUN_RECORD_FILENAME
    if not ((version / RESULTS_FILENAME).is_file() and record.is_file()):
        return False
    return (
        json.loads(read_regular(record, RUN_RECORD_FILENAME, 1 << 20)).get("test_seconds")
        is not None
    )


def _tested_checkpoint(version: Path) -> Path | None:
    """The checkpoint a test after the fit in ``version`` evaluates (its record's
    ``best_checkpoint``) when that fit finished and the file is in ``version``, else ``None``."""
    path = version / RUN_RECORD_FILENAME
    if not path.is_file():
        return None
    try:
        record = json.loads(read_regular(path, RUN_RECORD_FILENAME, 1 << 20))
    except (OSError, ValueError, RecursionError):
        return None  # not the record of a finished fit: trained again
    best = record.get("best_checkpoint") if isinstance(record, dict) else None
    if not isinstance(best, str) or not best:
        return None
    checkpoint = (version / best).resolve()
    inside = checkpoint.is_relative_to(version.resolve()) and checkpoint.is_file()
    return version / best if inside else None


def _command() -> list[str]:
    script = Path(sys.executable).with_name("torch-uncertainty")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "signorm_lab.cli"]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def train(
    comparison: Comparison,
    out: Path,
    methods: Sequence[str],
    seeds: Sequence[int],
    extra: Sequence[str] = (),
) -> None:
    """Run every method at every seed through the command (seed by seed), reusing finished
    runs and resuming interrupted ones: from the interruption checkpoint, or, for a run stopped
    while testing after its fit, by testing the fit's best checkpoint into the same folder.

    A run's folder is locked while it is checked and trained (:mod:`..safety.run_lock`): a
    process that reaches a run another is training waits for it, then reuses the finished run
    (or resumes it, if the other was interrupted), so that two processes given the same ``out``
    never train one run into one folder.

    Raises:
        RuntimeError: Naming the run and its folder when a run exits non-zero.
    """
    total, done = len(methods) * len(seeds), 0
    for seed in seeds:
        for method in methods:
            done += 1
            spec = comparison.methods[method]
            folder = run_folder(out, method, seed)
            step = f"[compare {done}/{total}]"
            run = f"{step} {spec['label']}, seed {seed}"

            def waiting(message: str, run: str = run) -> None:
                print(
                    f"{run}: {message}; waiting for it to end (reused if it finished)", flush=True
                )

            with run_folder_lock(folder, on_busy=waiting):
                _train_one(comparison, out, method, seed, extra, step)


def _train_one(
    comparison: Comparison, out: Path, method: str, seed: int, extra: Sequence[str], step: str
) -> None:
    """Reuse, resume, test or start one run; the caller holds its folder's lock.

    The last version is reused when finished; resumed from its ``interrupted.ckpt`` when it has
    one; tested when its fit finished but no test did (a stop during ``--eval_after_fit``):
    ``test`` of the checkpoint that test would have evaluated, logged into that version, so
    that its ``results.csv`` and ``run_record.json`` (the fit's fields kept) complete the run.
    Otherwise a new run is started.
    """
    spec, folder = comparison.methods[method], run_folder(out, method, seed)
    versions = _versions(folder)
    run = f"{step} {spec['label']}, seed {seed}"
    if versions and _finished(versions[-1]):
        print(f"{run}: finished earlier in {versions[-1]}, reused", flush=True)
        return
    subcommand, resume = "fit", []
    if versions and (ckpt := versions[-1] / "checkpoints" / "interrupted.ckpt").is_file():
        resume = [f"--ckpt_path={ckpt}"]
    elif versions and (best := _tested_checkpoint(versions[-1])) is not None:
        subcommand = "test"
        resume = [
            f"--ckpt_path={best}",
            f"--trainer.logger.init_args.version={versions[-1].name.removeprefix('version_')}",
        ]
        print(
            f"\n{run}: its fit finished in {versions[-1]} but its test did not; testing the "
            f"fit's best checkpoint {best.name} there instead of training again",
            flush=True,
        )
    argv = [
        *_command(),
        subcommand,
        "--config",
        str(spec["recipe"]),
        *spec["args"],
        *comparison.args,
        f"--seed_everything={seed}",
        f"--trainer.logger.init_args.save_dir={out / method}",
        f"--trainer.logger.init_args.name={folder.name}",
        f"--trainer.callbacks+={CALLBACK}",
        *resume,
        *extra,
    ]
    lead = "" if subcommand == "test" else "\n"  # the line above opens a tested run's output
    print(f"{lead}{run}: {' '.join(argv[len(_command()) :])}", flush=True)
    code = subprocess.run(argv, preexec_fn=_default_sigint, check=False).returncode
    if code != 0:
        raise RuntimeError(
            f"the {spec['label']} run at seed {seed} exited with code "
            f"{code}; its folder is {folder} (run the comparison again "
            "to resume it)."
        )


def collect(
    comparison: Comparison, out: Path, methods: Sequence[str], seeds: Sequence[int]
) -> dict[str, MethodRuns]:
    """Each method's finished runs under ``out``: the newest finished version of each seed.

    Raises:
        ValueError: Naming the method and seed whose run is missing or unfinished.
    """
    found: dict[str, MethodRuns] = {}
    for method in methods:
        runs = found[method] = MethodRuns(comparison.methods[method]["label"])
        for seed in seeds:
            finished = [v for v in _versions(run_folder(out, method, seed)) if _finished(v)]
            if not finished:
                raise ValueError(
                    f"{method} at seed {seed}: no finished run under "
                    f"{run_folder(out, method, seed)} (run without --tables-only)."
                )
            version = finished[-1]
            runs.folders[seed] = version
            runs.metrics[seed] = read_results(version / RESULTS_FILENAME)
            runs.records[seed] = json.loads(
                read_regular(version / RUN_RECORD_FILENAME, RUN_RECORD_FILENAME, 1 << 20)
            )
            runs.stand_in |= (version / STAND_IN_MARKER).exists()
    return found


def class_frequency_baseline(record: Mapping[str, Any]) -> tuple[float, float]:
    """Accuracy of always predicting the training batches' majority class, and the NLL of
    predicting their class frequencies, on the in-distribution test set of ``record``."""
    train = {int(k): v for k, v in record["train_class_counts"].items()}
    test = {int(k): v for k, v in record["test_class_counts"].items()}
    n_train, n_test = sum(train.values()), sum(test.values())
    if not n_train or not n_test:
        return math.nan, math.nan
    majority = max(train, key=lambda k: (train[k], -k))
    # A test class the training batches never showed gets half a count (no infinite NLL).
    nll = -sum(c * math.log(max(train.get(k, 0), 0.5) / n_train) for k, c in test.items())
    return test.get(majority, 0) / n_test, nll / n_test


def learned(metrics: Mapping[str, float], record: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a run (and each member it reports) learned, by :data:`LEARNED_MARGINS`, and
    the margins as text."""
    majority, prior_nll = class_frequency_baseline(record)
    accuracy, nll = metrics.get("test/cls/Acc", math.nan), metrics.get("test/cls/NLL", math.nan)
    members = [v for k, v in metrics.items() if _MEMBER_ACC.fullmatch(k)]
    worst = min(members) if members else math.nan
    above = 100 * (accuracy - majority)
    below = prior_nll - nll
    ok = above >= LEARNED_MARGINS["accuracy_points"] and below >= LEARNED_MARGINS["nll_nats"]
    text = f"acc {above:+.1f} points, NLL {-below:+.3f}"
    if members:
        worst_above = 100 * (worst - majority)
        ok = ok and worst_above >= LEARNED_MARGINS["accuracy_points"]
        text += f", worst member's acc {worst_above:+.1f} points"
    return bool(ok), text


def _present(runs: Mapping[str, MethodRuns]) -> list[tuple[str, str, int, int, bool]]:
    """The metrics every run of every method holds (OOD only where all runs have it)."""
    return [
        m for m in METRICS if all(m[0] in row for r in runs.values() for row in r.metrics.values())
    ]


def _cell(value: float, scale: float, digits: int, sign: bool = False) -> str:
    if math.isnan(value):
        return "-"
    return f"{value * scale:{'+' if sign else ''}.{digits}f}"


def _verdict(stats: Mapping[str, float], higher_better: bool) -> str:
    mean, low, high = stats["mean"], stats["low"], stats["high"]
    if stats["n"] < 2:
        if mean == 0:
            return "equal (1 seed)"
        better = (mean > 0) == higher_better
        return "σN-Ens better on this seed" if better else "σN-Ens WORSE on this seed"
    if low > 0 or high < 0:
        better = (low > 0) == higher_better
        return "σN-Ens better" if better else "σN-Ens WORSE"
    return "no difference shown"


def tables(comparison: Comparison, runs: Mapping[str, MethodRuns], seeds: Sequence[int]) -> str:
    """The comparison's tables as aligned text (see the module docstring)."""
    metrics = _present(runs)
    ref = runs[comparison.reference]
    lines = []
    stand_in = [r.label for r in runs.values() if r.stand_in]
    if stand_in:
        lines.append(
            f"STAND-IN DATA (random pixels) in the runs of {', '.join(stand_in)}: these "
            "rows test the tooling and say nothing about the methods.\n"
        )
    body = []
    for r in runs.values():
        cells = []
        for key, _, scale, digits, _ in metrics:
            stats = mean_interval([r.metrics[s][key] for s in seeds])
            spread = "" if stats["n"] < 2 else f" ± {_cell(_sd(r, key, seeds), scale, digits)}"
            cells.append(_cell(stats["mean"], scale, digits) + spread)
        body.append([r.label, *cells])
    lines.append(f"Test metrics, mean ± sd over seeds {list(seeds)}:")
    lines.append(format_table(["Method", *(m[1] for m in metrics)], body))
    lines.extend(_member_diversity(runs, seeds))
    body = []
    for name, r in runs.items():
        if name == comparison.reference:
            continue
        for key, title, scale, digits, higher in metrics:
            stats = mean_interval([ref.metrics[s][key] - r.metrics[s][key] for s in seeds])
            interval = (
                "(1 seed)"
                if stats["n"] < 2
                else f"[{_cell(stats['low'], scale, digits, True)}, "
                f"{_cell(stats['high'], scale, digits, True)}]"
            )
            body.append(
                [
                    r.label,
                    title,
                    _cell(stats["mean"], scale, digits, True),
                    interval,
                    _verdict(stats, higher),
                ]
            )
    lines.append(
        f"\nPaired by seed, {ref.label} − method, with its 95 % t interval over seeds "
        "('no difference shown' is not 'level'):"
    )
    lines.append(
        format_table(
            ["Method", "Metric", f"{ref.label} − method", "Interval", "Shows"], body, align="llrrl"
        )
    )
    body = []
    for r in runs.values():
        ratio = {
            key: _median(
                [r.records[s][key] / ref.records[s][key] for s in seeds if ref.records[s][key]]
            )
            for key in ("fit_seconds", "test_seconds")
        }
        record = r.records[seeds[0]]
        body.append(
            [
                r.label,
                f"{record['params_total'] / 1e6:.3f}",
                f"{record['params_trainable'] / 1e6:.3f}",
                f"{record['optimizer_steps']}",
                f"{ratio['fit_seconds']:.2f}×",
                f"{ratio['test_seconds']:.2f}×",
            ]
        )
    lines.append(
        f"\nCost (times as ratios to {ref.label}, median over seeds, measured in this comparison):"
    )
    lines.append(
        format_table(
            ["Method", "Params (M)", "Trained (M)", "Steps", "Fit time", "Test time"], body
        )
    )
    body, failed = [], []
    for r in runs.values():
        for s in seeds:
            ok, text = learned(r.metrics[s], r.records[s])
            majority, prior = class_frequency_baseline(r.records[s])
            tested = r.records[s].get("tested_step")
            body.append(
                [
                    r.label,
                    str(s),
                    "yes" if ok else "NO",
                    text,
                    f"{100 * majority:.1f}",
                    f"{prior:.3f}",
                    "-" if tested is None else f"{tested} of {r.records[s]['optimizer_steps']}",
                ]
            )
            if not ok:
                failed.append(f"{r.label} seed {s}")
    lines.append(
        f"\nDid every run learn? (accuracy >= {LEARNED_MARGINS['accuracy_points']:g} "
        f"points above the majority class and NLL >= {LEARNED_MARGINS['nll_nats']:g} "
        "nats below the class frequencies', ensemble and every member):"
    )
    lines.append(
        format_table(
            [
                "Method",
                "Seed",
                "Learned",
                "Run − class frequencies",
                "Majority acc (%)",
                "Prior NLL",
                "Tested step",
            ],
            body,
            align="lrllrrr",
        )
    )
    if failed:
        lines.append(
            f"NOT LEARNED: {', '.join(failed)}. Their metrics describe an untrained "
            "model; raise the budget before reading the tables above."
        )
    return "\n".join(lines) + "\n"


def _member_diversity(runs: Mapping[str, MethodRuns], seeds: Sequence[int]) -> list[str]:
    """A line per method whose runs report σNorm-cos: the members' mean pairwise cosine of
    feature importances, per seed (1: the members are one model)."""
    lines = []
    for r in runs.values():
        values = [r.metrics[s].get(SIGNORM_COS) for s in seeds]
        if any(v is None for v in values):
            continue
        per_seed = ", ".join(f"{v:.3f}" for v in values)
        lines.append(
            f"{r.label}'s members, σNorm-cos (1 = one model; lower = further apart), per seed: "
            f"{per_seed}"
        )
    return lines


def _sd(r: MethodRuns, key: str, seeds: Sequence[int]) -> float:
    values = [r.metrics[s][key] for s in seeds]
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def runs_csv(runs: Mapping[str, MethodRuns], seeds: Sequence[int], out: Path) -> str:
    """One row per run: method, seed, folder (relative to ``out``), metrics, cost and the
    learned check."""
    keys = [m[0] for m in METRICS]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "method",
            "seed",
            "folder",
            *keys,
            "params_total",
            "params_trainable",
            "optimizer_steps",
            "fit_seconds",
            "test_seconds",
            "learned",
            "stand_in",
        ]
    )
    for name, r in runs.items():
        for s in seeds:
            record = r.records[s]
            folder = r.folders[s]
            folder = folder.relative_to(out) if folder.is_relative_to(out) else folder
            writer.writerow(
                [
                    name,
                    s,
                    folder,
                    *(r.metrics[s].get(k, "") for k in keys),
                    record["params_total"],
                    record["params_trainable"],
                    record["optimizer_steps"],
                    record["fit_seconds"],
                    record["test_seconds"],
                    learned(r.metrics[s], record)[0],
                    r.stand_in,
                ]
            )
    return buffer.getvalue()


def _write(path: Path, text: str) -> None:
    with replaced_atomically(path) as partial:
        partial.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="signorm-compare",
        description="Train σN-Ens and the methods a user would pick instead through the "
        "torch-uncertainty command (same data, budget and seeds), then print one table: "
        "metrics, paired differences to σN-Ens over seeds, cost ratios, and whether each run "
        "learned. Options after '--' go to every run.",
    )
    parser.add_argument(
        "--config", required=True, help="a comparison file, e.g. experiments/compare/digits.yaml"
    )
    parser.add_argument(
        "--methods", nargs="+", help="only these methods (the reference is always included)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, help="these seeds instead of the file's")
    parser.add_argument("--out", help="the logs tree (default logs/compare/<file name>)")
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="train nothing; tabulate the finished runs under --out",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    try:
        _strings(extra, "options after '--'")
        comparison = read_comparison(args.config)
        methods = (
            list(comparison.methods)
            if not args.methods
            else [comparison.reference, *(m for m in args.methods if m != comparison.reference)]
        )
        if unknown := [m for m in methods if m not in comparison.methods]:
            raise ValueError(
                f"--methods: {unknown} not in {args.config}; valid: {list(comparison.methods)}."
            )
        seeds = tuple(args.seeds) if args.seeds else comparison.seeds
        _seeds(list(seeds), "--seeds")
    except (ValueError, FileNotFoundError) as error:
        parser.exit(2, f"signorm-compare: error: {error}\n")
    out = Path(args.out or Path("logs/compare") / Path(args.config).stem)
    if not args.tables_only:
        try:
            train(comparison, out, methods, seeds, extra)
        except RuntimeError as error:
            parser.exit(1, f"signorm-compare: error: {error}\n")
        except KeyboardInterrupt:
            parser.exit(
                130,
                f"signorm-compare: interrupted; the finished runs under {out} are "
                "kept, and running the same command again resumes the rest.\n",
            )
    try:
        runs = collect(comparison, out, methods, seeds)
    except ValueError as error:
        parser.exit(1, f"signorm-compare: error: {error}\n")
    text = tables(comparison, runs, seeds)
    print(
        f"\n{Path(args.config).name}: {len(seeds)} seed(s), {len(methods)} methods, runs "
        f"under {out}\n"
    )
    print(text, end="")
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "comparison.txt", text)
    _write(out / "comparison_runs.csv", runs_csv(runs, seeds, out))
    print(f"\nWritten: {out / 'comparison.txt'}, {out / 'comparison_runs.csv'}")
    return 0


def command() -> None:
    """The ``signorm-compare`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    command()
