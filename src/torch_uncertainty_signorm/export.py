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
configuration, see :func:`~torch_uncertainty_signorm.backbones.bert_config`).

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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from safetensors.torch import load_model, save_model

from . import allowlist
from ._files import follow_umask
from .checkpoints import load_backbone_checkpoint
from .ensemble import SigmaNormEnsemble
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

_ENSEMBLES = tuple(f"torch_uncertainty_signorm{module}.{name}" for module in ("", ".ensemble")
                   for name in ("signorm_ensemble", "SigmaNormEnsemble"))
_BACKBONE_FACTORIES = ("torch_uncertainty_signorm.backbones.timm_vit",
                       "torch_uncertainty_signorm.backbones.bert_classifier",
                       "torch_uncertainty_signorm.offline_assets.minilm_classifier")
_BERT = _BACKBONE_FACTORIES[1]
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
    **dict.fromkeys(_TORCHVISION_RESNETS, {"weights": None}),
}
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
    spec = _portable(spec)
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
) -> Path:
    """Write ``model`` to ``directory``: safetensors weights and a JSON architecture.

    Args:
        model: The trained ensemble.
        spec: The ``class_path``/``init_args`` block that built it (a recipe's
            ``routine.init_args.model``); stored architecture-only (no ``checkpoint``,
            ``pretrained_path`` or download, see the module docs).
        directory: Output directory (created).
        members: Also write every member as a plain model (:func:`member_model`).
        extra_class_paths: Exact class paths trusted on top of
            :data:`EXPORTABLE_CLASS_PATHS` (loading will need them too).

    Returns:
        The directory.
    """
    if not isinstance(model, SigmaNormEnsemble):
        raise TypeError(f"export_ensemble exports a SigmaNormEnsemble, got {type(model).__name__}.")
    check_spec(spec, extra_class_paths)
    spec = _portable(_as_data(spec))
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_model(model, str(directory / WEIGHTS_NAME))
    follow_umask(directory / WEIGHTS_NAME)  # safetensors writes 0600; config.json follows umask
    member_files = []
    if members:
        for m in range(model.num_estimators):
            member_files.append(f"member_{m}.safetensors")
            save_model(member_model(model, m), str(directory / member_files[-1]))
            follow_umask(directory / member_files[-1])
    config = {"format": FORMAT, "version": 2, "num_estimators": model.num_estimators,
              "model": spec, "members": member_files}
    (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2))
    return directory


def _read_config(directory: Path) -> dict:
    path = directory / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} does not exist: {directory} is no σN-Ens export.")
    config = json.loads(path.read_text())
    if config.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} has format {config.get('format')!r}, expected {FORMAT!r}.")
    return config


def load_ensemble(
    directory: str | Path, extra_class_paths: Iterable[str] = ()
) -> SigmaNormEnsemble:
    """Rebuild an exported ensemble (in eval mode) with exactly the exported weights.

    ``config.json`` is checked against the allow-list (:func:`check_spec`) before anything
    is imported, and rebuilt architecture-only: nothing outside ``directory`` is read.
    """
    directory = Path(directory)
    model = _ensemble_from_spec(_read_config(directory)["model"], extra_class_paths)
    load_model(model, str(directory / WEIGHTS_NAME), strict=True)
    return model.eval()


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
    config = _read_config(directory)
    name = f"member_{member}.safetensors"
    if name not in config["members"]:
        raise ValueError(
            f"member {member!r} was not exported to {directory}; exported members: "
            f"{config['members'] or 'none (export with members=True / --members)'}."
        )
    model = member_model(_ensemble_from_spec(config["model"], extra_class_paths), member)
    load_model(model, str(directory / name), strict=True)
    return model.eval()


# --------------------------------------------------------------------------- command
def _recipe_model_block(recipe: Path, overrides: Sequence[str], allowed: Sequence[str]) -> dict:
    """The recipe's model block as the command parses it, allow-listed before and after."""
    from .recipe_parsing import parse_recipe

    if not recipe.is_file():
        raise FileNotFoundError(f"--config {str(recipe)!r} does not exist.")
    raw_block = yaml.safe_load(recipe.read_text())
    for key in ("routine", "init_args", "model"):
        raw_block = raw_block.get(key) if isinstance(raw_block, Mapping) else None
    if isinstance(raw_block, Mapping):  # refuse before the parser imports any class path
        check_spec(raw_block, allowed)
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
    parser.add_argument("--allow", action="append", default=[], metavar="CLASS_PATH",
                        help="Trust this exact class path too (loading needs it as well).")
    args, overrides = parser.parse_known_args(argv)
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
                                extra_class_paths=args.allow)
    print(f"Exported {model.num_estimators} members to {directory}")
    return directory


if __name__ == "__main__":
    main()
