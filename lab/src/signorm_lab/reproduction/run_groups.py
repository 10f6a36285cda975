"""Runs that differ only in their seed: the runs a reproduction row may average.

A folder of logs often holds runs of different settings (a τ sweep, λ = 0, a target, a spread,
another M): averaging them as seeds of one method would check a mixture that no recipe trains.
:func:`group_runs` groups training runs by their settings, everything the run's ``config.yaml``
(and the ``settings.json`` of the sweeps) records but the seed and what does not change the
result (the logger, callbacks, devices, data root and loader workers, the evaluated checkpoint);
:func:`select_runs` keeps one group, refusing a mixture with the groups listed and the settings
that differ between them, refusing runs on stand-in data
(:mod:`signorm_lab.datamodules.stand_in_data`), which measure nothing, and runs whose
``results.csv`` holds a row no test wrote
(:func:`~signorm_lab.evaluation.results_csv.check_test_rows`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..datamodules.stand_in_data import STAND_IN_COLUMN
from ..evaluation.results_csv import check_test_rows
from .runs import SETTINGS_FILENAME, Run, merge_evaluations

__all__ = ["group_runs", "run_settings", "select_runs"]

#: Keys (a dotted path's last part) left out of a run's settings: they do not change its result.
_IGNORED_NAMES = frozenset(
    {
        "seed_everything",
        "seed",
        "ckpt_path",
        "logger",
        "callbacks",
        "default_root_dir",
        "devices",
        "accelerator",
        "num_nodes",
        "strategy",
        "root",
        "num_workers",
        "persistent_workers",
        "pin_memory",
        "enable_progress_bar",
        "enable_model_summary",
        "enable_checkpointing",
        "log_every_n_steps",
        "print_config",
        "eval_after_fit",
        "save_to_csv",
        "csv_filename",
        "log_plots",
        "plugins",
        "profiler",
        "deterministic",
        "benchmark",
        "num_threads",
    }
)
#: Top-level blocks of a config.yaml that make up a run's settings (the trainer's budget and
#: numerics only: its other arguments are hardware and logging).
_BLOCKS = ("routine", "model", "data", "optimizer", "lr_scheduler")
_TRAINER_KEYS = (
    "max_epochs",
    "max_steps",
    "limit_train_batches",
    "fast_dev_run",
    "precision",
    "accumulate_grad_batches",
    "gradient_clip_val",
    "gradient_clip_algorithm",
)


def _flatten(tree: Any, prefix: str, out: dict[str, Any], budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(
            f"the configuration under {prefix or 'its root'} holds more than "
            "100,000 values; not a run's config.yaml"
        )
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            if str(key) not in _IGNORED_NAMES:
                _flatten(value, f"{prefix}.{key}" if prefix else str(key), out, budget)
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            _flatten(value, f"{prefix}[{index}]", out, budget)
    else:
        out[prefix] = tree


def run_settings(run_dir: str | Path) -> dict[str, Any]:
    """A run's settings as ``{dotted path: value}``: its ``config.yaml``'s routine, data,
    optimiser and scheduler blocks and the trainer's budget and precision, then its
    ``settings.json`` (which takes precedence), without the seed and the keys that do not change
    the result; a ``config.yaml`` that is a symbolic link is refused (:class:`ValueError`). A
    run on stand-in data has ``stand_in_data: True``: its folder holds
    :data:`~signorm_lab.datamodules.stand_in_data.RUN_LABEL`, or the data root its
    ``config.yaml`` names holds stand-ins
    (:func:`~signorm_lab.datamodules.stand_in_data.is_stand_in_root`: the data themselves
    tell, whatever marker was removed); its ``results.csv`` rows say it too (see
    :func:`group_runs`)."""
    from ..datamodules.stand_in_data import RUN_LABEL, is_stand_in_root
    from ..safety.files import read_regular, read_yaml

    run_dir = Path(run_dir)
    flat: dict[str, Any] = {}
    budget = [100_000]
    if (run_dir / "config.yaml").is_symlink():
        raise ValueError(
            f"{run_dir / 'config.yaml'} is a symbolic link: a run's settings are the "
            f"config.yaml the command saved in its folder; copy the file there if it is this "
            f"run's."
        )
    if (run_dir / "config.yaml").exists():
        config = read_yaml(run_dir / "config.yaml", "config", 16 << 20)
        if not isinstance(config, Mapping):
            raise ValueError(
                f"{run_dir / 'config.yaml'} holds a YAML "
                f"{type(config).__name__}, not the mapping of settings the "
                f"torch-uncertainty command saves."
            )
        if any(is_stand_in_root(root) for root in _data_roots(config, run_dir)):
            flat["stand_in_data"] = True
        _flatten({k: config[k] for k in _BLOCKS if k in config}, "", flat, budget)
        trainer = config.get("trainer")
        if isinstance(trainer, Mapping):
            _flatten(
                {k: trainer[k] for k in _TRAINER_KEYS if trainer.get(k) is not None},
                "trainer",
                flat,
                budget,
            )
    if (run_dir / SETTINGS_FILENAME).exists():
        try:
            saved = json.loads(
                read_regular(run_dir / SETTINGS_FILENAME, "settings", 16 << 20, "a JSON file")
            )
        except (ValueError, RecursionError):  # not JSON or UTF-8, huge integers, deep nesting
            saved = None
        if isinstance(saved, Mapping):
            _flatten(dict(saved), "", flat, budget)
    if (run_dir / RUN_LABEL).exists():
        flat["stand_in_data"] = True
    return flat


def _data_roots(config: Mapping[str, Any], run_dir: Path) -> list[Path]:
    """The folders the ``root`` of ``config``'s data block may name: as written (absolute, or
    relative to the working directory) and relative to each folder above ``run_dir`` (where the
    command may have run)."""
    data = config.get("data")
    init_args = data.get("init_args", data) if isinstance(data, Mapping) else None
    root = init_args.get("root") if isinstance(init_args, Mapping) else None
    if not isinstance(root, str) or not root:
        return []
    path = Path(root).expanduser()
    if path.is_absolute():
        return [path]
    return [path, *(folder / path for folder in run_dir.resolve().parents)]


def _key(settings: Mapping[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def group_runs(runs: Sequence[Run]) -> list[tuple[dict[str, Any], list[Run]]]:
    """The training runs of ``runs`` (:func:`~signorm_lab.reproduction.runs.
    merge_evaluations`) grouped by :func:`run_settings` of their training run's folder (the
    evaluated one when that folder is not at hand), largest group first. A training run one of
    whose evaluations logged :data:`~signorm_lab.datamodules.stand_in_data.STAND_IN_COLUMN`
    has ``stand_in_data: True``."""
    stand_in = {
        run.training_run or run.path.parent.resolve()
        for run in runs
        if run.metrics.get(STAND_IN_COLUMN) == 1
    }
    groups: dict[str, tuple[dict[str, Any], list[Run]]] = {}
    for run in merge_evaluations(runs):
        folder = (
            run.training_run
            if run.training_run and run.training_run.is_dir()
            else (run.path.parent)
        )
        settings = run_settings(folder)
        if run.training_run in stand_in or (
            folder != run.path.parent and run_settings(run.path.parent).get("stand_in_data")
        ):
            settings["stand_in_data"] = True
        groups.setdefault(_key(settings), (settings, []))[1].append(run)
    return sorted(groups.values(), key=lambda group: (-len(group[1]), str(group[1][0].path)))


def _short_names(paths: Sequence[str]) -> dict[str, str]:
    """Each dotted path's shortest suffix (whole components) no other path ends with."""
    names = {}
    for path in paths:
        parts = path.split(".")
        for start in range(len(parts) - 1, -1, -1):
            suffix = ".".join(parts[start:])
            if not any(o != path and (o == suffix or o.endswith("." + suffix)) for o in paths):
                names[path] = suffix
                break
        else:
            names[path] = path
    return names


def _text(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _matches(value: Any, wanted: str) -> bool:
    if wanted.lower() in ("unset", "none", "null"):
        return value is None
    if isinstance(value, bool):
        return wanted.lower() == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return math.isclose(float(wanted), float(value), rel_tol=1e-9, abs_tol=0.0)
        except ValueError:
            return False
    return str(value) == wanted or str(value).rpartition(".")[2] == wanted


def _differing(groups: Sequence[tuple[dict[str, Any], list[Run]]]) -> list[str]:
    paths = sorted({path for settings, _ in groups for path in settings})
    return [p for p in paths if len({_key({"v": s.get(p)}) for s, _ in groups}) > 1]


def _describe(
    settings: Mapping[str, Any], runs: Sequence[Run], shown: Sequence[str], names: Mapping[str, str]
) -> str:
    seeds = " ".join(str(run.settings.get("seed", "?")) for run in runs)
    values = ", ".join(f"{names[p]}={_text(settings.get(p))}" for p in shown)
    return f"{len(runs)} run{'s' * (len(runs) != 1)} (seeds {seeds}): {values}"


def select_runs(runs: Sequence[Run], select: Sequence[str] = (), where: str = "") -> list[Run]:
    """The runs (evaluations included) of the one settings group of ``runs`` that ``select``
    (``KEY=VALUE`` pairs, ``KEY`` a setting's dotted path or its last parts, e.g. ``tau``,
    ``target_diversity=unset``) leaves.

    Raises:
        ValueError: If the runs left hold more than one group (the message lists the groups and
            the settings that differ, and how to select one), if none is left, if a ``KEY``
            names no setting, if the runs are on stand-in data, or if a ``results.csv`` holds
            a row no test wrote.
    """
    for run in runs:
        check_test_rows(run.path)
    groups = group_runs(runs)
    every_path = sorted({path for settings, _ in groups for path in settings})
    for pair in select:
        key, sep, wanted = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--select expects KEY=VALUE, got {pair!r}.")
        paths = [p for p in every_path if p == key or p.endswith("." + key)]
        if not paths:
            names = _short_names(_differing(groups) or every_path)
            raise ValueError(
                f"--select {key}: no run under {where} has that setting; the "
                f"settings that differ are {sorted(names.values())}."
            )
        left = [(s, r) for s, r in groups if any(_matches(s.get(p), wanted) for p in paths)]
        if not left:
            names = _short_names(paths)
            values = sorted({f"{names[p]}={_text(s.get(p))}" for s, _ in groups for p in paths})
            raise ValueError(
                f"--select {pair}: no run under {where} matches; the runs have {', '.join(values)}."
            )
        groups = left
    if len(groups) > 1:
        shown = _differing(groups)
        names = _short_names(shown)
        listed = "; ".join(
            f"[{i}] {_describe(s, r, shown, names)}" for i, (s, r) in enumerate(groups, 1)
        )
        first = groups[0][0]
        example = " ".join(f"{names[p]}={_text(first.get(p))}" for p in shown)
        raise ValueError(
            f"{where} holds runs of {len(groups)} different settings, which differ in "
            f"{', '.join(names[p] for p in shown)}; a row averages runs that differ only in "
            f"their seed. Groups: {listed}. Select one with --select, e.g. --select {example} "
            "(or point at a folder holding one group)."
        )
    settings, chosen = groups[0]
    if settings.get("stand_in_data"):
        raise ValueError(
            f"the runs under {where} used stand-in data (their folders hold "
            f"STAND_IN_DATA.txt, their results.csv logged {STAND_IN_COLUMN}, or their "
            "data root holds the files signorm-standin-data writes): random pixels, a "
            "smoke test of the recipe; they are not compared with any row."
        )
    training_runs = {run.training_run for run in chosen}
    return [
        run
        for run in runs
        if (run.training_run or run.path.parent.resolve()) in training_runs
        or run.path in {r.path for r in chosen}
    ]
