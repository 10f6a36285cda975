"""TorchUncertainty's own recipe format, as its ``main.py`` scripts read it.

TorchUncertainty's CIFAR recipes are written for ``TULightningCLI(ClassificationRoutine,
CIFAR10DataModule)``: their ``routine:`` and ``data:`` blocks carry no ``class_path``, and they
use shorthands (``loss: CrossEntropyLoss``, ``style: cifar``). The ``torch-uncertainty`` command
reads them unmodified: a ``routine:`` block without ``class_path`` is TorchUncertainty's
:class:`~torch_uncertainty.routines.ClassificationRoutine`, and the datamodule is named once on the
command line (``--data CIFAR10DataModule``). This module holds the pieces of that translation,
and :func:`to_tu_format`, which writes a command recipe in that format (the checkout's
``tools/write_tu_recipes.py`` exports the σN-Ens, FineTune and FiLM rows of ``experiments/``
with it, so that they sit next to TorchUncertainty's Packed-Ensembles recipes).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from jsonargparse.typing import register_type
from torch_uncertainty.models.classification.resnet.utils import ResNetStyle

from ..safety.allowlist import current_class_paths

__all__ = [
    "DATAMODULE_PACKAGES",
    "DEFAULT_ROUTINE",
    "check_datamodule_named",
    "normalize_recipe",
    "register_shorthands",
    "resolve_datamodule",
    "to_tu_format",
]

#: The routine of a ``routine:`` block without ``class_path`` (TorchUncertainty's ``main.py``).
DEFAULT_ROUTINE = "torch_uncertainty.routines.ClassificationRoutine"
#: Where a datamodule named without its module is looked up, in this order.
DATAMODULE_PACKAGES = ("torch_uncertainty.datamodules", "signorm_lab.datamodules")
#: Models whose ``repeat_strategy`` default became ``"paper"`` (each member sees its own slice of
#: the batch) after the recipes were written for ``"legacy"`` (every member sees the whole batch,
#: as their ``RepeatTarget`` expects).
LEGACY_REPEAT_MODELS = frozenset(
    f"torch_uncertainty.models.classification.{name}"
    for name in (
        "batched_resnet",
        "masked_resnet",
        "batched_wideresnet28x10",
        "masked_wideresnet28x10",
    )
)


def _style_name(style: ResNetStyle) -> str:
    return style.name


def _style_from(value: Any) -> ResNetStyle:
    return value if isinstance(value, ResNetStyle) else ResNetStyle(str(value).lower())


def register_shorthands() -> None:
    """Accept ``style: cifar`` / ``imagenet`` (the enum's values) besides its member names.

    Idempotent: a second call (another command in the same process, or this module run again
    as ``__main__``) replaces the registration instead of failing.
    """
    register_type(
        ResNetStyle, serializer=_style_name, deserializer=_style_from, fail_already_registered=False
    )


def _datamodule_names() -> dict[str, str]:
    names = {}
    for package in DATAMODULE_PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", dir(module)):
            if name.endswith("DataModule"):
                names.setdefault(name, f"{package}.{name}")
    return names


def resolve_datamodule(name: str) -> str:
    """The import path of the datamodule ``name`` (a class name or a dotted import path).

    Raises:
        ValueError: If ``name`` is no datamodule of :data:`DATAMODULE_PACKAGES`, listing them.
    """
    if "." in name:
        return name
    names = _datamodule_names()
    if name not in names:
        raise ValueError(
            f"--data {name!r} is not a datamodule of {' or '.join(DATAMODULE_PACKAGES)}; "
            f"give one of {', '.join(sorted(names))}, or an import path "
            f"(--data my_package.MyDataModule)."
        )
    return names[name]


def normalize_recipe(config: dict) -> dict:
    """A TorchUncertainty recipe in the command's form, leaving other recipes as they are.

    The ``model:`` block of TorchUncertainty's Deep Ensembles recipes becomes ``routine:`` (the
    name its ``TULightningCLI`` reads) and moved class paths are updated
    (:data:`~signorm_lab.safety.allowlist.MOVED_CLASS_PATHS`); BatchEnsemble and
    Masksembles models whose targets are
    repeated (``RepeatTarget``) keep the ``repeat_strategy: legacy`` they were written for
    (:data:`LEGACY_REPEAT_MODELS`). Blocks without ``class_path`` are left to the command's
    defaults (``routine``: :data:`DEFAULT_ROUTINE`; ``data``: the ``--data`` class).

    Args:
        config: One recipe, as loaded from YAML.
    """
    config = current_class_paths(config)
    if "model" in config and "routine" not in config:
        config["routine"] = config.pop("model")
    routine = config.get("routine")
    if isinstance(routine, Mapping) and "class_path" not in routine:
        _keep_legacy_repeats(routine)
    return config


def check_datamodule_named(configs: list[dict], datamodule: str | None) -> None:
    """Fail when a ``data:`` block has no ``class_path`` and nothing names the datamodule.

    Args:
        configs: The recipes of one command line (a later one may be an overlay).
        datamodule: The datamodule named by ``--data``, or ``None``.

    Raises:
        ValueError: Listing TorchUncertainty's datamodules.
    """
    blocks = [config.get("data") for config in configs]
    blocks = [block for block in blocks if isinstance(block, Mapping)]
    if datamodule is None and blocks and not any("class_path" in block for block in blocks):
        raise ValueError(
            f"The recipe's `data:` block has no class_path, as in TorchUncertainty's recipes "
            f"(its main.py fixes the datamodule): name it once on the command line, e.g. "
            f"--data CIFAR10DataModule; one of {', '.join(sorted(_datamodule_names()))}."
        )


def _keep_legacy_repeats(routine: dict) -> None:
    model, batch_format = routine.get("model"), routine.get("format_batch_fn")
    if (
        isinstance(model, Mapping)
        and model.get("class_path") in LEGACY_REPEAT_MODELS
        and isinstance(batch_format, Mapping)
        and batch_format.get("class_path", "").endswith("RepeatTarget")
    ):
        model.setdefault("init_args", {}).setdefault("repeat_strategy", "legacy")


# --- a command recipe in TorchUncertainty's format ---------------------------------------------


def to_tu_format(config: dict) -> dict:
    """A command recipe in TorchUncertainty's format: no ``class_path`` on ``data:``, nor on a
    ``routine:`` that is :data:`DEFAULT_ROUTINE` (another routine keeps its ``class_path``)."""
    config = dict(config)
    data = config["data"]
    config["data"] = dict(data.get("init_args") or {})
    routine = config["routine"]
    if routine["class_path"] == DEFAULT_ROUTINE:
        config["routine"] = dict(routine.get("init_args") or {})
    return config
