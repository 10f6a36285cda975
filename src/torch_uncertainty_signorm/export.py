r"""Export a trained σNorm-Ensemble as safetensors, and each member as a plain model.

An export directory holds ``ensemble.safetensors`` (every weight and buffer), ``config.json``
(the recipe's ``model:`` block, which rebuilds the architecture, and the number of members)
and, with ``--members``, ``member_<m>.safetensors`` for each member ``m``. No pickle is
involved: weights are safetensors, the architecture is a class path with its arguments::

    python -m torch_uncertainty_signorm.export --config recipe.yaml \
        --ckpt_path logs/.../best.ckpt --output exported/ [--members]

A *member model* (:func:`member_model`) is member ``m`` alone, built from ordinary layers:
every σNorm layer is folded back into the normalisation layer it came from, with member
``m``'s statistics and its effective affine,

.. math::
    w = k\,s \odot \sigma(\gamma_m), \qquad b = \beta \ (0 \text{ from scratch}),

(σBN → ``BatchNorm``, σLN → ``LayerNorm``, σRMSNorm → ``RMSNorm``, channels-first σLN →
timm's ``LayerNorm2d``, σGN → ``GroupNorm``), and member ``m``'s head becomes its norm
followed by an ``nn.Linear``. Its output equals the ensemble's rows of member ``m``.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import load_model, save_model
from torch import Tensor, nn

from .checkpoints import load_backbone_checkpoint
from .ensemble import SigmaNormEnsemble, _features
from .layers.member_heads import MemberHeads
from .layers.registry import fold_signorm
from .layers.signorm import _SigmaNorm

__all__ = [
    "SigmaNormMember",
    "build_model",
    "export_ensemble",
    "fold_signorm",
    "load_ensemble",
    "load_member",
    "main",
    "member_model",
]

CONFIG_NAME, WEIGHTS_NAME = "config.json", "ensemble.safetensors"
FORMAT = "torch-uncertainty-signorm/ensemble"
#: Packages whose classes a ``config.json`` may name: a config is data, not arbitrary code.
TRUSTED_PACKAGES = ("torch", "torch_uncertainty", "torch_uncertainty_signorm", "timm",
                    "torchvision", "transformers")


# --------------------------------------------------------------------------- architecture
def _import(class_path: str, trusted: Sequence[str]) -> Any:
    if not isinstance(class_path, str) or "." not in class_path:
        raise ValueError(f"class_path must be a dotted 'package.module.Name', got {class_path!r}.")
    if class_path.split(".")[0] not in trusted:
        raise ValueError(
            f"class_path {class_path!r} is outside the trusted packages {', '.join(trusted)}; "
            f"pass trusted=(..., {class_path.split('.')[0]!r}) if you trust this config."
        )
    module_name, _, name = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"class_path {class_path!r} cannot be imported ({error}).") from None


def build_model(spec: Any, trusted: Sequence[str] = TRUSTED_PACKAGES) -> Any:
    """Instantiate a ``class_path``/``init_args`` block (nested blocks first), as a recipe does."""
    if isinstance(spec, Mapping) and "class_path" in spec:
        target = _import(spec["class_path"], trusted)
        init_args = spec.get("init_args") or {}
        return target(**{key: build_model(value, trusted) for key, value in init_args.items()})
    if isinstance(spec, Mapping):
        return {key: build_model(value, trusted) for key, value in spec.items()}
    if isinstance(spec, list):
        return [build_model(value, trusted) for value in spec]
    return spec


def _architecture_only(spec: dict) -> dict:
    """``spec`` without what loads weights (``checkpoint``): they come from the export."""
    spec = copy.deepcopy(dict(spec))
    spec["init_args"] = {k: v for k, v in (spec.get("init_args") or {}).items()
                         if k != "checkpoint"}
    return spec


def _ensemble_from_spec(spec: dict, trusted: Sequence[str]) -> SigmaNormEnsemble:
    model = build_model(_architecture_only(spec), trusted)
    if not isinstance(model, SigmaNormEnsemble):
        raise TypeError(
            f"The model block builds a {type(model).__name__}, not a SigmaNormEnsemble; its "
            f"class_path must be torch_uncertainty_signorm.signorm_ensemble (got "
            f"{spec.get('class_path')!r})."
        )
    return model


# --------------------------------------------------------------------------- ensemble
def export_ensemble(
    model: SigmaNormEnsemble, spec: Mapping, directory: str | Path, members: bool = False
) -> Path:
    """Write ``model`` to ``directory``: safetensors weights and a JSON architecture.

    Args:
        model: The trained ensemble.
        spec: The ``class_path``/``init_args`` block that built it (a recipe's
            ``routine.init_args.model``); ``checkpoint`` entries are dropped.
        directory: Output directory (created).
        members: Also write every member as a plain model (:func:`member_model`).

    Returns:
        The directory.
    """
    if not isinstance(model, SigmaNormEnsemble):
        raise TypeError(f"export_ensemble exports a SigmaNormEnsemble, got {type(model).__name__}.")
    if not isinstance(spec, Mapping) or "class_path" not in spec:
        raise ValueError(
            f"spec must be a class_path/init_args mapping (a recipe's model block), got {spec!r}."
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_model(model, str(directory / WEIGHTS_NAME))
    member_files = []
    if members:
        for m in range(model.num_estimators):
            member_files.append(f"member_{m}.safetensors")
            save_model(member_model(model, m), str(directory / member_files[-1]))
    config = {"format": FORMAT, "version": 1, "num_estimators": model.num_estimators,
              "model": _architecture_only(spec), "members": member_files}
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
    directory: str | Path, trusted: Sequence[str] = TRUSTED_PACKAGES
) -> SigmaNormEnsemble:
    """Rebuild an exported ensemble (in eval mode) with exactly the exported weights."""
    directory = Path(directory)
    config = _read_config(directory)
    model = _ensemble_from_spec(config["model"], trusted)
    load_model(model, str(directory / WEIGHTS_NAME), strict=True)
    return model.eval()


# --------------------------------------------------------------------------- members
class SigmaNormMember(nn.Module):
    """One member of a σNorm-Ensemble as a plain model: the backbone, then its head.

    Built by :func:`member_model`; holds only ordinary layers, so it runs, trains and exports
    (ONNX, TorchScript) like the single model it came from.
    """

    def __init__(self, backbone: nn.Module, head: nn.Sequential) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Logits ``(B, C)`` from inputs ``(B, ...)`` (or a tokenizer's mapping)."""
        output = self.backbone(**inputs) if isinstance(inputs, Mapping) else self.backbone(inputs)
        return self.head(_features(output))


def member_model(ensemble: SigmaNormEnsemble, member: int) -> SigmaNormMember:
    """Member ``member`` of ``ensemble`` as a :class:`SigmaNormMember` (see the module docs)."""
    if isinstance(member, bool) or not isinstance(member, int) or not (
        0 <= member < ensemble.num_estimators
    ):
        raise ValueError(
            f"member must be an integer in 0..{ensemble.num_estimators - 1} "
            f"(num_estimators={ensemble.num_estimators}), got {member!r}."
        )
    backbone = copy.deepcopy(ensemble.backbone)
    for module in backbone.modules():  # drop the member expansion: one member, no repeat
        for key, hook in list(module._forward_pre_hooks.items()):
            if getattr(hook, "__func__", None) is SigmaNormEnsemble._expand_first_argument:
                del module._forward_pre_hooks[key]
    for name, layer in list(backbone.named_modules()):
        if isinstance(layer, _SigmaNorm):
            parent_name, _, child = name.rpartition(".")
            setattr(backbone.get_submodule(parent_name), child, fold_signorm(layer, member))
    heads: MemberHeads = ensemble.heads
    linear = nn.Linear(heads.weight.shape[-1], heads.weight.shape[1])
    with torch.no_grad():
        linear.weight.copy_(heads.weight[member])
        linear.bias.copy_(heads.bias[member])
    head = nn.Sequential(fold_signorm(heads.norm, member), linear.to(heads.weight.device))
    return SigmaNormMember(backbone, head).train(ensemble.training)


def load_member(
    directory: str | Path, member: int, trusted: Sequence[str] = TRUSTED_PACKAGES
) -> SigmaNormMember:
    """Rebuild exported member ``member`` (in eval mode) from an export directory."""
    directory = Path(directory)
    config = _read_config(directory)
    name = f"member_{member}.safetensors"
    if name not in config["members"]:
        raise ValueError(
            f"member {member!r} was not exported to {directory}; exported members: "
            f"{config['members'] or 'none (export with members=True / --members)'}."
        )
    model = member_model(_ensemble_from_spec(config["model"], trusted), member)
    load_model(model, str(directory / name), strict=True)
    return model.eval()


# --------------------------------------------------------------------------- command
def _model_block(recipe: Path) -> dict:
    if not recipe.is_file():
        raise FileNotFoundError(f"--config {str(recipe)!r} does not exist.")
    config = yaml.safe_load(recipe.read_text())
    for path in (("routine", "init_args", "model"), ("model", "init_args", "model")):
        block: Any = config
        for key in path:
            block = block.get(key) if isinstance(block, Mapping) else None
        if isinstance(block, Mapping) and "class_path" in block:
            return dict(block)
    raise ValueError(
        f"--config {str(recipe)!r} has no routine.init_args.model block with a class_path; "
        f"pass a recipe of experiments/ or the config.yaml saved next to the run's logs."
    )


def main(argv: Sequence[str] | None = None) -> Path:
    """``python -m torch_uncertainty_signorm.export``: checkpoint + recipe → export directory."""
    parser = argparse.ArgumentParser(
        prog="python -m torch_uncertainty_signorm.export", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--config", type=Path, required=True,
                        help="The recipe (or the run's saved config.yaml) that built the model.")
    parser.add_argument("--ckpt_path", type=Path, required=True,
                        help="The Lightning checkpoint of the trained routine.")
    parser.add_argument("--output", type=Path, required=True, help="The export directory.")
    parser.add_argument("--members", action="store_true",
                        help="Also export each member as a plain model.")
    args = parser.parse_args(argv)
    spec = _model_block(args.config)
    model = _ensemble_from_spec(spec, TRUSTED_PACKAGES)
    try:
        load_backbone_checkpoint(model, args.ckpt_path)
    except ValueError as error:
        raise ValueError(
            f"{error} For export, --ckpt_path must come from a run of --config "
            f"{str(args.config)!r} (same backbone and num_estimators)."
        ) from error
    directory = export_ensemble(model.eval(), spec, args.output, members=args.members)
    print(f"Exported {model.num_estimators} members to {directory}")
    return directory


if __name__ == "__main__":
    main()
