"""σNorm-Ensemble: M members sharing every backbone weight but their normalization layers."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ..members.heads import MemberHeads
from ..members.wrapper import (
    MemberWrapper,
    classifier_placement,
    find_classifier,
    member_major,
    remove_classifier,
)
from .config import SigmaNormConfig
from .conversion import convert_norm_layers, find_norm_layers, norms_at_initial_state
from .layer_selection import select_layers
from .layers import SigmaBatchNorm, SigmaLayerNorm, SigmaNorm
from .regularization import ImportanceSharingPenalty
from .regularization_guard import require_diversity_loss

__all__ = ["SigmaNormEnsemble", "signorm_ensemble"]

#: The settings' defaults, read from :class:`SigmaNormConfig` (their one source).
_DEFAULT = SigmaNormConfig

#: Backbone rows per evaluation pass on CPU with ``eval_chunk_size="auto"``: one pass over
#: all B·M rows allocates M× larger activations than a single model's pass over B inputs, which
#: glibc's allocator hands out as fresh pages on every pass once they exceed its mmap threshold;
#: fewer rows per pass cost more passes (see BENCHMARKS.md for the measured trade-off).
CPU_EVAL_CHUNK_ROWS = 32


def _split_batch(inputs: Tensor | Mapping[str, Any], size: int, batch_size: int) -> list:
    """``inputs`` split along the batch into parts of at most ``size`` inputs; a mapping's
    tensors with ``batch_size`` rows are split alike, its other values repeated in each part."""
    if isinstance(inputs, Tensor):
        return list(inputs.split(size))
    parts = [dict(inputs) for _ in range(0, batch_size, size)]
    for key, value in inputs.items():
        if isinstance(value, Tensor) and value.dim() > 0 and value.shape[0] == batch_size:
            for part, piece in zip(parts, value.split(size), strict=True):
                part[key] = piece
    return parts


#: The release that removes ``checkpoint=`` (deprecated in 0.2.0).
CHECKPOINT_REMOVED_IN = "0.3.0"
#: Where a single model's checkpoint is read since 0.2.0: the lab's FineTune factory.
FINETUNE_FACTORY = "signorm_lab.models.finetune.finetune_ensemble"


def _check_pretrained_state(model: nn.Module, norm_names: Sequence[str]) -> None:
    """``pretrained=True`` needs trained weights: norm layers all at their initial values
    (scale 1, shift 0, no BatchNorm statistics) mean that none were loaded."""
    name = type(model).__name__
    state = model.state_dict()
    if any(tensor.is_meta for tensor in state.values()):
        raise ValueError(
            f"pretrained=True needs the weights of {name}, which is on the meta device (no "
            f"values): materialise and load them first (model.to_empty(device=...), then "
            f"load_state_dict), or use pretrained=False to train from scratch."
        )
    if norms_at_initial_state(state, norm_names):
        raise ValueError(
            f"pretrained=True but every normalization layer of {name} is at its initial state "
            f"(scale 1, shift 0, no BatchNorm statistics): no pretrained weights were loaded. "
            f"Load them into the backbone first (model.load_state_dict(...)), build from a "
            f"single model's checkpoint with the lab's {FINETUNE_FACTORY} (its recipes take "
            f"--routine.init_args.model.init_args.checkpoint=path/to/single.ckpt), or use "
            f"pretrained=False to train from scratch."
        )


def _load_deprecated_checkpoint(model: nn.Module, checkpoint: str | Path, pretrained: bool) -> None:
    """``checkpoint=`` as in 0.1.0, with a ``FutureWarning``: loaded into ``model`` by the lab's
    FineTune loader, imported only here (the method reads no file itself)."""
    if not pretrained:
        raise ValueError(
            f"checkpoint={str(checkpoint)!r} needs pretrained=True: from-scratch σNorm would "
            f"discard the checkpoint's normalization layers."
        )
    warnings.warn(
        f"signorm_ensemble(..., checkpoint=...) is deprecated and will be removed in "
        f"{CHECKPOINT_REMOVED_IN}: the lab's {FINETUNE_FACTORY}(model, num_estimators, "
        f"checkpoint, ...) reads the single model's checkpoint (in a recipe: that class_path, "
        f"the same init_args), or load the weights into the backbone first.",
        FutureWarning,
        stacklevel=3,  # the constructor's caller
    )
    try:
        finetune = importlib.import_module(FINETUNE_FACTORY.rpartition(".")[0])
    except ModuleNotFoundError as error:
        if error.name is None or not error.name.startswith("signorm_lab"):
            raise
        raise ImportError(
            f"checkpoint={str(checkpoint)!r} is read by the lab: pip install signorm-lab (the "
            f"lab, in the repository's lab/ folder), or load the weights into the backbone first "
            f"and leave checkpoint unset."
        ) from None
    finetune.load_single_model(model, checkpoint)


class SigmaNormEnsemble(MemberWrapper):
    r"""Wrap a classifier into a σNorm-Ensemble of ``num_estimators`` members.

    Every normalization layer becomes a σNorm layer :math:`\sigma(\gamma_m) \odot
    \mathrm{norm}_m(x)` (own statistics and scale logits per member); every other weight is
    shared. The classifier is replaced by fresh per-member heads (an ordinary BatchNorm or
    LayerNorm with its own affine, then a linear layer: the paper's heads).
    The backbone is modified in place.

    Args:
        model: A classifier: TorchUncertainty ResNet/WideResNet, torchvision ResNet,
            timm model, or transformers sequence classifier.
        num_estimators: Number of members M.
        config: The settings below as one :class:`~torch_uncertainty_signorm.SigmaNormConfig`
            (or its ``to_dict()``), instead of keyword arguments; a keyword argument left at
            its default takes the config's value, and one differing from it is an error. The
            ensemble's settings are its :attr:`config` either way.
        num_classes: Classes of the member heads; defaults to the replaced classifier's.
        pretrained: ``True`` converts each norm layer so that every member reproduces the
            pretrained output (frozen magnitude, sign and shift), and refuses a backbone whose
            norm layers are all at their initial values (nothing pretrained was loaded);
            ``False`` builds from-scratch σNorm with :math:`\gamma \sim \mathcal{N}(0, 1)`
            and no shift.
        checkpoint: Deprecated, removed in 0.3.0 (it warns): a single model's checkpoint,
            loaded into ``model`` before the conversion by the lab (``pip install
            signorm-lab``), whose ``signorm_lab.models.finetune.finetune_ensemble`` builds
            FineTune now; this constructor reads no file. Requires ``pretrained=True``.
        regularized_layers: Layers the diversity regularizer acts on: a preset
            (``"all"``, ``"resnet18"``, ``"resnet50"``, ``"wideresnet28x10"``,
            ``"transformer"``), a regex matching whole layer names, or a list of names or
            name suffixes.
        tau: Softmax temperature :math:`\tau` of the regularizer, the diversity control, in
            :data:`~torch_uncertainty_signorm.signorm.regularization.TAU_RANGE`.
        diversity_strength: Regularization strength :math:`\lambda`. The default, 1e-2, is the
            from-scratch value: with ``pretrained=True`` give it (1e-4 measured for an Adam CNN
            fine-tune, where 1e-2 was the worst value tried; 1e-3 for an SGD transformer
            fine-tune; ``docs/settings.md``).
        scale_init_std: Standard deviation of the from-scratch scale logits.
        member_spread: Standard deviation of zero-sum per-member offsets added to the scale
            logits of the regularized layers (:meth:`SigmaNorm.spread_members`). An exact
            conversion starts every member at the same importances, where the regularizer's
            gradient is exactly zero; a spread gives it a gradient at step 0 while keeping the
            members' mean logit. ``0`` (default) keeps the conversion exact.
        head: Name of the classifier to replace; found automatically when ``None``.
        head_norm: Norm of the member heads: ``"batch"``, ``"layer"``, or ``"auto"``
            (``"layer"`` when the backbone's norms are LayerNorm/RMSNorm).
        head_scale_init: How the head norm's scale starts: ``"unit"`` (the paper's),
            ``"features"`` (the scale of its input, measured on the first training batch, so
            that the fresh head reads features of the backbone's own scale and the shared
            backbone receives a single model's gradient;
            :mod:`~torch_uncertainty_signorm.members.head_norm`), or ``"auto"``: ``"features"``
            with ``pretrained=True``, else ``"unit"``.
        expand_at: Where members split off: ``"input"``, a module name (work before it runs
            once per input), or ``"auto"`` (ResNet stem norm, ViT blocks, else input).
        eval_chunk_size: Backbone rows (M per input) per pass in evaluation mode: the batch
            runs in parts of ``max(1, eval_chunk_size // M)`` inputs, with the same logits as
            one pass. ``"auto"``: :data:`CPU_EVAL_CHUNK_ROWS` on CPU, one pass on other
            devices; ``None``: always one pass. Training, and models whose σBN layers use
            batch statistics in evaluation (``track_running_stats=False``), run one pass.

    Example:
        >>> from torch_uncertainty.models.classification import resnet
        >>> model = SigmaNormEnsemble(resnet(3, 10, 18, style="cifar"), num_estimators=4)
        >>> model(torch.randn(2, 3, 32, 32)).shape
        torch.Size([8, 10])
    """

    def __init__(
        self,
        model: nn.Module,
        num_estimators: int,
        config: SigmaNormConfig | None = None,
        *,
        num_classes: int | None = _DEFAULT.num_classes,
        pretrained: bool = _DEFAULT.pretrained,
        checkpoint: str | Path | None = None,
        regularized_layers: str | Sequence[str] = _DEFAULT.regularized_layers,
        tau: float = _DEFAULT.tau,
        diversity_strength: float = _DEFAULT.diversity_strength,
        scale_init_std: float = _DEFAULT.scale_init_std,
        member_spread: float = _DEFAULT.member_spread,
        head: str | None = _DEFAULT.head,
        head_norm: Literal["auto", "batch", "layer"] = _DEFAULT.head_norm,
        head_scale_init: Literal["auto", "unit", "features"] = _DEFAULT.head_scale_init,
        expand_at: str = _DEFAULT.expand_at,
        eval_chunk_size: int | Literal["auto"] | None = _DEFAULT.eval_chunk_size,
    ) -> None:
        config = SigmaNormConfig.resolve(
            config,
            {
                "num_classes": num_classes,
                "pretrained": pretrained,
                "regularized_layers": regularized_layers,
                "tau": tau,
                "diversity_strength": diversity_strength,
                "scale_init_std": scale_init_std,
                "member_spread": member_spread,
                "head": head,
                "head_norm": head_norm,
                "head_scale_init": head_scale_init,
                "expand_at": expand_at,
                "eval_chunk_size": eval_chunk_size,
            },
        )
        super().__init__(num_estimators, config)
        self.eval_chunk_size = config.eval_chunk_size
        self.member_spread = config.member_spread
        self.penalty = ImportanceSharingPenalty(config.tau, config.diversity_strength)
        # Validate everything before modifying the user's model in place.
        norm_names = find_norm_layers(model)
        self.signorm_layer_names = norm_names
        self.regularized_layer_names = select_layers(norm_names, config.regularized_layers)
        classifier, in_features, replaced_classes = find_classifier(model, config.head)
        expand_at = self.expansion_point(model, config.expand_at, norm_names)
        pretrained = config.pretrained
        if checkpoint is not None:
            _load_deprecated_checkpoint(model, checkpoint, pretrained)
        if pretrained:
            _check_pretrained_state(model, norm_names)
        placement = classifier_placement(model, classifier)

        converted = convert_norm_layers(
            model,
            num_estimators,
            pretrained=pretrained,
            scale_init_std=config.scale_init_std,
            member_spread=config.member_spread,
            spread_layers=self.regularized_layer_names,
        )
        remove_classifier(model, classifier)
        self.set_backbone(model, expand_at, norm_names)
        head_norm = config.head_norm
        if head_norm == "auto":
            is_layer_norm = any(isinstance(m, SigmaLayerNorm) for m in converted.values())
            head_norm = "layer" if is_layer_norm else "batch"
        scale_init = config.head_scale_init
        if scale_init == "auto":
            scale_init = "features" if pretrained else "unit"
        self.heads = MemberHeads(
            in_features,
            config.num_classes or replaced_classes,
            num_estimators,
            norm=head_norm,
            scale_init=scale_init,
        ).to(**placement)
        require_diversity_loss(self)  # never trains silently without its regularizer

    def signorm_layers(self, regularized_only: bool = False) -> dict[str, SigmaNorm]:
        """The backbone's σNorm layers by name (member heads excluded)."""
        return self.member_layers(
            self.regularized_layer_names if regularized_only else self.signorm_layer_names
        )

    def importances(self, regularized_only: bool = False) -> list[Tensor]:
        """Per-layer member importances σ(γ), each ``(M, F_ℓ)``."""
        return [layer.importance() for layer in self.signorm_layers(regularized_only).values()]

    @property
    def tau(self) -> float:
        """τ now: the penalty's, which the τ controller may have moved (``config.tau`` is where
        the run started). Exports and checkpoints record this value."""
        return self.penalty.tau

    def set_tau(self, tau: float) -> None:
        """Set the regularizer's temperature (:meth:`ImportanceSharingPenalty.set_tau`)."""
        self.penalty.set_tau(tau)

    def diversity_loss(self) -> Tensor:
        r"""The regularizer :math:`\lambda \mathcal{L}_{div}` over the regularized layers."""
        return self.penalty(self.importances(regularized_only=True))

    def scale_logits(self) -> list[nn.Parameter]:
        """Every σNorm scale-logit parameter (the backbone's), for their own param group.

        σNorm scales train with a larger learning rate (100× in the paper) and no weight
        decay.
        """
        return [m.scale_logits for m in self.modules() if isinstance(m, SigmaNorm)]

    def eval_inputs_per_pass(self, inputs: Tensor | Mapping[str, Tensor]) -> int | None:
        """Inputs per backbone pass for ``inputs``; ``None`` when they run in one pass."""
        if self.training or self.eval_chunk_size is None:
            return None
        rows = self.eval_chunk_size
        if rows == "auto":
            tensor = (
                inputs
                if isinstance(inputs, Tensor)
                else next((v for v in inputs.values() if isinstance(v, Tensor)), None)
            )
            if tensor is None or tensor.device.type != "cpu":
                return None
            rows = CPU_EVAL_CHUNK_ROWS
        if any(
            isinstance(layer, SigmaBatchNorm) and not layer.track_running_stats
            for layer in self.modules()
        ):
            return None  # batch statistics in evaluation: parts would change the output
        return max(1, rows // self.num_estimators)

    def _member_major_passes(
        self, inputs: Tensor | Mapping[str, Tensor], member_major_rows: Callable[[Any], Tensor]
    ) -> Tensor:
        """``member_major_rows(inputs)`` (member-major ``(M·B, ...)``), evaluated in parts of
        :meth:`eval_inputs_per_pass` inputs and put back together in member-major order."""
        batch_size = self.check_inputs(inputs)
        per_pass = self.eval_inputs_per_pass(inputs)
        if per_pass is None or batch_size <= per_pass:
            return member_major_rows(inputs)
        parts = [
            member_major_rows(part).unflatten(0, (self.num_estimators, -1))
            for part in _split_batch(inputs, per_pass, batch_size)
        ]
        return torch.cat(parts, dim=1).flatten(0, 1)

    def forward_features(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Members' penultimate features ``(M·B, D)``, member-major, from ``(B, ...)`` inputs."""
        return self._member_major_passes(
            inputs, lambda part: member_major(self.backbone_rows(part), self.num_estimators)
        )

    def forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Member-major logits ``(M·B, C)`` from ``(B, ...)`` inputs.

        The heads read the backbone's batch-major features and write member-major logits;
        in evaluation mode the batch may run in parts (``eval_chunk_size``).
        """
        return self._member_major_passes(inputs, super().forward)


def signorm_ensemble(
    model: nn.Module,
    num_estimators: int,
    config: SigmaNormConfig | None = None,
    *,
    num_classes: int | None = _DEFAULT.num_classes,
    pretrained: bool = _DEFAULT.pretrained,
    checkpoint: str | Path | None = None,
    regularized_layers: str | Sequence[str] = _DEFAULT.regularized_layers,
    tau: float = _DEFAULT.tau,
    diversity_strength: float = _DEFAULT.diversity_strength,
    scale_init_std: float = _DEFAULT.scale_init_std,
    member_spread: float = _DEFAULT.member_spread,
    head: str | None = _DEFAULT.head,
    head_norm: Literal["auto", "batch", "layer"] = _DEFAULT.head_norm,
    head_scale_init: Literal["auto", "unit", "features"] = _DEFAULT.head_scale_init,
    expand_at: str = _DEFAULT.expand_at,
    eval_chunk_size: int | Literal["auto"] | None = _DEFAULT.eval_chunk_size,
) -> SigmaNormEnsemble:
    """Turn ``model`` (a classifier, modified in place) into a σNorm-Ensemble of
    ``num_estimators`` members: implicit members that share every weight but their norm
    layers' scales, pushed apart by a regularizer of temperature ``tau`` and strength
    ``diversity_strength``.

    TorchUncertainty's lowercase factory name (as its ``packed_resnet``), usable as a recipe's
    ``class_path``; the arguments are :class:`SigmaNormEnsemble`'s, documented there.

    Example:
        >>> from torch_uncertainty.models.classification import resnet
        >>> model = signorm_ensemble(resnet(3, 10, 18, style="cifar"), 4, tau=0.5)
    """
    return SigmaNormEnsemble(**locals())  # every argument, by name
