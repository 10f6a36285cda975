r"""Export a trained σNorm-Ensemble as safetensors, and each member as a plain model.

An export directory holds ``ensemble.safetensors`` (every weight and buffer), ``config.json``
(the number of members and the model block that rebuilds the architecture) and, with
``--members``, ``member_<m>.safetensors`` for each member ``m``::

    python -m torch_uncertainty_signorm.export --config recipe.yaml \
        --ckpt_path "logs/.../checkpoints/epoch=…-val_acc=….ckpt" --output exported/ [--members]

The command reads the recipe with the ``torch-uncertainty`` command's own parser
(:func:`~torch_uncertainty_signorm.recipe_parsing.parse_recipe`; further arguments such as
``--routine.init_args.model.init_args.num_estimators=2`` override it as on that command), so
it builds the model the command trained.

**Loading runs no code of the export.** Weights are safetensors (no pickle); ``config.json``
is JSON whose ``class_path`` entries must each be one of :data:`EXPORTABLE_CLASS_PATHS` (plus
the exact ``extra_class_paths`` a caller trusts), checked over the whole spec before
anything is imported or built.

**Exports are self-contained**: ``config.json`` describes the architecture alone, so loading
needs neither the FineTune ``checkpoint``, nor ``pretrained_path``, nor a download; the
weights come from the safetensors files (a ``bert_classifier`` stores its Hugging Face
configuration, see :func:`~torch_uncertainty_signorm.backbones.bert_config`), and the
regularised layers are stored by name. Loading refuses a model block asking for weights
from elsewhere, and checks the architecture against the safetensors headers before
allocating anything (:mod:`~torch_uncertainty_signorm.export_files`): an untrusted export can
neither run code nor make the loader fetch, hang or exhaust memory.

A *member model* (:func:`member_model`, i.e. :meth:`SigmaNormEnsemble.member_model
<torch_uncertainty_signorm.member_wrapper.MemberWrapper.member_model>`) is member ``m``
alone, built from ordinary layers: every σNorm layer is folded back into the normalisation
layer it came from (its ``to_plain``), with member ``m``'s statistics and its effective
affine,

.. math::
    w = k\,s \odot \sigma(\gamma_m), \qquad b = \beta \ (0 \text{ from scratch}),

(σBN → ``BatchNorm``, σLN → ``LayerNorm``, σRMSNorm → ``RMSNorm``, channels-first σLN →
timm's ``LayerNorm2d``, σGN → ``GroupNorm``), and member ``m``'s head becomes its norm
followed by an ``nn.Linear``. Its output equals the ensemble's rows of member ``m``.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from . import allowlist
from ._files import follow_umask
from .atomic_files import replaced_atomically
from .checkpoints import load_backbone_checkpoint
from .checks import check_integer
from .ensemble import SigmaNormEnsemble
from .export_files import (
    check_finite,
    check_fits_header,
    export_file,
    read_json,
    safetensors_header,
)
from .layer_selection import REGULARIZED_LAYER_PRESETS
from .layers.registry import fold_signorm
from .member_wrapper import MemberModel

__all__ = [
    "EXPORTABLE_CLASS_PATHS",
    "SigmaNormMember",
    "build_model",
    "check_spec",
    "export_ensemble",
    "fold_signorm",
    "load_ensemble",
    "load_member",
    "main",
    "member_model",
]

CONFIG_NAME, WEIGHTS_NAME = "config.json", "ensemble.safetensors"
FORMAT = "torch-uncertainty-signorm/ensemble"
_MEMBER_FILE = re.compile(r"member_(\d+)\.safetensors")

_ENSEMBLES = tuple(f"torch_uncertainty_signorm{module}.{name}" for module in ("", ".ensemble")
                   for name in ("signorm_ensemble", "SigmaNormEnsemble"))
_BACKBONE_FACTORIES = ("torch_uncertainty_signorm.backbones.timm_vit",
                       "torch_uncertainty_signorm.backbones.bert_classifier",
                       "torch_uncertainty_signorm.offline_assets.minilm_classifier")
_BERT, _MINILM = _BACKBONE_FACTORIES[1], _BACKBONE_FACTORIES[2]
_TORCHVISION_RESNETS = tuple(
    f"torchvision.models{module}.{name}" for module in ("", ".resnet")
    for name in ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
                 "wide_resnet50_2", "wide_resnet101_2")
)
#: Arguments that fetch weights from elsewhere, per factory, and the value building the
#: architecture alone (``None``: argument dropped); an export's weights are its own.
_WEIGHT_SOURCES: dict[str, dict[str, Any]] = {
    **dict.fromkeys(_ENSEMBLES, {"checkpoint": None}),
    **dict.fromkeys(_BACKBONE_FACTORIES, {"pretrained": False, "pretrained_path": None}),
    **dict.fromkeys(_TORCHVISION_RESNETS, {"weights": None, "pretrained": None}),
}
#: Arguments that would fetch weights when an export is loaded: never accepted there (but the
#: σN-Ens ``pretrained`` conversion flag), whatever the class.
_FETCHING_ARGUMENTS = ("pretrained", "pretrained_path", "weights", "checkpoint", "checkpoint_path",
                       "pretrained_cfg", "pretrained_cfg_overlay", "cache_dir")
#: The only ``class_path`` values an export's model block may name: the models of
#: :data:`~torch_uncertainty_signorm.allowlist.MODEL_CLASS_PATHS` (σN-Ens, i.e. the
#: ``signorm_ensemble`` factory or its class, around a TorchUncertainty
#: ``resnet``/``wideresnet28x10``, this package's ``timm_vit``/``bert_classifier``/
#: ``minilm_classifier``) and the torchvision ResNets. The baselines (``film_ensemble``,
#: ``lora_ensemble``, TorchUncertainty's packed, masked, batched, MIMO and deep ensembles) are
#: not σNorm-Ensembles, so they are not exportable.
EXPORTABLE_CLASS_PATHS = allowlist.MODEL_CLASS_PATHS | frozenset(_TORCHVISION_RESNETS)


# --------------------------------------------------------------------------- architecture
def check_spec(spec: Any, extra_class_paths: Iterable[str] = ()) -> None:
    """Refuse a model spec naming anything but allow-listed classes, before importing any.

    Every ``class_path`` (and importable dotted string) at any depth is checked by
    :func:`torch_uncertainty_signorm.allowlist.check_spec`; the top-level block must then
    build a σNorm-Ensemble.

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
    allowlist.check_spec(spec, EXPORTABLE_CLASS_PATHS | frozenset(extra), where="model")
    if spec["class_path"] not in (*_ENSEMBLES, *extra):
        raise ValueError(f"model.class_path={spec['class_path']!r} is no σNorm-Ensemble; an "
                         f"export holds {_ENSEMBLES[0]} (or {_ENSEMBLES[1]}).")


def _build(node: Any) -> Any:
    """Instantiate ``class_path`` blocks (nested blocks first); other values pass through."""
    if isinstance(node, Mapping) and "class_path" in node:
        init_args = {key: _build(value) for key, value in (node.get("init_args") or {}).items()}
        return allowlist.import_object(node["class_path"])(**init_args)
    if isinstance(node, Mapping):
        return {key: _build(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_build(value) for value in node]
    return node


def build_model(spec: Any, extra_class_paths: Iterable[str] = ()) -> Any:
    """Instantiate a model block as a recipe does, after :func:`check_spec` accepted it."""
    check_spec(spec, extra_class_paths)
    return _build(spec)


def _is_data(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_is_data(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(key, str) and _is_data(item) for key, item in value.items())
    return value is None or isinstance(value, (bool, int, float, str, Path, enum.Enum))


def _as_data(node: Any, where: str = "model") -> Any:
    """``node`` (a parsed recipe block) as JSON data that the factories accept directly.

    Enums become their values (``ResNetStyle.CIFAR`` → ``"cifar"``), paths strings; an
    argument holding an object (``activation_fn``, ``normalization_layer``) is dropped when
    it is the factory's default and refused otherwise: config.json holds data only.
    """
    if isinstance(node, Mapping) and "class_path" in node:
        init_args = {**(node.get("init_args") or {}), **(node.get("dict_kwargs") or {})}
        parameters = inspect.signature(allowlist.import_object(node["class_path"])).parameters
        defaults = {key: p.default for key, p in parameters.items()}
        kept = {key: value for key, value in init_args.items()
                if _is_data(value) or isinstance(value, Mapping) or defaults.get(key) is not value}
        return {"class_path": node["class_path"],
                "init_args": {key: _as_data(value, f"{where}.init_args.{key}")
                              for key, value in kept.items()}}
    if isinstance(node, Mapping):
        return {str(key): _as_data(value, f"{where}.{key}") for key, value in node.items()}
    if isinstance(node, (list, tuple)):
        return [_as_data(value, f"{where}[{index}]") for index, value in enumerate(node)]
    if isinstance(node, enum.Enum):
        return _as_data(node.value, where)
    if isinstance(node, Path):
        return str(node)
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    raise ValueError(
        f"{where}={node!r} cannot be exported: config.json holds data only (numbers, strings, "
        f"lists, mappings, class_path blocks); use the factory's default for this argument."
    )


def _portable(node: Any) -> Any:
    """The architecture alone: every argument fetching weights from elsewhere replaced.

    Drops the FineTune ``checkpoint``, ``pretrained_path`` and torchvision ``weights``, sets
    ``pretrained=False`` on the backbone factories (the σN-Ens ``pretrained`` conversion flag
    stays: it decides the parameter and buffer layout) and stores a ``bert_classifier``'s
    Hugging Face configuration (read, without weights, from where it was built).
    """
    if isinstance(node, list):
        return [_portable(value) for value in node]
    if not isinstance(node, Mapping):
        return node
    if "class_path" not in node:
        return {key: _portable(value) for key, value in node.items()}
    original = dict(node.get("init_args") or {})
    init_args = {key: _portable(value) for key, value in original.items()}
    if node["class_path"] == _BERT and "config" not in init_args:
        from .backbones import bert_config

        init_args["config"] = bert_config(**{key: original[key] for key in (
            "model_name", "num_classes", "pretrained_path") if key in original})
    for key, value in _WEIGHT_SOURCES.get(node["class_path"], {}).items():
        if value is None:
            init_args.pop(key, None)
        else:
            init_args[key] = value
    return {"class_path": node["class_path"], "init_args": init_args}


def _ensemble_from_spec(spec: Any, extra_class_paths: Iterable[str]) -> SigmaNormEnsemble:
    """The architecture of ``spec``, checked first; its weights are left to the caller.

    A converted (``pretrained=True``) ensemble is built from scratch, then given the frozen
    magnitude, sign and shift buffers of the conversion: the conversion itself refuses an
    untrained backbone, and the values come from the export anyway.
    """
    check_spec(spec, extra_class_paths)
    converted = spec["init_args"].get("pretrained", False)
    model = _build({**spec, "init_args": {**spec["init_args"], "pretrained": False}})
    if not isinstance(model, SigmaNormEnsemble):
        raise TypeError(
            f"The model block builds a {type(model).__name__}, not a SigmaNormEnsemble; its "
            f"class_path must be {_ENSEMBLES[0]} (got {spec.get('class_path')!r})."
        )
    if converted:
        for layer in model.signorm_layers().values():
            layer.load_pretrained_affine(None, None)
    return model


# --------------------------------------------------------------------------- ensemble
def export_ensemble(
    model: SigmaNormEnsemble,
    spec: Mapping,
    directory: str | Path,
    members: bool = False,
    extra_class_paths: Iterable[str] = (),
    overwrite: bool = False,
) -> Path:
    """Write ``model`` to ``directory``: safetensors weights and a JSON architecture.

    Each file is written whole or not at all, ``config.json`` last.

    Args:
        model: The trained ensemble.
        spec: The ``class_path``/``init_args`` block that built it (a recipe's
            ``routine.init_args.model``); stored architecture-only (no ``checkpoint``,
            ``pretrained_path`` or download, see the module docs), with the names of the
            regularised layers instead of the pattern that selected them.
        directory: Output directory (created).
        members: Also write every member as a plain model (:func:`member_model`).
        extra_class_paths: Exact class paths trusted on top of
            :data:`EXPORTABLE_CLASS_PATHS` (loading will need them too).
        overwrite: Replace the files of a directory that is not empty; otherwise such a
            directory is an error (nothing is written).

    Returns:
        The directory.
    """
    if not isinstance(model, SigmaNormEnsemble):
        raise TypeError(f"export_ensemble exports a SigmaNormEnsemble, got {type(model).__name__}.")
    check_spec(spec, extra_class_paths)
    spec = _portable(_as_data(spec))
    spec["init_args"]["regularized_layers"] = list(model.regularized_layer_names)
    directory = _output_directory(directory, overwrite)
    directory.mkdir(parents=True, exist_ok=True)
    models = {WEIGHTS_NAME: model}
    if members:
        models |= {f"member_{m}.safetensors": member_model(model, m)
                   for m in range(model.num_estimators)}
    for name, module in models.items():
        with replaced_atomically(directory / name) as partial:
            save_model(module, str(partial))
            follow_umask(partial)  # safetensors writes 0600; config.json follows umask
    config = {"format": FORMAT, "version": 2, "num_estimators": model.num_estimators,
              "model": spec, "members": sorted(set(models) - {WEIGHTS_NAME}, key=_member_index)}
    with replaced_atomically(directory / CONFIG_NAME) as partial:
        partial.write_text(json.dumps(config, indent=2))
    return directory


def _output_directory(directory: str | Path, overwrite: bool) -> Path:
    """``directory``, refused when it holds anything and ``overwrite`` is false."""
    directory = Path(directory)
    if not overwrite and directory.is_dir() and (present := sorted(
        path.name for path in directory.iterdir()
    )):
        raise FileExistsError(
            f"'{directory}' is not empty ({', '.join(present[:5])}"
            f"{', ...' if len(present) > 5 else ''}): nothing was written. Choose a new "
            f"directory, or pass overwrite=True (--overwrite) to replace its export."
        )
    return directory


def _member_index(name: str) -> int:
    return int(_MEMBER_FILE.fullmatch(name).group(1))


def _read_config(directory: Path) -> dict:
    """``config.json`` of an export, with the keys loading reads checked."""
    path = export_file(directory, CONFIG_NAME)
    config = read_json(path)
    if config.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} has format {config.get('format')!r}, expected {FORMAT!r}.")
    missing = [key for key in ("num_estimators", "model", "members") if key not in config]
    if missing:
        raise ValueError(f"{str(path)!r} lacks {', '.join(map(repr, missing))}; an export's "
                         f"config.json holds format, num_estimators, model and members.")
    members = config["members"]
    if not isinstance(members, list) or not all(
        isinstance(name, str) and _MEMBER_FILE.fullmatch(name) for name in members
    ):
        raise ValueError(f"{str(path)!r} has members={members!r:.200}; expected a list of "
                         f"'member_<m>.safetensors' file names.")
    check_integer(f"{path}: num_estimators", config["num_estimators"])
    return config


def _check_self_contained(node: Any, where: str = "model") -> None:
    """Refuse an export's model block that would fetch anything or run patterns on loading.

    Weights come from the export's safetensors alone: no argument of
    :data:`_FETCHING_ARGUMENTS` (but the σN-Ens ``pretrained`` conversion flag) may ask for
    weights, and a backbone factory whose default fetches must say ``pretrained: false``; a
    ``bert_classifier`` must carry its Hugging Face ``config`` (else it would be read
    from a directory or the hub); ``regularized_layers`` is a list of layer names (or a preset),
    never a pattern.
    """
    if isinstance(node, list):
        for index, item in enumerate(node):
            _check_self_contained(item, f"{where}[{index}]")
        return
    if not isinstance(node, Mapping):
        return
    if "class_path" not in node:
        for key, item in node.items():
            _check_self_contained(item, f"{where}.{key}")
        return
    init_args, class_path = node.get("init_args") or {}, node["class_path"]
    for key in _FETCHING_ARGUMENTS:
        value = init_args.get(key)
        if key == "pretrained" and class_path in _ENSEMBLES:
            if not isinstance(value, bool | None):
                raise ValueError(f"{where}.init_args.pretrained={value!r}; expected true or "
                                 f"false (the σNorm conversion flag).")
        elif value not in (None, False):
            raise ValueError(
                f"{where}.init_args.{key}={value!r:.200}: an export's weights are its own "
                f"safetensors files, so loading never fetches any; the export command writes "
                f"this block without {key} (or with {key}=false)."
            )
    for key, value in _WEIGHT_SOURCES.get(class_path, {}).items():
        if value is not None and init_args.get(key, not value) != value:
            raise ValueError(
                f"{where} ({class_path}) does not set {key}={json.dumps(value)}: left out, it "
                f"defaults to loading weights from elsewhere (the hub, a cache). An export's "
                f"weights are its own safetensors files; the export command writes "
                f"{key}={json.dumps(value)}."
            )
    if class_path == _BERT and not isinstance(init_args.get("config"), Mapping):
        raise ValueError(
            f"{where} ({_BERT}) has no config: loading would read the Hugging Face "
            f"configuration from a directory or the hub. Export it again (export_ensemble "
            f"stores the configuration)."
        )
    layers = init_args.get("regularized_layers")
    if class_path in _ENSEMBLES and isinstance(layers, str) and (
        layers not in REGULARIZED_LAYER_PRESETS
    ):
        raise ValueError(
            f"{where}.init_args.regularized_layers={layers!r:.200} is a pattern; an export "
            f"holds the names of the regularised layers (a list) or a preset "
            f"({', '.join(REGULARIZED_LAYER_PRESETS)})."
        )
    for key, item in init_args.items():
        _check_self_contained(item, f"{where}.init_args.{key}")


def _check_sizes(spec: Mapping, header: Mapping[str, tuple], path: Path) -> None:
    """The sizes building would spend time on, against the weights, before building: the
    number of members (``heads.weight`` is ``(M, C, D)``) and a BERT's number of layers."""
    members = spec["init_args"].get("num_estimators")
    if "heads.weight" in header and header["heads.weight"][1][:1] != (members,):
        raise ValueError(f"model.init_args.num_estimators={members!r}, but '{path}' holds the "
                         f"heads of {header['heads.weight'][1][0]} members (heads.weight "
                         f"{header['heads.weight'][1]}). Nothing was built.")
    backbone = spec["init_args"].get("model")
    config = backbone.get("init_args", {}).get("config") if isinstance(backbone, Mapping) else None
    if isinstance(config, Mapping) and "num_hidden_layers" in config:
        layers = {match.group(1) for key in header
                  if (match := re.search(r"\.encoder\.layer\.(\d+)\.", key))}
        if config["num_hidden_layers"] != len(layers):
            raise ValueError(f"model.init_args.model.init_args.config.num_hidden_layers="
                             f"{config['num_hidden_layers']!r}, but '{path}' holds {len(layers)} "
                             f"encoder layers. Nothing was built.")


def _load_checked(build: Callable[[], nn.Module], path: Path) -> nn.Module:
    """``build()`` with the weights of ``path``: built first on the meta device (no memory) and
    checked against the file's header, then built and loaded strictly, then checked finite."""
    header = safetensors_header(path)
    with torch.device("meta"):
        check_fits_header(build().state_dict(), header, path)
    model = build()
    load_model(model, str(path), strict=True)
    check_finite(model.state_dict(), path)
    return model.eval()


def _export_spec(directory: Path, extra_class_paths: Iterable[str]) -> dict:
    """The model block of the export in ``directory``, checked before anything is built."""
    config = _read_config(directory)
    spec = config["model"]
    check_spec(spec, extra_class_paths)
    _check_self_contained(spec)
    declared = (spec.get("init_args") or {}).get("num_estimators")
    if declared != config["num_estimators"]:
        raise ValueError(f"'{directory / CONFIG_NAME}' has num_estimators="
                         f"{config['num_estimators']!r} but model.init_args.num_estimators="
                         f"{declared!r}; they must agree.")
    weights = export_file(directory, WEIGHTS_NAME)
    _check_sizes(spec, safetensors_header(weights), weights)
    return config


def load_ensemble(
    directory: str | Path, extra_class_paths: Iterable[str] = ()
) -> SigmaNormEnsemble:
    """Rebuild an exported ensemble (in eval mode) with exactly the exported weights.

    Nothing outside ``directory`` is read and no code of the export runs: ``config.json`` is
    checked against the allow-list (:func:`check_spec`) before anything is imported, and
    must be self-contained (no argument fetching weights); the architecture is checked
    against the safetensors header (names, shapes, dtypes) before anything is allocated, and
    the loaded weights must be finite.
    """
    directory = Path(directory)
    spec = _export_spec(directory, extra_class_paths)["model"]
    return _load_checked(lambda: _ensemble_from_spec(spec, extra_class_paths),
                         export_file(directory, WEIGHTS_NAME))


# --------------------------------------------------------------------------- members
#: A member of a σNorm-Ensemble as a plain model (the class every member wrapper builds).
SigmaNormMember = MemberModel


def member_model(ensemble: SigmaNormEnsemble, member: int) -> MemberModel:
    """Member ``member`` of ``ensemble`` as a plain model (see the module docs):
    ``ensemble.member_model(member)``."""
    return ensemble.member_model(member)


def load_member(
    directory: str | Path, member: int, extra_class_paths: Iterable[str] = ()
) -> SigmaNormMember:
    """Rebuild exported member ``member`` (in eval mode), as safely as :func:`load_ensemble`."""
    directory = Path(directory)
    config = _export_spec(directory, extra_class_paths)
    name = f"member_{member}.safetensors"
    if name not in config["members"]:
        raise ValueError(
            f"member {member!r} was not exported to {directory}; exported members: "
            f"{config['members'] or 'none (export with members=True / --members)'}."
        )
    return _load_checked(
        lambda: member_model(_ensemble_from_spec(config["model"], extra_class_paths), member),
        export_file(directory, name),
    )


# --------------------------------------------------------------------------- command
def _recipe_model_block(recipe: Path, overrides: Sequence[str], allowed: Sequence[str]) -> dict:
    """The recipe's model block as the command parses it, allow-listed before and after."""
    from .recipe_bases import recipe_chain
    from .recipe_parsing import parse_recipe

    if not recipe.is_file():
        raise FileNotFoundError(f"--config {str(recipe)!r} does not exist.")
    for path, raw_block in recipe_chain(recipe):  # the recipe and each of its base files
        for key in ("routine", "init_args", "model"):
            raw_block = raw_block.get(key) if isinstance(raw_block, Mapping) else None
        if isinstance(raw_block, Mapping):  # refuse before the parser imports any class path
            try:
                check_spec(raw_block, allowed)
            except ValueError as error:
                raise ValueError(f"{path}: {error}") from None
    routine = parse_recipe(recipe, overrides).get("routine")
    block = routine.get("init_args", {}).get("model") if routine is not None else None
    if block is None or "class_path" not in block:
        raise ValueError(
            f"--config {str(recipe)!r} has no routine.init_args.model block with a class_path; "
            f"pass a recipe of experiments/ or the config.yaml saved next to the run's logs."
        )
    block = block.as_dict()
    check_spec(block, allowed)
    return block


def main(argv: Sequence[str] | None = None) -> Path:
    """``python -m torch_uncertainty_signorm.export``: checkpoint + recipe → export directory."""
    parser = argparse.ArgumentParser(
        prog="python -m torch_uncertainty_signorm.export", description=__doc__.split("\n")[0],
        epilog="Other arguments override the recipe as on the torch-uncertainty command, e.g. "
               "--routine.init_args.model.init_args.num_estimators=2.", allow_abbrev=False,
    )
    parser.add_argument("--config", type=Path, required=True,
                        help="The recipe (or the run's saved config.yaml) that built the model.")
    parser.add_argument("--ckpt_path", type=Path, required=True,
                        help="The Lightning checkpoint of the trained routine.")
    parser.add_argument("--output", type=Path, required=True, help="The export directory.")
    parser.add_argument("--members", action="store_true",
                        help="Also export each member as a plain model.")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace the export in an --output directory that is not empty.")
    parser.add_argument("--allow", action="append", default=[], metavar="CLASS_PATH",
                        help="Trust this exact class path too (loading needs it as well).")
    args, overrides = parser.parse_known_args(argv)
    _output_directory(args.output, args.overwrite)  # before any work
    # A run's saved config.yaml spells out defaults such as `activation_fn: torch.nn.functional.relu`;
    # they are accepted here and dropped from the export when they are the default (_as_data).
    block = _recipe_model_block(
        args.config, overrides, [*args.allow, *sorted(allowlist.ARGUMENT_CLASS_PATHS)]
    )
    spec = _portable(_as_data(block))
    model = _ensemble_from_spec(spec, args.allow)
    try:
        load_backbone_checkpoint(model, args.ckpt_path)
    except ValueError as error:
        raise ValueError(
            f"{error} For export, --ckpt_path must come from a run of --config "
            f"{str(args.config)!r} (same backbone and num_estimators)."
        ) from error
    directory = export_ensemble(model.eval(), spec, args.output, members=args.members,
                                extra_class_paths=args.allow, overwrite=args.overwrite)
    print(f"Exported {model.num_estimators} members to {directory}")
    return directory


if __name__ == "__main__":
    main()
