"""An export's model block: checked against the registry, written as data, built (through
:func:`~signorm_lab.safety.class_blocks.build_class_block`, as a checkpoint's).

What each class may be named, and which of its arguments fetch weights, is read from
:mod:`signorm_lab.safety.model_registry`.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from torch import nn

from torch_uncertainty_signorm.signorm.ensemble import SigmaNormEnsemble
from torch_uncertainty_signorm.signorm.layer_selection import REGULARIZED_LAYER_PRESETS

from ..safety import allowlist, model_registry
from ..safety.class_blocks import build_class_block
from ..safety.export_spec import (
    CONFIG_CLASS_PATHS,
    ENSEMBLE_CLASS_PATHS,
    EXPORTABLE_CLASS_PATHS,
    check_ensemble_spec,
    registry_value,
)
from ..safety.plain_data import is_data, with_plain_values

__all__ = [
    "as_data",
    "build_model",
    "check_self_contained",
    "ensemble_from_spec",
    "portable",
]


def build_model(spec: Any, extra_class_paths: Iterable[str] = ()) -> Any:
    """Instantiate a model block as a recipe does, after :func:`check_ensemble_spec` accepted
    it, through the one builder of blocks read from files
    (:func:`~signorm_lab.safety.class_blocks.build_class_block`)."""
    extra = tuple(extra_class_paths)
    check_ensemble_spec(spec, extra)
    return build_class_block(spec, nn.Module, EXPORTABLE_CLASS_PATHS | frozenset(extra))


def as_data(node: Any, where: str = "model") -> Any:
    """``node`` (a parsed recipe block) as JSON data that the factories accept directly.

    Enums become their values (``ResNetStyle.CIFAR`` → ``"cifar"``), paths strings; an
    argument holding an object (``activation_fn``, ``normalization_layer``) is dropped when
    it is the factory's default and refused otherwise: config.json holds data only.
    """
    if isinstance(node, Mapping) and "class_path" in node:
        init_args = {**(node.get("init_args") or {}), **(node.get("dict_kwargs") or {})}
        parameters = inspect.signature(allowlist.import_object(node["class_path"])).parameters
        defaults = {key: p.default for key, p in parameters.items()}
        kept = {
            key: value
            for key, value in init_args.items()
            if is_data(with_plain_values(value))
            or isinstance(value, Mapping)
            or defaults.get(key) is not value
        }
        return {
            "class_path": node["class_path"],
            "init_args": {
                key: as_data(value, f"{where}.init_args.{key}") for key, value in kept.items()
            },
        }
    if isinstance(node, Mapping):
        return {str(key): as_data(value, f"{where}.{key}") for key, value in node.items()}
    if isinstance(node, (list, tuple)):
        return [as_data(value, f"{where}[{index}]") for index, value in enumerate(node)]
    if isinstance(node, enum.Enum):
        return as_data(node.value, where)
    if isinstance(node, Path):
        return str(node)
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise ValueError(
        f"{where}={node!r} cannot be exported: config.json holds data only (numbers, strings, "
        f"lists, mappings, class_path blocks); use the factory's default for this argument."
    )


def portable(node: Any) -> Any:
    """The architecture alone: every argument fetching weights from elsewhere replaced.

    Each class's weight sources (the registry's ``weight_sources``: the FineTune
    ``checkpoint``, ``pretrained_path``, torchvision ``weights``...) are dropped or set to the
    value building the architecture alone (``pretrained=False`` on the backbone factories; the
    σN-Ens ``pretrained`` conversion flag stays: it decides the parameter and buffer layout),
    and an argument the registry says an export stores (a ``bert_classifier``'s Hugging Face
    configuration) is computed, without weights, from where the model was built. A factory
    that loads weights and builds another class (the registry's ``exported_as``: FineTune's
    ``finetune_ensemble``) is written as that class, with its arguments
    (``signorm_ensemble``, ``pretrained=True``).
    """
    if isinstance(node, list):
        return [portable(value) for value in node]
    if not isinstance(node, Mapping):
        return node
    if "class_path" not in node:
        return {key: portable(value) for key, value in node.items()}
    class_path = node["class_path"]
    original = dict(node.get("init_args") or {})
    init_args = {key: portable(value) for key, value in original.items()}
    stored = registry_value(class_path, "stored_argument", None)
    if stored is not None and stored.name not in init_args:
        init_args[stored.name] = allowlist.import_object(stored.builder)(
            **{key: original[key] for key in stored.sources if key in original}
        )
    for key, value in registry_value(class_path, "weight_sources", {}).items():
        if value is None:
            init_args.pop(key, None)
        else:
            init_args[key] = value
    exported_as = registry_value(class_path, "exported_as", None)
    if exported_as is not None:
        class_path, init_args = exported_as[0], {**init_args, **exported_as[1]}
    return {"class_path": class_path, "init_args": init_args}


def check_self_contained(node: Any, where: str = "model") -> None:
    """Refuse an export's model block that would fetch anything or run patterns on loading.

    Weights come from the export's safetensors alone: no argument of
    :func:`~signorm_lab.safety.model_registry.fetching_arguments` (but a class's
    ``layout_flags``, the σN-Ens ``pretrained`` conversion flag) may ask for weights, and a
    class whose weight source defaults to fetching must set the registry's value
    (``pretrained: false``); an argument the registry says an export stores (a
    ``bert_classifier``'s Hugging Face ``config``) must be there (else it would be read from a
    directory or the hub); ``regularized_layers`` is a list of layer names (or a preset),
    never a pattern.
    """
    if isinstance(node, list):
        for index, item in enumerate(node):
            check_self_contained(item, f"{where}[{index}]")
        return
    if not isinstance(node, Mapping):
        return
    if "class_path" not in node:
        for key, item in node.items():
            check_self_contained(item, f"{where}.{key}")
        return
    init_args, class_path = node.get("init_args") or {}, node["class_path"]
    exported_as = registry_value(class_path, "exported_as", None)
    if exported_as is not None:
        raise ValueError(
            f"{where}.class_path={class_path!r} loads weights from elsewhere when built; an "
            f"export names {exported_as[0]} instead (the export command writes it)."
        )
    layout_flags = registry_value(class_path, "layout_flags", ())
    for key in model_registry.fetching_arguments():
        value = init_args.get(key)
        if key in layout_flags:
            if not isinstance(value, bool | None):
                raise ValueError(
                    f"{where}.init_args.{key}={value!r}; expected true or "
                    f"false (the σNorm conversion flag)."
                )
        elif value not in (None, False):
            raise ValueError(
                f"{where}.init_args.{key}={value!r:.200}: an export's weights are its own "
                f"safetensors files, so loading never fetches any; the export command writes "
                f"this block without {key} (or with {key}=false)."
            )
    for key, value in registry_value(class_path, "weight_sources", {}).items():
        if value is not None and init_args.get(key, not value) != value:
            raise ValueError(
                f"{where} ({class_path}) does not set {key}={json.dumps(value)}: left out, it "
                f"defaults to loading weights from elsewhere (the hub, a cache). An export's "
                f"weights are its own safetensors files; the export command writes "
                f"{key}={json.dumps(value)}."
            )
    stored = registry_value(class_path, "stored_argument", None)
    if stored is not None and not isinstance(init_args.get(stored.name), Mapping):
        raise ValueError(
            f"{where} ({class_path}) has no {stored.name}: loading would read "
            f"{stored.description} from a directory or the hub. Export it again "
            f"(export_ensemble stores {stored.description})."
        )
    settings = {f"{where}.init_args": init_args}
    config = init_args.get("config") if class_path in ENSEMBLE_CLASS_PATHS else None
    if isinstance(config, Mapping) and "class_path" in config:  # a recipe's config: block
        settings[f"{where}.init_args.config.init_args"] = config_block_settings(
            config, f"{where}.init_args.config"
        )
    elif isinstance(config, Mapping):
        settings[f"{where}.init_args.config"] = config
    for place, block in settings.items():
        layers = block.get("regularized_layers") if isinstance(block, Mapping) else None
        if (
            class_path in ENSEMBLE_CLASS_PATHS
            and isinstance(layers, str)
            and (layers not in REGULARIZED_LAYER_PRESETS)
        ):
            raise ValueError(
                f"{place}.regularized_layers={layers!r:.200} is a pattern; an export holds the "
                f"names of the regularized layers (a list) or a preset "
                f"({', '.join(REGULARIZED_LAYER_PRESETS)})."
            )
    for key, item in init_args.items():
        check_self_contained(item, f"{where}.init_args.{key}")


def ensemble_from_spec(spec: Any, extra_class_paths: Iterable[str]) -> SigmaNormEnsemble:
    """The architecture of ``spec``, checked first; its weights are left to the caller.

    A converted (``pretrained=True``) ensemble is built from scratch, then given the frozen
    magnitude, sign and shift buffers of the conversion: the conversion itself refuses an
    untrained backbone, and the values come from the export anyway.
    """
    extra = tuple(extra_class_paths)
    check_ensemble_spec(spec, extra)
    unconverted, converted = _from_scratch(spec)
    model = build_model(unconverted, extra)
    if not isinstance(model, SigmaNormEnsemble):
        raise TypeError(
            f"The model block builds a {type(model).__name__}, not a SigmaNormEnsemble; its "
            f"class_path must be {ENSEMBLE_CLASS_PATHS[0]} (got {spec.get('class_path')!r})."
        )
    if converted:
        for layer in model.signorm_layers().values():
            layer.load_pretrained_affine(None, None)
        model.config = dataclasses.replace(model.config, pretrained=True)
    return model


def _from_scratch(spec: Mapping) -> tuple[dict, bool]:
    """``spec`` with ``pretrained`` false wherever it is set (the keywords, a ``config:``
    block or mapping of settings), and whether it was true."""
    init_args = {**(spec.get("init_args") or {}), "pretrained": False}
    converted = (spec.get("init_args") or {}).get("pretrained") is True
    config = init_args.get("config")
    if isinstance(config, Mapping) and "class_path" in config:  # a recipe's config: block
        settings = config_block_settings(config, "model.init_args.config")
        converted |= settings.get("pretrained") is True
        init_args["config"] = {**config, "init_args": {**settings, "pretrained": False}}
    elif isinstance(config, Mapping):
        converted |= config.get("pretrained") is True
        init_args["config"] = {**config, "pretrained": False}
    return {**spec, "init_args": init_args}, converted


def config_block_settings(block: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """The settings of a recipe's ``config:`` block (``class_path``/``init_args``), refused
    unless it names the σN-Ens settings class."""
    if block["class_path"] not in CONFIG_CLASS_PATHS:
        raise ValueError(
            f"{where}.class_path={block['class_path']!r:.200} is not the σN-Ens settings class; "
            f"a config: block names {', '.join(sorted(CONFIG_CLASS_PATHS))} or is a plain "
            f"mapping of settings."
        )
    return block.get("init_args") or {}
