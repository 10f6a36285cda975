"""σN-Ens FineTune: a trained single model's checkpoint, loaded into its backbone and converted
into a σNorm-Ensemble whose members each reproduce it.

The lab reads the file and builds the model (as timm's ``build_model_with_cfg`` loads pretrained
weights around a constructor that reads none): :func:`finetune_ensemble` is the recipes'
``class_path``, and the method's ``signorm_ensemble`` only converts the weights it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from torch_uncertainty_signorm.signorm.config import SigmaNormConfig
from torch_uncertainty_signorm.signorm.conversion import find_norm_layers, norms_at_initial_state
from torch_uncertainty_signorm.signorm.ensemble import SigmaNormEnsemble, signorm_ensemble

from ..safety.checkpoints import read_backbone_checkpoint

__all__ = ["CHECKPOINT_OPTION", "finetune_ensemble", "load_single_model"]

#: The command-line option of a FineTune recipe giving the single model's checkpoint.
CHECKPOINT_OPTION = "--routine.init_args.model.init_args.checkpoint"


def load_single_model(model: nn.Module, checkpoint: str | Path) -> None:
    """Load the trained single model's ``checkpoint`` into ``model``, strictly.

    The file is read as untrusted data (a local regular file, ``weights_only=True``, checked to
    fit ``model`` key for key and shape for shape:
    :func:`~signorm_lab.safety.checkpoints.read_backbone_checkpoint`); one whose normalization
    layers are all at their initial values holds no trained model and is refused. ``model`` is
    left untouched on any refusal.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If it is unreadable, does not fit ``model``, or holds an untrained model,
            naming the file.
    """
    state = read_backbone_checkpoint(model, checkpoint)
    if norms_at_initial_state(state, find_norm_layers(model)):
        raise ValueError(
            f"checkpoint='{checkpoint}' holds an untrained {type(model).__name__}: every "
            f"normalization layer is at its initial state (scale 1, shift 0, no BatchNorm "
            f"statistics). Pass the checkpoint of the trained single model."
        )
    model.load_state_dict(state)


def finetune_ensemble(
    model: nn.Module,
    num_estimators: int,
    checkpoint: str | Path | None = None,
    config: SigmaNormConfig | Mapping[str, Any] | None = None,
    **settings: Any,
) -> SigmaNormEnsemble:
    """σN-Ens FineTune: ``model`` given the trained single model's weights from ``checkpoint``
    (:func:`load_single_model`), then converted into ``num_estimators`` members that each
    reproduce it (``signorm_ensemble(..., pretrained=True)``).

    Usable as a recipe's ``class_path`` (``experiments/*_signorm_finetune.yaml``); the file is
    given on the command line with ``--routine.init_args.model.init_args.checkpoint=PATH``.

    Args:
        model: The single model's architecture (the recipe's backbone block).
        num_estimators: Number of members M.
        checkpoint: The single model's checkpoint: a TorchUncertainty/Lightning ``.ckpt``, a
            torch state dict or a ``.safetensors`` file. Required.
        config: The σN-Ens settings as one object or mapping, as ``signorm_ensemble`` takes them.
        **settings: ``signorm_ensemble``'s other keyword arguments (``tau``,
            ``regularized_layers``...); ``pretrained`` is ``True`` (the default, and the only
            valid value).

    Raises:
        ValueError: If ``checkpoint`` is missing (naming the recipe's option), a setting is
            invalid (checked before the file is read; ``pretrained=False`` included), or the
            file is refused (:func:`load_single_model`).
        FileNotFoundError: If the file does not exist.

    Example:
        >>> model = finetune_ensemble(resnet(3, 10, 18, style="cifar"), 4, "single.ckpt", tau=0.1)
    """
    if checkpoint is None:
        raise ValueError(
            f"finetune_ensemble needs the trained single model's checkpoint (.ckpt, .pt or "
            f".safetensors): give checkpoint=path/to/single.ckpt (in a recipe: "
            f"{CHECKPOINT_OPTION}=path/to/single.ckpt)."
        )
    if (pretrained := settings.pop("pretrained", True)) is not True:
        raise ValueError(
            f"finetune_ensemble converts a trained model: pretrained must be True (its default), "
            f"got {pretrained!r}; to train σN-Ens from scratch, use signorm_ensemble(..., "
            f"pretrained=False)."
        )
    SigmaNormConfig.resolve(config, {"pretrained": True, **settings})  # before reading the file
    load_single_model(model, checkpoint)
    return signorm_ensemble(model, num_estimators, config, pretrained=True, **settings)
