"""What ``--ckpt_path`` may bring: a checkpoint's saved routine arguments, checked against the
recipe and the command line, never imported (:func:`reconcile_checkpoint_args`). Which of the
values taken are safe to take is checked by
:mod:`~signorm_lab.safety.checkpoint_args`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import Namespace
from lightning.pytorch.cli import ArgsType, LightningArgumentParser

from .. import _compat
from ..callbacks.exact_resume import saved_on_interruption
from ..safety.allowlist import current_class_paths, import_object
from ..safety.checkpoint_args import check_parsed_arguments, check_taken_arguments
from ..safety.checkpoints import (
    check_dtype_kinds,
    check_lightning_checkpoint,
    is_url,
    read_checkpoint,
)
from .forwarding import FORWARDED_DATA_ARGS

__all__ = [
    "EVALUATION_ONLY_ARGS",
    "OUTPUT_ARGS",
    "check_checkpoint_fits",
    "reconcile_checkpoint_args",
]

#: Routine arguments that only change how a trained model is evaluated: ``--ckpt_path`` takes
#: a value given for them over the checkpoint's (``test --routine.init_args.ood_criterion=energy``).
EVALUATION_ONLY_ARGS = frozenset(
    {
        *FORWARDED_DATA_ARGS,
        "eval_grouping_loss",
        "ood_criterion",
        "post_processing",
        "scod_ood_cost",
        "num_bins_calibration_error",
        "log_plots",
        "save_to_csv",
        "csv_filename",
        "check_finite_loss",
    }
)

#: Routine arguments choosing what a run writes and where: they come from the recipe or the
#: command line only, never from a checkpoint (which would choose a file outside the run).
OUTPUT_ARGS = frozenset({"save_to_csv", "csv_filename", "log_plots"})

_MISSING = object()


def _differences(saved: Any, current: Any, key: str = "") -> Iterator[tuple[str, Any, Any]]:
    """``(dotted key, saved value, current value)`` for each leaf where a saved tree differs."""
    if isinstance(saved, dict) and isinstance(current, dict):
        for name, value in saved.items():
            child = f"{key}.{name}" if key else name
            yield from _differences(value, current.get(name, _MISSING), child)
    elif (list(saved) if isinstance(saved, tuple) else saved) != current:
        yield key, saved, current


def _routine_names(class_path: str | None) -> set[str]:
    """The names of the recipe's routine class (as written, and where it is defined)."""
    if class_path is None:
        return set()
    routine_class = import_object(class_path)  # the recipe's, imported by the parser already
    return {class_path, f"{routine_class.__module__}.{routine_class.__qualname__}"}


def _given_routine_keys(
    parser: LightningArgumentParser, args: ArgsType, subcommand: str
) -> set[str]:
    """Dotted ``routine.init_args`` keys set by the recipe or the command line ``args``."""
    if isinstance(args, dict | Namespace):
        given = parser.parse_object(args, defaults=False)
    else:
        given = parser.parse_args(sys.argv[1:] if args is None else args, defaults=False)
    routine = given[subcommand].get("routine")
    init_args = routine.get("init_args") if isinstance(routine, Namespace) else None
    return set(init_args.keys()) if isinstance(init_args, Namespace) else set()


def _routine_init_args(
    parser: LightningArgumentParser, config: Namespace, subcommand: str
) -> dict[str, Any]:
    """The routine's ``init_args`` as plain YAML values, link targets and ``None`` included."""
    return yaml.safe_load(parser.dump(config, skip_link_targets=False, skip_none=False))[
        subcommand
    ]["routine"]["init_args"]


def check_checkpoint_fits(routine: Any, checked: tuple[str, dict] | None) -> None:
    """Refuse the checked ``--ckpt_path`` (``(path, content)`` from
    :func:`reconcile_checkpoint_args`) whose weights are of another kind of dtype than the built
    ``routine``'s (:func:`~signorm_lab.safety.checkpoints.check_dtype_kinds`)."""
    if checked is None or not isinstance(checked[1].get("state_dict"), dict):
        return
    path, content = checked
    check_dtype_kinds(content["state_dict"], routine.state_dict(), f"ckpt_path='{path}'")


def reconcile_checkpoint_args(
    parser: LightningArgumentParser, config: Namespace, args: ArgsType
) -> tuple[Namespace, bool, tuple[str, dict] | None]:
    """Check a checkpoint's saved routine arguments against the recipe, never importing them.

    Lightning's version imports the checkpoint's ``_class_path`` and lets its values override
    the command line. Here the recipe names every class: a checkpoint naming another routine
    or model class, or a value contradicting one the recipe or command line sets, is an
    error (but for :data:`EVALUATION_ONLY_ARGS`, where the given value is used); what the run
    writes and where (:data:`OUTPUT_ARGS`) is never taken from the checkpoint; values left at
    their defaults are taken from the checkpoint, as Lightning does, but never a string where a
    class is expected, nor an argument that reads or fetches weights or files, nor a number that
    is not finite, checked before and after parsing
    (:mod:`~signorm_lab.safety.checkpoint_args`). The checkpoint is a
    local file, whole, with finite weights
    (:func:`~signorm_lab.safety.checkpoints.check_lightning_checkpoint`), and every
    load (Lightning's too) uses ``weights_only=True``.

    Args:
        parser: The command's parser.
        config: Its parsed configuration (``weights_only`` is set in place).
        args: The arguments it parsed (to tell given values from defaults).

    Returns:
        The configuration, with the values taken from the checkpoint, whether the checkpoint
        was saved when a run was interrupted, and ``(path, content)`` of the checkpoint read and
        checked here (``None`` if none was): what Lightning loads, not the file read again.
    """
    subcommand = config.get("subcommand")
    ckpt_path = config[subcommand].get("ckpt_path") if subcommand else None
    if subcommand and config[subcommand].get("weights_only") is False:
        raise ValueError(
            "--weights_only=false would let a checkpoint run code when it is loaded; the "
            "command loads checkpoints with weights_only=True only (leave it unset)."
        )
    if subcommand and "weights_only" in config[subcommand]:
        config[subcommand].weights_only = True  # every load by Lightning, too
    if not ckpt_path or (not is_url(ckpt_path) and not Path(ckpt_path).exists()):
        # "best", "last": this run's, found by Lightning; a missing file: Lightning says so
        return config, False, None
    checkpoint = check_lightning_checkpoint(read_checkpoint(ckpt_path, "ckpt_path"), ckpt_path)
    checked = (str(ckpt_path), checkpoint)
    resumes_interruption = saved_on_interruption(checkpoint)
    hparams = current_class_paths(dict(checkpoint.get("hyper_parameters") or {}))
    hparams.pop(_compat.INSTANTIATOR_KEY, None)
    routine = config[subcommand].get("routine")
    recipe_class = routine.get("class_path") if isinstance(routine, Namespace) else None
    saved_class = hparams.pop(_compat.CLASS_PATH_KEY, None)
    if saved_class is not None and saved_class not in _routine_names(recipe_class):
        raise ValueError(
            f"ckpt_path='{ckpt_path}' was saved by the routine {saved_class!r}, but the "
            f"recipe's routine is {recipe_class!r}: use the recipe the checkpoint was "
            f"trained with (its classes are never imported from the checkpoint)."
        )
    if not hparams or recipe_class is None:
        return config, resumes_interruption, checked
    current_args = _routine_init_args(parser, config, subcommand)
    given = _given_routine_keys(parser, args, subcommand)
    taken = {}
    for key, saved, current in _differences(hparams, current_args):
        if key in FORWARDED_DATA_ARGS:
            continue  # the datamodule decides (forward_datamodule_args)
        if key.partition(".")[0] in OUTPUT_ARGS:
            continue  # the recipe's or the command line's, never the checkpoint's
        where = f"routine.init_args.{key}"
        if current is _MISSING:
            raise ValueError(
                f"ckpt_path='{ckpt_path}' sets {where}={saved!r}, which the recipe's routine "
                f"{recipe_class!r} does not take: use the recipe it was trained with."
            )
        if key.endswith("class_path") or (isinstance(saved, dict) and "class_path" in saved):
            raise ValueError(
                f"ckpt_path='{ckpt_path}' has {where}={saved!r} where the recipe has "
                f"{current!r}: the command builds the classes the recipe names, never a "
                f"checkpoint's; use the recipe the checkpoint was trained with."
            )
        if key in given or any(name.startswith(f"{key}.") for name in given):
            if key.partition(".")[0] in EVALUATION_ONLY_ARGS:
                continue  # the given value: it does not change the trained model
            raise ValueError(
                f"ckpt_path='{ckpt_path}' has {where}={saved!r}, but the recipe or the "
                f"command line sets {current!r}: give the checkpoint's value or leave it "
                f"unset (unset values are taken from the checkpoint)."
            )
        taken[key] = saved
    if not taken:
        return config, resumes_interruption, checked
    # before parsing: jsonargparse imports what it reads
    init_args = check_taken_arguments(ckpt_path, taken, recipe_class, current_args)
    update = {"class_path": recipe_class, "init_args": init_args}
    config = parser.parse_object({subcommand: {"routine": update}}, config)
    check_parsed_arguments(ckpt_path, taken, _routine_init_args(parser, config, subcommand))
    return config, resumes_interruption, checked
