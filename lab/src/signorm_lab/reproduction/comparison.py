"""``signorm-compare``: σN-Ens against the methods a user would pick instead, in one table.

A comparison file (``experiments/compare/*.yaml``, read by :mod:`.comparison_file`) names one
recipe per method, the seeds and the method the others are compared with (σN-Ens). Every run
goes through the ``torch-uncertainty`` command as a user would run its recipe (each recipe's
own datamodule, budget and optimizer; the comparison's recipes are written alike), with its
seed, its logs under ``--out/<method>/seed_<s>/``, and
:class:`~signorm_lab.callbacks.RunRecordCallback` and
:class:`~signorm_lab.callbacks.TestPredictionWriter` (for the figure) added. Runs are
interleaved, every method for one seed before the next seed, so that time ratios compare runs
made under the same load.

The tables (:mod:`.comparison_report`) hold, per method, each metric, its paired difference
σN-Ens − method with a t interval over seeds, the cost as σN-Ens's multiple and whether each run
learned; ``comparison.png`` and ``.svg`` (:mod:`.comparison_figure`) draw them. Both are written
from the finished runs, so ``--tables-only`` redraws a stored comparison.

A run is reused only when it is the run asked for. Each run records its *request* (its seed,
its options, the sha256 of every file it reads as configuration, the environment variables its
parse reads, :func:`request`), the seed it was seeded
with and the package versions (:mod:`~signorm_lab.callbacks.run_record`). On a rerun, the newest
finished version whose record matches this invocation's request is reused; one interrupted
while training resumes from its ``interrupted.ckpt``, and one interrupted while testing after its
fit is tested from the fit's best checkpoint into its own folder, each only when its record
matches. A run whose record differs (a recipe edited, other options, other package versions) is
trained again into a new version, the first difference printed: a change of settings is the
user's, the old version is kept (and reused again if the settings come back), and refusing would
make every edit a manual clean-up. What is no change of settings is refused in one line: a run
whose saved seed is not its folder's (a copied folder), a best checkpoint that is not the one its
fit saved (a link or a copy of another run's), an unreadable record, metrics out of range.

The comparison owns what it starts: each run is a child in a process group of its own, which
the comparison stops on SIGINT, SIGTERM or SIGHUP (SIGTERM), waiting for it to write its
``interrupted.ckpt``; on Linux the child is also sent SIGTERM when the comparison dies, however
it dies (``PR_SET_PDEATHSIG``). The run's folder lock is handed to the child, so a rerun waits
for a run still training, even past its comparison's death.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..cli.recipe_bases import (
    CONFIG_OPTIONS,
    NESTED_FILE_SUFFIXES,
    RecipeBaseError,
    recipe_chain,
)
from ..evaluation.results_csv import check_test_rows
from ..safety.atomic_files import replaced_atomically
from ..safety.files import read_yaml
from ..safety.run_lock import run_folder_lock
from .comparison_figure import FIGURE_FILES, draw_comparison, save_figure
from .comparison_file import (
    Comparison,
    check_options,
    check_seeds,
    read_comparison,
)
from .comparison_report import (
    LEARNED_MARGINS,
    MEMBER_ACC,
    METRICS,
    SIGNORM_COS,
    MethodRuns,
    class_frequency_baseline,
    learned,
    plan,
    runs_csv,
    tables,
)
from .runs import (
    REQUEST_ENV,
    RESULTS_FILENAME,
    RUN_RECORD_FILENAME,
    check_metrics,
    file_sha256,
    package_versions,
    read_results,
    read_run_record,
)

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
    "request",
    "run_folder",
    "runs_csv",
    "tables",
]

STAND_IN_MARKER = "STAND_IN_DATA.txt"
CALLBACK = "signorm_lab.callbacks.RunRecordCallback"
#: Environment variables that change what a run parses or how it runs, by prefix.
DECIDING_ENVIRONMENT = ("PL_", "JSONARGPARSE_")
#: The variables Lightning's ``seed_everything`` sets in the process it seeds (the seed is in the
#: request already).
SEEDING_ENVIRONMENT = ("PL_GLOBAL_SEED", "PL_SEED_WORKERS")
#: The logger of every run, whatever its recipe's (MLflow's included): the comparison reads the
#: runs' folders, ``<out>/<method>/seed_<s>/version_<n>``, which this logger lays out.
LOGGER = "lightning.pytorch.loggers.TensorBoardLogger"
#: Each run's test predictions, from which the figure draws its reliability diagram.
PREDICTIONS = "signorm_lab.callbacks.TestPredictionWriter"
_VERSION = re.compile(r"version_([0-9]+)", re.ASCII)
#: Options that change neither the weights a run trains nor what its test measures: left out of
#: its request, so that a rerun giving them or not asks for the same run.
UNDECIDING_OPTIONS = (
    "--eval_after_fit",
    "--trainer.enable_progress_bar",
    "--trainer.enable_model_summary",
)


def run_folder(out: Path, method: str, seed: int) -> Path:
    """Where a method's run at ``seed`` logs: ``<out>/<method>/seed_<seed>/version_<n>``."""
    return out / method / f"seed_{seed}"


def _versions(folder: Path) -> list[Path]:
    """The ``version_<n>`` folders of a run's folder, oldest first (``n`` in ASCII digits)."""
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder}: is a file, not a run folder; move it away and run again.")
    found = [p for p in folder.glob("version_*") if _VERSION.fullmatch(p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name[8:]))


def _record(version: Path) -> dict[str, Any] | None:
    """The run record of ``version``, ``None`` when it has none (refused in one line when it
    cannot be read)."""
    path = version / RUN_RECORD_FILENAME
    return read_run_record(path) if path.exists() or path.is_symlink() else None


def _finished(version: Path, record: Mapping[str, Any] | None = None) -> bool:
    """Whether ``version`` holds a run whose test ended (its results and its ``record``, read
    when not given)."""
    record = _record(version) if record is None else record
    return (
        record is not None
        and record.get("test_seconds") is not None
        and (version / RESULTS_FILENAME).is_file()
    )


def _check_seed(version: Path, seed: int, record: Mapping[str, Any] | None) -> None:
    """Refuse a run whose saved seed (its record's, its request's, its ``config.yaml``'s) is
    not its folder's, a copy of another seed's run being no run at this seed, and a
    ``config.yaml`` that is not the one the run saved (its record's ``config_sha256``)."""
    asked = record.get("request") if record else None
    saved = [
        record.get("seed") if record else None,
        asked.get("seed") if isinstance(asked, Mapping) else None,
    ]
    config = version / "config.yaml"
    expected = record.get("config_sha256") if record else None
    if isinstance(expected, str) and config.is_file() and file_sha256(config) != expected:
        raise ValueError(
            f"{config}: not the configuration this run saved (its sha256 is not the one "
            f"{RUN_RECORD_FILENAME} holds: edited after the run); move {version} away and run "
            "again to train the run anew."
        )
    if config.is_file():
        tree = read_yaml(config, "config.yaml")
        saved.append(tree.get("seed_everything") if isinstance(tree, Mapping) else None)
    if wrong := [s for s in saved if s is not None and s != seed]:
        raise ValueError(
            f"{version}: its run was seeded with {wrong[0]!r} but lies in seed_{seed} (a copy of "
            "another seed's run?); move it away and run again to train this seed."
        )


def _tested_checkpoint(version: Path, record: Mapping[str, Any]) -> Path | None:
    """The checkpoint a test after the fit in ``version`` evaluates (its record's
    ``best_checkpoint``) when that fit finished and the file is there, else ``None``.

    Raises:
        ValueError: When the file is a link or not the checkpoint the fit saved (its sha256 is
            not the record's ``best_checkpoint_sha256``): a link to, or copy of, another run's.
    """
    best = record.get("best_checkpoint")
    if not isinstance(best, str) or not best:
        return None
    checkpoint = version / best
    if not (checkpoint.is_file() or checkpoint.is_symlink()):
        return None  # removed: trained again
    inside = checkpoint.resolve().is_relative_to(version.resolve())
    if (
        checkpoint.is_symlink()
        or not inside
        or (file_sha256(checkpoint) != record.get("best_checkpoint_sha256"))
    ):
        raise ValueError(
            f"{checkpoint}: not the checkpoint this run's fit saved (a link, a copy or another "
            f"file: its sha256 is not the one {RUN_RECORD_FILENAME} holds); move {version} away "
            "and run again to train the run anew."
        )
    return checkpoint


def _nested_files(tree: Any, folder: Path) -> list[Path]:
    """The configuration files a recipe's values name (jsonargparse reads a value ending in
    ``.yaml``, ``.yml`` or ``.json`` as a file, relative to the recipe's folder)."""
    if isinstance(tree, Mapping):
        return [f for value in tree.values() for f in _nested_files(value, folder)]
    if isinstance(tree, list):
        return [f for value in tree for f in _nested_files(value, folder)]
    if isinstance(tree, str) and tree.endswith(NESTED_FILE_SUFFIXES):
        path = Path(tree) if Path(tree).is_absolute() else folder / tree
        return [path] if path.is_file() else []
    return []


def _option_files(options: Sequence[str]) -> list[Path]:
    """The files the options name: each ``--config`` file, and every option value that is a
    file (``--trainer=t.yaml``, ``--data t.yaml``: jsonargparse reads them)."""
    files = []
    for index, arg in enumerate(options):
        if arg.startswith("-") and "=" in arg:
            value = arg.partition("=")[2]
        elif arg in CONFIG_OPTIONS and index + 1 < len(options):
            value = options[index + 1]
        elif not arg.startswith("-") and index and options[index - 1].startswith("-"):
            value = arg
        else:
            continue
        try:
            if value and Path(value).is_file():
                files.append(Path(value))
        except (OSError, ValueError):  # a YAML string
            continue
    return list(dict.fromkeys(files))  # `--config f` is read once


def _environment() -> list[list[str]]:
    """The environment variables that change what a run parses (jsonargparse reads ``PL_*``
    options when ``JSONARGPARSE_DEFAULT_ENV`` is set), the comparison's own left out."""
    return sorted(
        [name, value]
        for name, value in os.environ.items()
        if name.startswith(DECIDING_ENVIRONMENT) and name not in (REQUEST_ENV, *SEEDING_ENVIRONMENT)
    )


def request(
    comparison: Comparison, method: str, seed: int, extra: Sequence[str] = ()
) -> dict[str, Any]:
    """What decides ``method``'s run at ``seed``: the seed, the options (those of
    :data:`UNDECIDING_OPTIONS` left out), the environment variables that change its parse, and
    the sha256 of every file it reads as configuration (its recipe, their base files and the
    files their values name; the files the options name), by name."""
    spec = comparison.methods[method]
    options = [*spec["args"], *comparison.args, *extra]
    deciding, skip = [], False
    for arg in options:
        if skip and not arg.startswith("-"):
            skip = False  # the value of an undeciding option
        elif arg.startswith(tuple(f"{o}=" for o in UNDECIDING_OPTIONS)):
            skip = False
        elif arg in UNDECIDING_OPTIONS:
            skip = True
        else:
            skip = False
            deciding.append(arg)
    recipes = []
    for file in [Path(spec["recipe"]), *_option_files(options)]:
        try:
            chain = recipe_chain(file) if file.suffix in (".yaml", ".yml") else [(file, {})]
        except RecipeBaseError:
            chain = [(file, {})]  # the run refuses it
        for path, tree in chain:
            recipes.append([path.name, file_sha256(path)])
            folder = path.resolve().parent
            recipes.extend([f.name, file_sha256(f)] for f in _nested_files(tree, folder))
    return {"seed": seed, "options": deciding, "recipes": recipes, "environment": _environment()}


def _difference(record: Mapping[str, Any], asked: Mapping[str, Any]) -> str | None:
    """The first way the run of ``record`` differs from the request ``asked``, in words, else
    ``None``."""
    ran = record.get("request")
    if not isinstance(ran, Mapping):
        return "its record holds no request (a run from before requests were recorded)"
    provenance = record.get("provenance")
    versions = provenance.get("versions") if isinstance(provenance, Mapping) else None
    if isinstance(versions, Mapping):
        for name, now in package_versions().items():
            if versions.get(name) != now:
                return f"{name} {versions.get(name)} then, {now} now"
    then, now = list(ran.get("recipes") or []), list(asked["recipes"])
    for index in range(max(len(then), len(now))):
        old = then[index] if index < len(then) else None
        new = now[index] if index < len(now) else None
        if old != new:
            if old and new and old[1] == new[1]:
                return f"recipe file {old[0]} then, {new[0]} now (the same contents, renamed)"
            name = (new or old)[0]
            return (
                f"recipe file {name} changed (sha256 {old[1][:12] if old else 'none'} then, "
                f"{new[1][:12] if new else 'none'} now)"
            )
    try:
        then_env = dict(ran.get("environment") or [])
    except (TypeError, ValueError):
        return "its record's environment is not the list of pairs a run records"
    now_env = dict(asked["environment"])
    for name in sorted(set(then_env) | set(now_env)):
        if then_env.get(name) != now_env.get(name):
            return (
                f"environment variable {name}: {then_env.get(name)!r} then, "
                f"{now_env.get(name)!r} now"
            )
    then, now = list(ran.get("options") or []), list(asked["options"])
    for index in range(max(len(then), len(now))):
        old = then[index] if index < len(then) else "(none)"
        new = now[index] if index < len(now) else "(none)"
        if old != new:
            return f"option {index + 1}: {old} then, {new} now"
    return None


def _command() -> list[str]:
    script = Path(sys.executable).with_name("torch-uncertainty")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "signorm_lab.cli"]


class Stopped(Exception):
    """The comparison was stopped by ``signum`` while a run trained; the run was stopped too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that stop the comparison and its run, and the signal the run is sent for each.
_STOPS = {
    signal.SIGINT: signal.SIGINT,
    signal.SIGTERM: signal.SIGTERM,
    **({signal.SIGHUP: signal.SIGTERM} if hasattr(signal, "SIGHUP") else {}),
}
_PR_SET_PDEATHSIG = 1


def _prctl() -> Any:
    """Linux's ``prctl``, loaded before any fork, or ``None`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _owned_by(parent: int) -> Any:
    """What a run's process does before its command starts: SIGINT to its default action, a
    process group of its own (a terminal's Ctrl-C reaches it once, through the comparison), and
    on Linux SIGTERM when ``parent`` dies (sent at once if it has died already)."""
    prctl = _prctl()

    def setup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setpgid(0, 0)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)

    return setup


def _run(argv: Sequence[str], lock: int, asked: Mapping[str, Any]) -> int:
    """Run ``argv`` as a child the comparison owns (see the module docstring), handing it the
    run folder's ``lock`` and the request it records; its exit code.

    Raises:
        Stopped: When a signal of :data:`_STOPS` stopped the comparison (and the child).
    """
    env = {**os.environ, REQUEST_ENV: json.dumps(dict(asked))}
    stops: list[int] = []
    child: subprocess.Popen | None = None

    def stop(signum: int, frame: Any) -> None:
        stops.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(_STOPS[signum])

    previous = {signum: signal.signal(signum, stop) for signum in _STOPS}
    try:
        posix = os.name == "posix"
        child = subprocess.Popen(
            list(argv),
            env=env,
            pass_fds=(lock,) if posix else (),
            # The comparison runs no thread of its own while it starts a run.
            preexec_fn=_owned_by(os.getpid()) if posix else None,  # noqa: PLW1509
        )
        if stops:  # a signal before the child was known
            child.send_signal(_STOPS[stops[0]])
        code = child.wait()
    finally:
        if child is not None and child.poll() is None:  # an error of the comparison's own
            child.terminate()
            child.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if stops:
        raise Stopped(stops[0])
    return code


def _recipe_logger(recipe: Path) -> str | None:
    """The logger class a recipe names (the last of its files to name one), else ``None``."""
    try:
        chain = recipe_chain(recipe)
    except RecipeBaseError:
        return None  # the run refuses it
    named = None
    for _, tree in chain:
        trainer = tree.get("trainer")
        logger = trainer.get("logger") if isinstance(trainer, Mapping) else None
        if isinstance(logger, Mapping) and isinstance(logger.get("class_path"), str):
            named = logger["class_path"]
    return named


def train(
    comparison: Comparison,
    out: Path,
    methods: Sequence[str],
    seeds: Sequence[int],
    extra: Sequence[str] = (),
) -> None:
    """Run every method at every seed through the command (seed by seed), reusing finished
    runs of the same request and resuming interrupted ones: from the interruption checkpoint,
    or, for a run stopped while testing after its fit, by testing the fit's best checkpoint
    into the same folder.

    A run's folder is locked while it is checked and trained (:mod:`..safety.run_lock`), by the
    comparison and by the run's process: a process that reaches a run another is training waits
    for it, then reuses the finished run (or resumes it, if the other was interrupted), so that
    two processes given the same ``out`` never train one run into one folder.

    Raises:
        RuntimeError: Naming the run and its folder when a run exits non-zero.
        ValueError: In one line, naming a run folder or file that cannot be a run.
        Stopped: See :func:`_run`.
    """
    for method in methods:
        named = _recipe_logger(Path(comparison.methods[method]["recipe"]))
        if named not in (None, LOGGER):
            print(
                f"{comparison.methods[method]['label']}: its recipe logs with {named}; the "
                f"comparison logs its runs with {LOGGER} under {out}, the folders it reads",
                flush=True,
            )
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

            with run_folder_lock(folder, on_busy=waiting) as lock:
                _train_one(comparison, out, method, seed, extra, step, lock)


def _matching(
    versions: Sequence[Path], seed: int, asked: Mapping[str, Any]
) -> tuple[Path | None, dict[Path, Any]]:
    """The newest finished version whose record matches ``asked`` (``None`` if none), and
    each version's record; a version whose saved seed is not ``seed`` is refused."""
    records = {version: _record(version) for version in versions}
    for version in versions:
        _check_seed(version, seed, records[version])
    finished = [
        v
        for v in reversed(versions)
        if _finished(v, records[v]) and _difference(records[v], asked) is None
    ]
    return (finished[0] if finished else None), records


def _train_one(
    comparison: Comparison,
    out: Path,
    method: str,
    seed: int,
    extra: Sequence[str],
    step: str,
    lock: int = -1,
) -> None:
    """Reuse, resume, test or start one run; the caller holds its folder's ``lock``.

    The newest finished version of this request is reused. The last version, when its record
    matches the request, is resumed from its ``interrupted.ckpt`` when it has one, or tested
    when its fit finished but no test did (a stop during ``--eval_after_fit``): ``test`` of the
    checkpoint that test would have evaluated, logged into that version, so that its
    ``results.csv`` and ``run_record.json`` (the fit's fields kept) complete the run. Otherwise
    a new run is started, in a new version.
    """
    spec, folder = comparison.methods[method], run_folder(out, method, seed)
    versions = _versions(folder)
    run = f"{step} {spec['label']}, seed {seed}"
    asked = request(comparison, method, seed, extra)
    reused, records = _matching(versions, seed, asked)
    if reused is not None:
        print(f"{run}: finished earlier in {reused}, reused", flush=True)
        return
    subcommand, resume, last = "fit", [], versions[-1] if versions else None
    difference = None
    if last is not None and records[last] is not None:
        difference = _difference(records[last], asked)
    if last is not None and records[last] is None and (last / "checkpoints").is_dir():
        difference = "it holds no run_record.json, so what it was asked is unknown"
    if last is not None and difference is not None:
        print(
            f"\n{run}: {last} was run with other settings ({difference}); training it anew "
            "in a new version",
            flush=True,
        )
    elif last is not None and records[last] is not None:
        if (ckpt := last / "checkpoints" / "interrupted.ckpt").is_file():
            resume = [f"--ckpt_path={ckpt}"]
        elif (best := _tested_checkpoint(last, records[last])) is not None:
            subcommand = "test"
            resume = [
                f"--ckpt_path={best}",
                f"--trainer.logger.init_args.version={last.name.removeprefix('version_')}",
            ]
            print(
                f"\n{run}: its fit finished in {last} but its test did not; testing the "
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
        *extra,
        # The comparison's own options last: a --config among the options cannot override them.
        f"--seed_everything={seed}",
        f"--trainer.logger={LOGGER}",
        f"--trainer.logger.init_args.save_dir={out / method}",
        f"--trainer.logger.init_args.name={folder.name}",
        f"--trainer.callbacks+={CALLBACK}",
        f"--trainer.callbacks+={PREDICTIONS}",
        *resume,
    ]
    lead = "" if subcommand == "test" else "\n"  # the line above opens a tested run's output
    print(f"{lead}{run}: {' '.join(argv[len(_command()) :])}", flush=True)
    code = _run(argv, lock, asked)
    if code != 0 and subcommand == "test":
        raise RuntimeError(
            f"testing {resume[0].partition('=')[2]} (the {spec['label']} run at seed {seed}) "
            f"exited with code {code}: if it is no checkpoint, move {last} away and run the "
            "comparison again to train the run anew."
        )
    if code != 0:
        raise RuntimeError(
            f"the {spec['label']} run at seed {seed} exited with code "
            f"{code}; its folder is {folder} (run the comparison again "
            "to resume it)."
        )


def collect(
    comparison: Comparison,
    out: Path,
    methods: Sequence[str],
    seeds: Sequence[int],
    extra: Sequence[str] = (),
) -> dict[str, MethodRuns]:
    """Each method's finished runs under ``out``: per seed, the newest finished version of the
    request (:func:`request`, with the options ``extra``).

    Raises:
        ValueError: Naming the method and seed whose run is missing, unfinished or of another
            request (with the first difference), or a file of a run that is not one.
    """
    tabulated = [m[0] for m in METRICS] + [SIGNORM_COS]
    found: dict[str, MethodRuns] = {}
    for method in methods:
        runs = found[method] = MethodRuns(comparison.methods[method]["label"])
        for seed in seeds:
            folder = run_folder(out, method, seed)
            asked = request(comparison, method, seed, extra)
            versions = _versions(folder)
            version, records = _matching(versions, seed, asked)
            if version is None:
                other = [v for v in reversed(versions) if _finished(v, records[v])]
                why = (
                    f"the finished run in {other[0]} differs from this request "
                    f"({_difference(records[other[0]], asked)}); give the same options, or run "
                    "without --tables-only to train it anew."
                    if other
                    else f"no finished run under {folder} (run without --tables-only)."
                )
                raise ValueError(f"{method} at seed {seed}: {why}")
            runs.folders[seed] = version
            check_test_rows(version / RESULTS_FILENAME)  # rows only its tests wrote
            metrics = runs.metrics[seed] = read_results(version / RESULTS_FILENAME)
            members = [k for k in metrics if MEMBER_ACC.fullmatch(k)]
            check_metrics(metrics, [*tabulated, *members], version / RESULTS_FILENAME)
            runs.records[seed] = read_run_record(version / RUN_RECORD_FILENAME, finished=True)
            runs.stand_in |= (version / STAND_IN_MARKER).exists()
    return found


#: The tables a comparison writes into ``--out`` (beside its figure, :data:`FIGURE_FILES`).
TABLE_FILES = ("comparison.txt", "comparison_runs.csv")


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
    own = argv[: argv.index("--")] if "--" in argv else argv
    args = parser.parse_args(own)
    given = [a.partition("=")[0] for a in own if a.startswith("--")]
    if twice := sorted({a for a in given if given.count(a) > 1}):
        parser.exit(
            2,
            f"signorm-compare: error: {twice[0]} given twice; give it once (the last would win).\n",
        )
    try:
        check_options(extra, "options after '--'")
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
        if len(methods) < 2:
            raise ValueError(
                f"--methods: only the reference {comparison.reference!r}; name at least one "
                f"method to compare it with, of {list(comparison.methods)}."
            )
        seeds = tuple(args.seeds) if args.seeds else comparison.seeds
        check_seeds(list(seeds), "--seeds")
    except (ValueError, FileNotFoundError) as error:
        parser.exit(2, f"signorm-compare: error: {error}\n")
    out = Path(args.out or Path("logs/compare") / Path(args.config).stem)
    print(plan(comparison, methods, seeds, out), flush=True)
    if not args.tables_only:
        try:
            train(comparison, out, methods, seeds, extra)
        except (RuntimeError, ValueError) as error:
            parser.exit(1, f"signorm-compare: error: {error}\n")
        except (KeyboardInterrupt, Stopped) as stop:
            parser.exit(
                128 + getattr(stop, "signum", signal.SIGINT),
                f"signorm-compare: interrupted; the finished runs under {out} are "
                "kept, and running the same command again resumes the rest.\n",
            )
    try:
        runs = collect(comparison, out, methods, seeds, extra)
    except ValueError as error:
        parser.exit(1, f"signorm-compare: error: {error}\n")
    text = tables(comparison, runs, seeds)
    print(
        f"\n{Path(args.config).name}: {len(seeds)} seed(s), {len(methods)} methods, runs "
        f"under {out}\n"
    )
    print(text, end="")
    written = [out / name for name in (*TABLE_FILES, *FIGURE_FILES)]
    if odd := [p for p in written if p.exists() and not p.is_symlink() and not p.is_file()]:
        parser.exit(1, f"signorm-compare: error: {odd[0]} is not a file; move it away.\n")
    try:  # drawn before anything is written: the files of one comparison change together
        figure = draw_comparison(comparison, runs, seeds, out)
    except (ValueError, OSError) as error:
        parser.exit(1, f"signorm-compare: error: the figure: {error}\n")
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "comparison.txt", text)
    _write(out / "comparison_runs.csv", runs_csv(runs, seeds, out))
    figures = save_figure(figure, out)
    print(f"\nWritten: {out / 'comparison.txt'}, {out / 'comparison_runs.csv'}, {figures}")
    return 0


def command() -> None:
    """The ``signorm-compare`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    command()
