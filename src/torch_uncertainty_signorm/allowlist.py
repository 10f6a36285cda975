"""What a configuration read from a file may import: an explicit list, checked before building.

Checkpoint hyper-parameters and exported ``config.json`` files are data. jsonargparse, which
builds ``class_path``/``init_args`` blocks, imports every ``class_path`` it meets, and every dotted
string given to a class- or callable-typed argument (``normalization_layer: torch.nn.BatchNorm2d``);
:func:`check_spec` rejects, before anything is imported, every such name outside the lists below.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Collection, Mapping
from typing import Any

from jsonargparse import ArgumentParser

__all__ = [
    "ALLOWED_CLASS_PATHS",
    "ARGUMENT_CLASS_PATHS",
    "COMPONENT_CLASS_PATHS",
    "MODEL_CLASS_PATHS",
    "check_spec",
    "import_object",
    "instantiate_spec",
]

#: Models a ``model:`` block may build: σNorm-Ensembles and the backbones of the recipes.
MODEL_CLASS_PATHS = frozenset({
    "torch_uncertainty_signorm.signorm_ensemble",
    "torch_uncertainty_signorm.SigmaNormEnsemble",
    "torch_uncertainty_signorm.ensemble.signorm_ensemble",
    "torch_uncertainty_signorm.ensemble.SigmaNormEnsemble",
    "torch_uncertainty.models.classification.resnet",
    "torch_uncertainty.models.classification.wideresnet28x10",
    "torch_uncertainty_signorm.backbones.timm_vit",
    "torch_uncertainty_signorm.backbones.wideresnet28",
    "torch_uncertainty_signorm.backbones.bert_classifier",
    "torch_uncertainty_signorm.offline_assets.minilm_classifier",
})
#: The routine's other blocks: losses and batch formats.
COMPONENT_CLASS_PATHS = frozenset({
    "torch.nn.CrossEntropyLoss",
    "torch.nn.BCEWithLogitsLoss",
    "torch_uncertainty.transforms.RepeatTarget",
})
#: Classes and functions passed as argument values (the defaults jsonargparse writes out).
ARGUMENT_CLASS_PATHS = frozenset({
    "torch.nn.BatchNorm2d",
    "torch.nn.functional.relu",
})
ALLOWED_CLASS_PATHS = MODEL_CLASS_PATHS | COMPONENT_CLASS_PATHS | ARGUMENT_CLASS_PATHS

_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def _importable(name: str) -> bool:
    """Whether ``name`` reads as ``package.attribute`` of an installed package (nothing is run)."""
    if not _DOTTED_NAME.fullmatch(name):
        return False
    try:
        return importlib.util.find_spec(name.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _refuse(where: str, name: Any, allowed: frozenset[str]) -> ValueError:
    return ValueError(
        f"{where}={name!r} is not an allowed class path, so it is not imported; allowed: "
        f"{', '.join(sorted(allowed))} (torch_uncertainty_signorm.allowlist)."
    )


def check_spec(
    spec: Any, allowed: frozenset[str] = ALLOWED_CLASS_PATHS, where: str = "spec"
) -> None:
    """Raise naming the first ``class_path`` (or importable dotted string) outside ``allowed``.

    Walks a ``class_path``/``init_args`` tree (mappings, lists, strings) without importing
    anything, so that a file can only make jsonargparse build listed classes.

    Args:
        spec: The tree, e.g. a recipe's ``routine.init_args.model`` block.
        allowed: The class paths that may be named. Defaults to :data:`ALLOWED_CLASS_PATHS`.
        where: Name of ``spec`` in the error message.
    """
    if isinstance(spec, Mapping):
        if "class_path" in spec and spec["class_path"] not in allowed:
            raise _refuse(f"{where}.class_path", spec["class_path"], allowed)
        for key, value in spec.items():
            if key != "class_path":
                check_spec(value, allowed, f"{where}.{key}")
    elif isinstance(spec, (list, tuple)):
        for index, value in enumerate(spec):
            check_spec(value, allowed, f"{where}[{index}]")
    elif isinstance(spec, str) and spec not in allowed and _importable(spec):
        raise _refuse(where, spec, allowed)


def import_object(path: str, allowed: Collection[str] | None = None) -> Any:
    """The object at the dotted ``path`` (``package.module.name``): the one importer.

    Args:
        path: The dotted path.
        allowed: When given, the paths that may be imported; any other is refused before
            anything is imported.

    Raises:
        ValueError: If ``path`` is not in ``allowed``, or names nothing importable.
    """
    if allowed is not None and path not in allowed:
        raise _refuse("class_path", path, frozenset(allowed))
    module_name, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"class_path {path!r} cannot be imported ({error}).") from None


def instantiate_spec(spec: Mapping, base: type, where: str = "model") -> Any:
    """Build a checked ``class_path``/``init_args`` block with jsonargparse, as the command does.

    Args:
        spec: The block (a recipe's, or a checkpoint's hyper-parameter).
        base: The type it must build (a class path may name a function returning one).
        where: Its name, in error messages.

    Returns:
        The built object.
    """
    check_spec(spec, where=where)
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument(f"--{where}", type=base, required=True)
    config = parser.parse_object({where: dict(spec)})
    return parser.instantiate_classes(config)[where]
