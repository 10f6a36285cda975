"""The routine's arguments: built from ``class_path`` mappings, checked against the model, saved
as hyper-parameters and read back by ``load_from_checkpoint``, only through allow-listed classes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from signorm_lab.safety.checkpoints import check_lightning_checkpoint, is_url, read_checkpoint
from signorm_lab.safety.class_blocks import build_class_block
from signorm_lab.safety.plain_data import is_data
from torch import nn
from torch_uncertainty.transforms import RepeatTarget

from ..signorm.ensemble import SigmaNormEnsemble
from ..utils import _compat

__all__ = ["agree_with_model", "built", "load_checked", "saved_hyperparameters"]


def built(value: Any, base: type, name: str) -> Any:
    """``value``, built first when it is a ``class_path``/``init_args`` mapping; a value that is
    neither a module nor such a mapping (a string) is refused."""
    if isinstance(value, Mapping):
        return build_class_block(value, base, where=name)
    if value is not None and not isinstance(value, nn.Module):
        raise TypeError(
            f"{name} must be a {base.__name__} or its class_path/init_args mapping, "
            f"got {type(value).__name__} {value!r:.200}."
        )
    return value


def agree_with_model(model: SigmaNormEnsemble, num_classes: int | None, kwargs: dict) -> int:
    """The number of classes; ``is_ensemble`` and ``format_batch_fn`` filled in from the model.

    Values contradicting the model fail here rather than as a torchmetrics or cross-entropy
    shape error after the datamodule is set up.
    """
    members, classes = model.num_estimators, model.heads.weight.shape[1]
    if num_classes is None:
        num_classes = classes
    elif num_classes != classes:
        raise ValueError(
            f"num_classes={num_classes!r}, but the model's member heads predict {classes} "
            f"classes: give the model num_classes={num_classes!r} too, or leave the routine's "
            f"num_classes unset."
        )
    if not kwargs.setdefault("is_ensemble", True) and members > 1:
        raise ValueError(
            f"is_ensemble={kwargs['is_ensemble']!r}, but the model is an ensemble of "
            f"num_estimators={members} members, whose ensemble metrics this would drop: set "
            f"is_ensemble=True or leave it unset."
        )
    batch_format = kwargs.get("format_batch_fn")
    if batch_format is None:
        kwargs["format_batch_fn"] = RepeatTarget(num_repeats=members)
        return num_classes
    repeats = getattr(batch_format, "num_repeats", getattr(batch_format, "num_estimators", None))
    if repeats is not None and repeats != members:
        raise ValueError(
            f"format_batch_fn repeats the targets {repeats} times, but the model has "
            f"num_estimators={members} members: use RepeatTarget(num_repeats={members}) or "
            f"leave format_batch_fn unset."
        )
    return num_classes


def saved_hyperparameters(cls: type, arguments: dict[str, Any]) -> dict[str, Any]:
    """What ``load_from_checkpoint`` and ``--ckpt_path`` read back: the command's ``routine:``
    block (Lightning's CLI hands it over while building), else ``arguments`` that are data.

    Lightning's ``_instantiator`` is dropped so that loading goes through ``__init__``.
    """
    given = _compat.given_hyperparameters()
    if given is None:
        given = {_compat.CLASS_PATH_KEY: f"{cls.__module__}.{cls.__qualname__}", **arguments}
    return {k: v for k, v in given.items() if k != _compat.INSTANTIATOR_KEY and is_data(v)}


def load_checked(load: Callable[..., Any], checkpoint_path: Any, *args: Any, **kwargs: Any) -> Any:
    """``load(checkpoint_path, ...)`` (Lightning's ``load_from_checkpoint``) without the
    checkpoint's ``_instantiator``, which would let jsonargparse import any class path it names.

    A local checkpoint that fails to load (empty, truncated, ``hyper_parameters`` that are not a
    mapping, a negative ``global_step``) is read again to say which file and what is wrong."""
    try:
        return load(checkpoint_path, *args, **{_compat.INSTANTIATOR_KEY: None}, **kwargs)
    except Exception as error:
        if isinstance(checkpoint_path, str | Path) and not is_url(checkpoint_path):
            try:
                check_lightning_checkpoint(
                    read_checkpoint(checkpoint_path, "checkpoint_path"),
                    checkpoint_path,
                    "checkpoint_path",
                )
            except (ValueError, FileNotFoundError) as clear:
                raise clear from error
        raise
