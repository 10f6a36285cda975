"""Finding finished runs: TorchUncertainty ``results.csv`` files and the settings behind them.

A *run* is one logger directory holding the ``results.csv`` that TorchUncertainty's
``ClassificationRoutine(save_to_csv=True)`` writes when testing ends (one row per ``test``
call; the last row is the run's result). Its settings (method, seed, τ, λ, M, test batch
size, training budget, the checkpoint it evaluated) come from ``settings.json`` (written by the
digits sweeps of ``studies.sweeps``) or else from the ``config.yaml`` that the ``torch-uncertainty``
command saves next to the logs.

A ``torch-uncertainty test --ckpt_path <run>/checkpoints/<file>.ckpt`` logs into a folder of its
own, but evaluates the weights of ``<run>``: :func:`merge_evaluations` keeps one run per
*training* run (its most recent evaluation), so that a re-evaluation is never counted as another
seed.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ..safety.files import read_regular, read_yaml

__all__ = [
    "BUDGET_KEYS",
    "FINISHED_KEYS",
    "METRIC_RANGES",
    "REQUEST_ENV",
    "RESULTS_FILENAME",
    "RUN_RECORD_FILENAME",
    "SETTINGS_FILENAME",
    "TRAINED_STEPS_COLUMN",
    "Run",
    "check_header",
    "check_metrics",
    "file_sha256",
    "find_runs",
    "iter_groups",
    "merge_evaluations",
    "package_versions",
    "read_results",
    "read_run_record",
    "read_settings",
    "result_rows",
    "trained_steps",
]

RESULTS_FILENAME = "results.csv"
#: The cost and class counts a run's :class:`~signorm_lab.callbacks.RunRecordCallback` writes.
RUN_RECORD_FILENAME = "run_record.json"
#: A run record holds a few kilobytes; larger is no such file.
MAX_RECORD_BYTES = 1 << 20
#: The environment variable holding the request (JSON) of the process signorm-compare starts.
REQUEST_ENV = "SIGNORM_RUN_REQUEST"
#: The keys, and their types, of the record of a run whose test ended.
FINISHED_KEYS = {
    "params_total": int,
    "params_trainable": int,
    "optimizer_steps": int,
    "fit_seconds": (int, float),
    "test_seconds": (int, float),
    "train_class_counts": dict,
    "test_class_counts": dict,
    "provenance": dict,
}
#: The distributions whose versions a run records.
PACKAGES = (
    "torch-uncertainty-signorm",
    "torch-uncertainty",
    "torch",
    "lightning",
    "torchvision",
    "timm",
    "transformers",
    "numpy",
    "scikit-learn",
)


#: The ``results.csv`` column holding the optimizer steps a run took (``trainer.global_step``).
TRAINED_STEPS_COLUMN = "train/trained_steps"
#: A run's results.csv, config.yaml or settings.json holds kilobytes; larger is no such file.
MAX_RESULTS_BYTES = 16 << 20
SETTINGS_FILENAME = "settings.json"
#: The trainer's arguments that bound a training run, read from its ``config.yaml``.
BUDGET_KEYS = ("max_epochs", "max_steps", "limit_train_batches", "fast_dev_run")
#: The values a metric can take, by the last part of its results.csv key (TorchUncertainty logs
#: rates as fractions): a value outside is no such metric.
METRIC_RANGES = {
    **dict.fromkeys(("Acc", "ECE", "aECE", "AUROC", "AUPR", "FPR95", "AURC"), (0.0, 1.0)),
    "NLL": (0.0, math.inf),
    "Brier": (0.0, 2.0),
    "signorm_cos": (-1.0, 1.0),
}


@dataclass(frozen=True)
class Run:
    """One finished run: its last ``results.csv`` row and its settings.

    ``training_run`` is the folder of the run whose weights were evaluated (the run's own
    folder, or the one holding the checkpoint a ``test --ckpt_path`` evaluated), and
    ``evaluations`` the ``results.csv`` files :func:`merge_evaluations` merged into this run
    (oldest first; empty when not merged).
    """

    path: Path
    metrics: Mapping[str, float]
    settings: Mapping[str, Any] = field(default_factory=dict)
    training_run: Path | None = None
    evaluations: tuple[Path, ...] = ()

    def get(self, name: str) -> Any:
        """A metric (``test/cls/Acc``) or, failing that, a setting (``tau``); ``None`` if absent."""
        if name in self.metrics:
            return self.metrics[name]
        return self.settings.get(name)


def read_results(path: str | Path, checked: Iterable[str] = ()) -> dict[str, float]:
    """The last row of a TorchUncertainty ``results.csv`` as floats (empty cells are NaN), its
    ``checked`` columns checked by :func:`check_metrics`.

    Raises:
        ValueError: If the file has a header but no row, or a checked value is out of range.
    """
    path = Path(path)
    rows = _result_rows(path)
    metrics = {key: _cell(value, key, path) for key, value in rows[-1].items() if key is not None}
    check_metrics(metrics, checked, path)
    return metrics


def check_metrics(metrics: Mapping[str, float], keys: Iterable[str], path: Path) -> None:
    """Refuse a value of ``keys`` (those ``metrics`` holds) that is not finite or, when its name
    is in :data:`METRIC_RANGES`, out of its range: a caller that averages metrics checks them (a
    NaN among several runs is a failed run, not a number to average).

    Raises:
        ValueError: Naming the file, the column and its value, and what to do.
    """
    for key in keys:
        if key not in metrics:
            continue
        low, high = METRIC_RANGES.get(key.rpartition("/")[2], (-math.inf, math.inf))
        if not (math.isfinite(metrics[key]) and low <= metrics[key] <= high):
            valid = f" in [{low:g}, {high:g}]" if key.rpartition("/")[2] in METRIC_RANGES else ""
            raise ValueError(
                f"{path}: {key} is {metrics[key]!r}, not a finite number{valid}; the run failed "
                "or the file was edited: move its run folder away and run again to train it "
                "anew."
            )


def result_rows(path: str | Path) -> int:
    """The number of result rows of a ``results.csv`` (one per ``test`` call logged into its
    folder; the last is the run's result)."""
    return len(_result_rows(Path(path)))


def _result_rows(path: Path) -> list[dict[str, str]]:
    text = (
        read_regular(path, "results", MAX_RESULTS_BYTES, "a results.csv")
        .decode("utf-8", errors="replace")
        .removeprefix("\ufeff")
    )  # a BOM is no part of the first name
    rows = []
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, [])
        check_header(header, path)
        for number, fields in enumerate(reader, start=2):
            if len(fields) != len(header):
                raise ValueError(
                    f"{path}: line {number} has {len(fields)} fields but the "
                    f"header has {len(header)}; a results.csv row has one value "
                    f"per column."
                )
            rows.append(dict(zip(header, fields, strict=True)))
    except csv.Error as error:  # a field over the csv module's limit (128 kB), a NUL byte
        raise ValueError(f"{path} is not a results CSV ({error}).") from None
    if not rows:
        raise ValueError(f"{path} holds no result row (only a header, or nothing).")
    return rows


def check_header(header: list[str], path: Path) -> None:
    """Refuse a CSV header naming a column twice (a reader would keep one of the two values
    silently)."""
    if duplicated := sorted({name for name in header if header.count(name) > 1}):
        raise ValueError(
            f"{path} names the column {duplicated[0]!r} twice; a results file "
            f"holds one value per column."
        )


def _cell(value: str | None, key: str, path: Path) -> float:
    """A results.csv cell as a float (empty: NaN), refusing text (a spreadsheet formula such
    as ``=1+1`` or a word) with the cell named."""
    if value in ("", None):
        return math.nan
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"{path}: column {key!r} holds {value!r:.60}, not a number; a "
            f"results.csv holds numbers only."
        ) from None


def _find_key(tree: Any, key: str) -> Any:
    if isinstance(tree, Mapping):
        if key in tree and not isinstance(tree[key], Mapping):
            return tree[key]
        for value in tree.values():
            if (found := _find_key(value, key)) is not None:
                return found
    elif isinstance(tree, list):
        for value in tree:
            if (found := _find_key(value, key)) is not None:
                return found
    return None


def _config_block(routine: Any) -> Mapping[str, Any]:
    """The settings the model's ``config:`` block holds (a mapping or a ``SigmaNormConfig``
    class block): the values the model trains with, whatever its keyword arguments say
    (:meth:`~torch_uncertainty_signorm.SigmaNormConfig.resolve`)."""
    model = _find_key_block(routine, "model")
    init_args = model.get("init_args") if isinstance(model, Mapping) else None
    config = init_args.get("config") if isinstance(init_args, Mapping) else None
    if isinstance(config, Mapping) and "class_path" in config:
        config = config.get("init_args")
    return config if isinstance(config, Mapping) else {}


def _find_key_block(routine: Any, key: str) -> Any:
    init_args = routine.get("init_args", routine) if isinstance(routine, Mapping) else None
    return init_args.get(key) if isinstance(init_args, Mapping) else None


def read_settings(log_dir: str | Path) -> dict[str, Any]:
    """Settings of the run in ``log_dir``: the saved ``config.yaml``, updated by ``settings.json``.

    From a ``config.yaml`` this reads ``seed`` (``seed_everything``), the routine's class
    name as ``method``, and the first ``tau``, ``diversity_strength``, ``num_estimators``
    and ``num_tta`` of the routine block; ``test_batch_size`` is the datamodule's
    ``eval_batch_size`` or, if unset, ``batch_size``; the trainer's :data:`BUDGET_KEYS`
    and the evaluated ``ckpt_path``, when set. ``settings.json`` (written by the sweeps of this
    package) takes precedence key by key.
    """
    log_dir = Path(log_dir)
    settings: dict[str, Any] = {}
    if (log_dir / "config.yaml").exists():
        config = read_yaml(log_dir / "config.yaml", "config", MAX_RESULTS_BYTES)
        if not isinstance(config, Mapping):
            raise ValueError(
                f"{log_dir / 'config.yaml'} holds a YAML {type(config).__name__}, "
                f"not the mapping of settings the torch-uncertainty command saves."
            )
        settings = _config_settings(config)
    if (log_dir / SETTINGS_FILENAME).exists():
        path = log_dir / SETTINGS_FILENAME
        try:
            saved = json.loads(read_regular(path, "settings", MAX_RESULTS_BYTES, "a JSON file"))
        except (ValueError, RecursionError) as error:  # not JSON or UTF-8, a 5,000-digit
            reason = " ".join(str(error).split())  # integer, nesting past the recursion limit
            raise ValueError(
                f"{path} is not valid JSON ({reason}); expected the object of "
                f"settings a sweep writes."
            ) from None
        if not isinstance(saved, dict):
            raise ValueError(
                f"{path} holds a JSON {type(saved).__name__}; expected an object of settings."
            )
        settings |= saved
    return settings


def _config_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    settings: dict[str, Any] = {"seed": config.get("seed_everything")}
    routine = config.get("routine") or config.get("model") or {}
    if isinstance(routine, Mapping) and "class_path" in routine:
        settings["method"] = str(routine["class_path"]).rpartition(".")[2]
    held = _config_block(routine)
    for key in ("tau", "diversity_strength", "num_estimators", "num_tta"):
        settings[key] = held[key] if held.get(key) is not None else _find_key(routine, key)
    data = config.get("data") or {}
    batch_size = _find_key(data, "eval_batch_size") or _find_key(data, "batch_size")
    settings["test_batch_size"] = batch_size
    trainer = config.get("trainer") or {}
    if isinstance(trainer, Mapping):
        settings |= {key: trainer.get(key) for key in BUDGET_KEYS}
    settings["ckpt_path"] = config.get("ckpt_path")
    return {key: value for key, value in settings.items() if value is not None}


def find_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Every run under ``paths`` (``results.csv`` files or folders searched recursively),
    sorted by path.

    Raises:
        ValueError: If a path does not exist or no ``results.csv`` is found.
    """
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(path.rglob(RESULTS_FILENAME))
        else:
            raise ValueError(f"{str(path)!r} is neither a results file nor a folder.")
    if not files:
        raise ValueError(f"no {RESULTS_FILENAME} found under {[str(p) for p in paths]}.")
    runs = []
    for file in sorted(set(files)):
        settings = read_settings(file.parent)
        runs.append(
            Run(
                file,
                read_results(file),
                settings,
                _training_run(file.parent, settings.get("ckpt_path")),
            )
        )
    return runs


def _training_run(run_dir: Path, ckpt_path: Any) -> Path:
    """The folder of the run whose weights ``run_dir``'s results evaluated.

    A checkpoint ``<save_dir>/<name>/version_<n>/checkpoints/<file>.ckpt`` belongs to
    ``version_<n>``: the sibling of ``run_dir`` of that name when there is one (the logs may
    have been copied or moved together), else the path itself, read from the folders above
    ``run_dir`` (where the command ran) or the working directory when relative.
    """
    run_dir = run_dir.resolve()
    if not isinstance(ckpt_path, str) or Path(ckpt_path).parent.name != "checkpoints":
        return run_dir
    owner = Path(ckpt_path).parent.parent
    if owner.parent.name == run_dir.parent.name and (run_dir.parent / owner.name).is_dir():
        return run_dir.parent / owner.name
    if not owner.is_absolute():
        found = [a / owner for a in (*run_dir.parents, Path.cwd()) if (a / owner).is_dir()]
        owner = found[0] if found else owner
    return owner.resolve() if owner.exists() else owner


def trained_steps(run_dir: str | Path) -> int | None:
    """The optimizer steps a run took: its ``results.csv``'s ``train/trained_steps`` (written
    when testing by :class:`~signorm_lab.callbacks.results_csv.ResultsCSVCallback`), else
    ``None``.

    The checkpoints' ``step=N`` names tell only the step of the last checkpoint saved, not
    the steps taken after it (a run of 90 steps checkpointed every 72 steps names 72): they
    are not read.
    """
    path = Path(run_dir) / RESULTS_FILENAME
    try:
        value = read_results(path).get(TRAINED_STEPS_COLUMN)
    except (OSError, ValueError):
        return None
    return int(value) if value is not None and math.isfinite(value) and value >= 0 else None


def merge_evaluations(runs: Iterable[Run]) -> list[Run]:
    """One run per training run: its most recent evaluation.

    Runs sharing a :attr:`Run.training_run` (a training run tested by ``eval_after_fit``, and
    ``torch-uncertainty test --ckpt_path`` re-runs of its checkpoints) evaluated the same
    weights: they count once. The merged run has the metrics and settings of the evaluation
    whose ``results.csv`` was modified last, the training run's ``seed`` and budget
    (:data:`BUDGET_KEYS`) when its folder is among ``runs``, and lists every evaluation in
    :attr:`Run.evaluations`. Runs are returned in the order of their training runs' paths.
    """
    groups: dict[Path, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.training_run or run.path.parent.resolve(), []).append(run)
    merged = []
    for training_run, group in sorted(groups.items(), key=lambda item: str(item[0])):
        group.sort(key=lambda run: (run.path.stat().st_mtime, str(run.path)))
        latest = group[-1]
        settings = dict(latest.settings)
        trained = [run for run in group if run.path.parent.resolve() == training_run]
        if trained:
            keys = ("seed", *BUDGET_KEYS)
            settings |= {k: v for k, v in trained[-1].settings.items() if k in keys}
        merged.append(
            Run(
                latest.path,
                latest.metrics,
                settings,
                training_run,
                tuple(run.path for run in group),
            )
        )
    return merged


def iter_groups(runs: Iterable[Run], key: str) -> Iterator[tuple[Any, list[Run]]]:
    """Runs grouped by the setting or metric ``key``, groups in ascending order of its value."""
    groups: dict[Any, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.get(key), []).append(run)
    yield from sorted(groups.items(), key=lambda item: (item[0] is None, item[0]))


def read_run_record(path: str | Path, finished: bool = False) -> dict[str, Any]:
    """The ``run_record.json`` at ``path`` as a dictionary; with ``finished``, one holding every
    key of :data:`FINISHED_KEYS` with its type.

    Raises:
        FileNotFoundError: If nothing is there.
        ValueError: In one line naming the file, what is wrong and what to do.
    """
    redo = "move its run folder away and run again to train the run anew"
    if Path(path).is_symlink():
        raise ValueError(f"{path}: a symbolic link, not the record a run writes; {redo}.")
    try:
        data = read_regular(path, RUN_RECORD_FILENAME, MAX_RECORD_BYTES, "a JSON file")
        record = json.loads(data)
    except (ValueError, RecursionError) as error:  # not JSON or UTF-8, too large, too deep
        reason = " ".join(str(error).split())
        raise ValueError(f"{path}: not a run record ({reason}); {redo}.") from None
    if not isinstance(record, dict):
        raise ValueError(
            f"{path}: holds a JSON {type(record).__name__}, not the object a run writes; {redo}."
        )
    if finished:
        for key, kind in FINISHED_KEYS.items():
            value = record.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(
                    f"{path}: {key!r} is {'missing' if key not in record else repr(value)[:60]}, "
                    f"not the {getattr(kind, '__name__', 'number')} a finished run records; "
                    f"{redo}."
                )
    return record


def file_sha256(path: str | Path) -> str:
    """The sha256 of the file at ``path``, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_versions() -> dict[str, str | None]:
    """The versions of :data:`PACKAGES` installed (``None`` for one that is not)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return versions
