"""What an export's model block may name, checked before anything is imported: the exportable
models of :mod:`~torch_uncertainty_signorm.safety.model_registry`, and a σNorm-Ensemble at the
top (the threat model: :mod:`torch_uncertainty_signorm.safety`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import allowlist, model_registry

__all__ = [
    "CONFIG_CLASS_PATHS", "ENSEMBLE_CLASS_PATHS", "EXPORTABLE_CLASS_PATHS", "check_ensemble_spec",
    "registry_value",
]

#: The only ``class_path`` values an export's model block may name: the registry's exportable
#: models (:func:`torch_uncertainty_signorm.safety.model_registry.class_paths`): σN-Ens, i.e.
#: ``SigmaNormEnsemble`` or ``signorm_ensemble`` (its settings possibly in a ``SigmaNormConfig``
#: block), around a TorchUncertainty ``resnet``/``wideresnet28x10``, this package's
#: ``wideresnet28``/``timm_vit``/
#: ``bert_classifier``/``minilm_classifier``, or a torchvision ResNet. The baselines
#: (``film_ensemble``, ``lora_ensemble``, TorchUncertainty's packed, masked, batched, MIMO and
#: deep ensembles) are not σNorm-Ensembles, so they are not exportable.
EXPORTABLE_CLASS_PATHS = model_registry.class_paths(exportable=True)
_ENSEMBLE_ENTRIES = model_registry.model_entries("ensemble")
ENSEMBLE_CLASS_PATHS = tuple(path for entry in _ENSEMBLE_ENTRIES for path in entry.class_paths)
#: The σN-Ens settings class a model block's ``config:`` may name.
CONFIG_CLASS_PATHS = frozenset(
    path for entry in model_registry.model_entries("config") for path in entry.class_paths
)
_ENSEMBLE_NAMES = f"{_ENSEMBLE_ENTRIES[0].class_path} (or {_ENSEMBLE_ENTRIES[1].class_path})"


def registry_value(class_path: str, attribute: str, default: Any) -> Any:
    """The registry entry's ``attribute`` for ``class_path``; ``default`` for an unregistered
    class."""
    entry = model_registry.model_entry(class_path)
    return default if entry is None else getattr(entry, attribute)


def check_ensemble_spec(spec: Any, extra_class_paths: Iterable[str] = ()) -> None:
    """Refuse a model spec that is not a σNorm-Ensemble of exportable classes, before importing
    any.

    Every ``class_path`` (and importable dotted string) at any depth must be one of
    :data:`EXPORTABLE_CLASS_PATHS` or ``extra_class_paths``
    (:func:`torch_uncertainty_signorm.safety.allowlist.check_class_paths`); the top-level block must
    then build a σNorm-Ensemble.

    Args:
        spec: A ``class_path``/``init_args`` block (``config.json``'s ``model``).
        extra_class_paths: Exact class paths trusted on top of :data:`EXPORTABLE_CLASS_PATHS`.

    Raises:
        ValueError: Naming the refused entry (its place in the spec and its class path)
            and listing what is allowed.
    """
    extra = tuple(extra_class_paths)
    if not all(isinstance(path, str) and "." in path for path in extra):
        raise ValueError(f"extra_class_paths must be exact dotted paths "
                         f"('package.module.factory'), got {extra!r}.")
    if not isinstance(spec, Mapping) or "class_path" not in spec:
        raise ValueError(f"The model spec must be a class_path/init_args mapping (a recipe's "
                         f"model block), got {spec!r:.200}.")
    allowlist.check_class_paths(spec, EXPORTABLE_CLASS_PATHS | frozenset(extra), where="model")
    if spec["class_path"] not in (*ENSEMBLE_CLASS_PATHS, *extra):
        raise ValueError(f"model.class_path={spec['class_path']!r} is no σNorm-Ensemble; an "
                         f"export holds {_ENSEMBLE_NAMES}.")
