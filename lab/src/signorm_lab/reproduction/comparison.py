"""``signorm-compare``: σN-Ens against the methods a user would pick instead, in one table.

A comparison file (``experiments/compare/*.yaml``) names one recipe per method, the seeds and
the method the others are compared with (σN-Ens). Every run goes through the
``torch-uncertainty`` command as a user would run its recipe (each recipe's own datamodule,
budget and optimizer; the comparison's recipes are written alike), with its seed, its logs under
``--out/<method>/seed_<s>/`` and :class:`~signorm_lab.callbacks.RunRecordCallback`
added (and :class:`~signorm_lab.callbacks.TestPredictionWriter`, for the figure). Runs are
interleaved, every method for one seed before the next seed, so that time ratios compare runs
made under the same load.

The tables (:mod:`.comparison_report`) hold, per method, each metric, its paired difference
σN-Ens − method with a t interval over seeds, the cost as σN-Ens's multiple and whether each run
learned; ``comparison.png`` and ``.svg`` (:mod:`.comparison_figure`) draw them. Both are written
from the finished runs, so ``--tables-only`` redraws a stored comparison.

A finished run (``results.csv`` and ``run_record.json`` in its folder) is reused when the
comparison runs again; one interrupted while training resumes from its ``interrupted.ckpt``;
one interrupted while testing after its fit (its record names the fit's best checkpoint, no
test has ended) is tested from that checkpoint into its own folder, not trained again.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..safety.atomic_files import replaced_atomically
from ..safety.files import read_regular, read_yaml
from ..safety.run_lock import run_folder_lock
from .comparison_figure import write_figure
from .comparison_report import (
    LEARNED_MARGINS,
    METRICS,
    SIGNORM_COS,
    MethodRuns,
    class_frequency_baseline,
    learned,
    plan,
    runs_csv,
    tables,
)
from .runs import RESULTS_FILENAME, RUN_RECORD_FILENAME, read_results

__all__ = [
    "LEARNED_MARGINS",
    "METRICS",
    "SIGNORM_COS",
    "Comparison",
    "MethodRuns",
    "class_frequency_baseline",
    "command",
    "learned",
    "main",
    "read_comparison",
    "run_folder",
    "runs_csv",
    "tables",
]

STAND_IN_MARKER = "STAND_IN_DATA.txt"
CALLBACK = "signorm_lab.callbacks.RunRecordCallback"
#: Each run's test predictions, from which the figure draws its reliability diagram.
PREDICTIONS = "signorm_lab.callbacks.TestPredictionWriter"
#: Options the comparison sets on every run itself: given again, one of them would be dropped.
RESERVED_OPTIONS = ("--seed_everything", "--trainer.logger", "--ckpt_path")
_METHOD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Comparison:
    """A comparison file, checked: recipes per method, seeds, the reference method, options."""

    path: Path
    methods: Mapping[str, Mapping[str, Any]]
    reference: str
    seeds: tuple[int, ...]
    args: tuple[str, ...] = ()
    see: str = ""  # where a difference was found, said when the members stay one model


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
    if unknown := set(tree) - {"methods", "reference", "seeds", "args", "description", "see"}:
        raise _fail(
            str(path),
            f"unknown key(s) {sorted(unknown)}; valid: methods, reference, "
            "seeds, args, description, see.",
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
        str(tree.get("see", "")),
    )


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
        f"--trainer.callbacks+={PREDICTIONS}",
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
    print(plan(comparison, methods, seeds, out), flush=True)
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
    figures = write_figure(comparison, runs, seeds, out)
    print(f"\nWritten: {out / 'comparison.txt'}, {out / 'comparison_runs.csv'}, {figures}")
    return 0


def command() -> None:
    """The ``signorm-compare`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    command()
