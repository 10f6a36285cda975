"""Finding finished runs: TorchUncertainty ``results.csv`` files and the settings behind them.

A *run* is one logger directory holding the ``results.csv`` that TorchUncertainty's
``ClassificationRoutine(save_to_csv=True)`` writes when testing ends (one row per ``test``
call; the last row is the run's result). Its settings (method, seed, τ, λ, M, test batch
size) come from ``settings.json`` (written by the digits sweeps of this package) or else from
the ``config.yaml`` that the ``torch-uncertainty`` command saves next to the logs.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "RESULTS_FILENAME", "SETTINGS_FILENAME", "Run", "find_runs", "iter_groups", "read_results",
    "read_settings",
]

RESULTS_FILENAME = "results.csv"
SETTINGS_FILENAME = "settings.json"

@dataclass(frozen=True)
class Run:
    """One finished run: its last ``results.csv`` row and its settings."""

    path: Path
    metrics: Mapping[str, float]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        """A metric (``test/cls/Acc``) or, failing that, a setting (``tau``); ``None`` if absent."""
        if name in self.metrics:
            return self.metrics[name]
        return self.settings.get(name)


def read_results(path: str | Path) -> dict[str, float]:
    """The last row of a TorchUncertainty ``results.csv`` as floats (empty cells are NaN).

    Raises:
        ValueError: If the file has a header but no row.
    """
    path = Path(path)
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    if not rows:
        raise ValueError(f"{path} holds no result row (only a header, or nothing).")
    return {key: float(value) if value not in ("", None) else math.nan
            for key, value in rows[-1].items() if key is not None}


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


def read_settings(log_dir: str | Path) -> dict[str, Any]:
    """Settings of the run in ``log_dir``: the saved ``config.yaml``, updated by ``settings.json``.

    From a ``config.yaml`` this reads ``seed`` (``seed_everything``), the routine's class
    name as ``method``, and the first ``tau``, ``diversity_strength``, ``num_estimators``
    and ``num_tta`` of the routine block; ``test_batch_size`` is the datamodule's
    ``eval_batch_size`` or, if unset, ``batch_size``. ``settings.json`` (written by the
    sweeps of this package) takes precedence key by key.
    """
    log_dir = Path(log_dir)
    settings: dict[str, Any] = {}
    if (log_dir / "config.yaml").is_file():
        settings = _config_settings(yaml.safe_load((log_dir / "config.yaml").read_text()) or {})
    if (log_dir / SETTINGS_FILENAME).is_file():
        settings |= json.loads((log_dir / SETTINGS_FILENAME).read_text())
    return settings


def _config_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    settings: dict[str, Any] = {"seed": config.get("seed_everything")}
    routine = config.get("routine") or config.get("model") or {}
    if isinstance(routine, Mapping) and "class_path" in routine:
        settings["method"] = str(routine["class_path"]).rpartition(".")[2]
    for key in ("tau", "diversity_strength", "num_estimators", "num_tta"):
        settings[key] = _find_key(routine, key)
    data = config.get("data") or {}
    batch_size = _find_key(data, "eval_batch_size") or _find_key(data, "batch_size")
    settings["test_batch_size"] = batch_size
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
    return [Run(f, read_results(f), read_settings(f.parent)) for f in sorted(set(files))]


def iter_groups(runs: Iterable[Run], key: str) -> Iterator[tuple[Any, list[Run]]]:
    """Runs grouped by the setting or metric ``key``, groups in ascending order of its value."""
    groups: dict[Any, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.get(key), []).append(run)
    yield from sorted(groups.items(), key=lambda item: (item[0] is None, item[0]))
