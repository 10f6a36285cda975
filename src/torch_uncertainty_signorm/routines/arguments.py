"""The routine's arguments: objects checked against the model, and the hyper-parameters it saves
(the arguments that are data), read back by ``load_from_checkpoint``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn
from torch_uncertainty.transforms import RepeatTarget

from ..signorm.ensemble import SigmaNormEnsemble
from ..utils import _compat

__all__ = ["agree_with_model", "check_objects", "saved_hyperparameters"]


def check_objects(**arguments: Any) -> None:
    """Refuse a ``class_path``/``init_args`` mapping, or anything but a module, for each of
    ``arguments`` (``model``, ``loss``, ``format_batch_fn``): the routine takes objects, as
    TorchUncertainty's do. ``None`` passes (the routine's default)."""
    for name, value in arguments.items():
        if isinstance(value, Mapping):
            raise TypeError(
                f"{name}={value!r:.200} is a class_path/init_args block; the routine takes the "
                f"object it describes. Build it and pass it ({name}=...); to reload a checkpoint "
                f"that saved such a block (the torch-uncertainty command's), pass it to "
                f"load_from_checkpoint(path, {name}=...), or use signorm_lab's "
                f"load_routine(path), which builds it from the block through its allow-list."
            )
        if value is not None and not isinstance(value, nn.Module):
            raise TypeError(
                f"{name} must be an nn.Module, got {type(value).__name__} {value!r:.200}."
            )


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


def _is_data(value: Any) -> bool:
    """Whether ``value`` is plain data: ``None``, booleans, numbers and strings, in lists, tuples
    and mappings with string keys; what ``torch.load(weights_only=True)`` reads back."""
    if isinstance(value, Mapping):
        return all(isinstance(key, str) and _is_data(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_data(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def saved_hyperparameters(cls: type, arguments: dict[str, Any]) -> dict[str, Any]:
    """What ``load_from_checkpoint`` and ``--ckpt_path`` read back: the ``routine:`` block
    Lightning's CLI hands over while building the routine, else ``arguments``; of either, the
    values that are data (objects are given again when loading).

    Lightning's ``_instantiator`` is dropped so that loading goes through ``__init__``.
    """
    given = _compat.given_hyperparameters()
    if given is None:
        given = {_compat.CLASS_PATH_KEY: f"{cls.__module__}.{cls.__qualname__}", **arguments}
    return {k: v for k, v in given.items() if k != _compat.INSTANTIATOR_KEY and _is_data(v)}
