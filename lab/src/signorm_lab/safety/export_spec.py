"""What an export's model block may name, checked before anything is imported: the exportable
models of :mod:`~signorm_lab.safety.model_registry`, and a σNorm-Ensemble at the
top (the threat model: :mod:`signorm_lab.safety`)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from . import allowlist, model_registry

__all__ = [
    "CONFIG_CLASS_PATHS",
    "ENSEMBLE_CLASS_PATHS",
    "EXPORTABLE_CLASS_PATHS",
    "MAX_LAYERS",
    "MAX_STACKED_LAYERS",
    "check_ensemble_spec",
    "check_layer_counts",
    "registry_value",
]

#: The only ``class_path`` values an export's model block may name: the registry's exportable
#: models (:func:`signorm_lab.safety.model_registry.class_paths`): σN-Ens, i.e.
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
    (:func:`signorm_lab.safety.allowlist.check_class_paths`); the top-level block must
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
        raise ValueError(
            f"extra_class_paths must be exact dotted paths "
            f"('package.module.factory'), got {extra!r}."
        )
    if not isinstance(spec, Mapping) or "class_path" not in spec:
        raise ValueError(
            f"The model spec must be a class_path/init_args mapping (a recipe's "
            f"model block), got {spec!r:.200}."
        )
    allowlist.check_class_paths(spec, EXPORTABLE_CLASS_PATHS | frozenset(extra), where="model")
    check_layer_counts(spec, "model")
    if spec["class_path"] not in (*ENSEMBLE_CLASS_PATHS, *extra):
        raise ValueError(
            f"model.class_path={spec['class_path']!r} is no σNorm-Ensemble; an "
            f"export holds {_ENSEMBLE_NAMES}."
        )


#: A model's configuration may repeat one layer at most this many times (BERT-large: 24,
#: GPT-2 XL: 48), and all its stacks together (BART's encoder and decoder, ALBERT's groups of
#: inner groups: their product, which bounds what is allocated) at most
#: :data:`MAX_STACKED_LAYERS` times: building then takes seconds, even on the meta device
#: where the parameters are counted before the real build.
MAX_LAYERS, MAX_STACKED_LAYERS = 128, 1024
#: The keys of a backbone's configuration counting repeated layers, groups or blocks, whatever
#: the architecture: ``num_hidden_layers``, ``encoder_layers``, ``decoder_layers``,
#: ``num_decoder_layers``, ``n_layer``, ``num_hidden_groups``, ``inner_group_num``,
#: ``block_sizes``, ``depth``...
_LAYER_COUNT = re.compile(
    r".*(layers?|groups?|group_num|blocks?|block_sizes|depths?)", re.IGNORECASE
)


def check_layer_counts(spec: Any, where: str = "model") -> None:
    """Refuse a configuration that repeats layers more than :data:`MAX_LAYERS` times in one
    count, or :data:`MAX_STACKED_LAYERS` times all counts multiplied, before anything is built.

    Every ``config`` mapping of ``spec`` (a Hugging Face configuration as data, any
    ``model_type``) is read: each integer (or list of integers, summed) under a key naming
    layers, groups or blocks (:data:`_LAYER_COUNT`).

    Raises:
        ValueError: Naming the key, its value and the bound.
    """
    stack: list[tuple[Any, str]] = [(spec, where)]
    while stack:
        node, place = stack.pop()
        if isinstance(node, Mapping):
            if isinstance(node.get("config"), Mapping):
                _check_config_layers(node["config"], f"{place}.config")
            stack.extend((value, f"{place}.{key}") for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, f"{place}[{index}]") for index, value in enumerate(node))


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(item, int) and not isinstance(item, bool) for item in value)
    ):
        return sum(value)
    return None


def _check_config_layers(config: Mapping, where: str) -> None:
    for key, value in config.items():  # a configuration nested in another (text_config)
        if isinstance(value, Mapping):
            _check_config_layers(value, f"{where}.{key}")
    counts = {
        str(key): count
        for key, value in config.items()
        if _LAYER_COUNT.fullmatch(str(key)) and (count := _count(value)) is not None
    }
    for key, count in counts.items():
        if not 0 <= count <= MAX_LAYERS:
            raise ValueError(
                f"{where}.{key}={config[key]!r} repeats a layer {count} times "
                f"(valid: 0 to {MAX_LAYERS}); building it would take minutes: "
                f"refused before anything is built."
            )
    stacked = math.prod(max(count, 1) for count in counts.values())
    if stacked > MAX_STACKED_LAYERS:
        named = ", ".join(f"{key}={count}" for key, count in counts.items())
        raise ValueError(
            f"{where} stacks {stacked} layers ({named}; at most "
            f"{MAX_STACKED_LAYERS} all counts multiplied); building it would take "
            f"minutes: refused before anything is built."
        )
