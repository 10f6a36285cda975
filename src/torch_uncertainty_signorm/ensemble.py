"""σNorm-Ensemble: M members sharing every backbone weight but their normalisation layers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from torch import Tensor, nn

from .checkpoints import read_backbone_checkpoint
from .conversion import convert_norm_layers, find_norm_layers, norms_at_initial_state
from .layer_selection import select_layers
from .layers.member_heads import MemberHeads
from .layers.signorm import SigmaLayerNorm, _SigmaNorm
from .regularization import ImportanceSharingPenalty

__all__ = ["SigmaNormEnsemble", "signorm_ensemble"]

#: Classifier attribute names tried, in order, when ``head`` is not given
#: (``model.classifier``: a transformers model inside ``backbones.SequenceClassifier``).
_HEAD_NAMES = ("linear", "fc", "classifier", "head", "score", "model.classifier")


def repeat_members(inputs: Any, num_estimators: int) -> Any:
    """Repeat a ``(B, ...)`` tensor, or every tensor of a mapping, into member-major ``(M·B, ...)``."""
    if isinstance(inputs, Tensor):
        return inputs.repeat(num_estimators, *([1] * (inputs.dim() - 1)))
    if isinstance(inputs, Mapping):
        return {k: repeat_members(v, num_estimators) for k, v in inputs.items()}
    return inputs


def _batch_size(inputs: Any) -> int:
    if isinstance(inputs, Tensor):
        return inputs.shape[0]
    if isinstance(inputs, Mapping):
        for value in inputs.values():
            if isinstance(value, Tensor):
                return value.shape[0]
    raise TypeError(
        f"SigmaNormEnsemble takes a tensor or a mapping of tensors (as tokenizers return), "
        f"got {type(inputs).__name__}."
    )


def _find_classifier(model: nn.Module, head: str | None) -> tuple[str | None, int, int]:
    """Locate the classifier to replace: ``(name or None for timm, in_features, classes)``."""
    if head is None and hasattr(model, "reset_classifier") and hasattr(model, "num_features"):
        in_features = getattr(model, "head_hidden_size", model.num_features)
        return None, in_features, model.num_classes  # timm: the model drops its own head
    names = (head,) if head is not None else _HEAD_NAMES
    for name in names:
        try:
            classifier = model.get_submodule(name)
        except AttributeError:
            continue
        if isinstance(classifier, nn.Linear):
            return name, classifier.in_features, classifier.out_features
    tried = f"head={head!r}" if head is not None else f"any of {', '.join(_HEAD_NAMES)}"
    raise ValueError(
        f"Cannot find the classifier of {type(model).__name__}: {tried} is not an nn.Linear "
        f"submodule. Pass head='<name of the final nn.Linear>'."
    )


def _remove_classifier(model: nn.Module, name: str | None) -> None:
    """Replace the classifier by an identity so that the backbone returns its features."""
    if name is None:
        model.reset_classifier(0)
        return
    parent_name, _, child_name = name.rpartition(".")
    setattr(model.get_submodule(parent_name), child_name, nn.Identity())


def _placement(model: nn.Module, classifier: str | None) -> dict:
    """Device and dtype of the classifier being replaced (else the backbone's first weight)."""
    head = model.get_classifier() if classifier is None else model.get_submodule(classifier)
    weight = getattr(head, "weight", None)
    if not isinstance(weight, Tensor):
        weight = next(model.parameters(), None)
    return {} if weight is None else {"device": weight.device, "dtype": weight.dtype}


def _check_pretrained_state(
    model: nn.Module, state: Mapping[str, Tensor], norm_names: Sequence[str], checkpoint: Any
) -> None:
    """``pretrained=True`` needs trained weights: norm layers all at their initial values
    (scale 1, shift 0, no BatchNorm statistics) mean that none were loaded."""
    name = type(model).__name__
    if any(tensor.is_meta for tensor in state.values()):
        raise ValueError(
            f"pretrained=True needs the weights of {name}, which is on the meta device (no "
            f"values): materialise and load them first (model.to_empty(device=...), then "
            f"load_state_dict), or use pretrained=False to train from scratch."
        )
    if not norms_at_initial_state(state, norm_names):
        return
    if checkpoint is not None:
        raise ValueError(
            f"checkpoint='{checkpoint}' holds an untrained {name}: every normalisation layer is "
            f"at its initial state (scale 1, shift 0, no BatchNorm statistics). Pass the "
            f"checkpoint of the trained single model."
        )
    raise ValueError(
        f"pretrained=True but every normalisation layer of {name} is at its initial state "
        f"(scale 1, shift 0, no BatchNorm statistics): no pretrained weights were loaded. Pass "
        f"checkpoint=<the single model's .ckpt, .pt or .safetensors> (in a recipe: "
        f"--routine.init_args.model.init_args.checkpoint=path/to/single.ckpt), load weights "
        f"into the backbone first, or use pretrained=False to train from scratch."
    )


def _first_convolution_dims(model: nn.Module) -> int | None:
    """Dimensions of a batch for the first convolution (4 for Conv2d), if the model has one."""
    for module in model.modules():
        if isinstance(module, nn.modules.conv._ConvNd):
            return len(module.kernel_size) + 2
    return None


def _features(output: Any) -> Tensor:
    """Penultimate features from a backbone output (tensor, HF ModelOutput or tuple)."""
    if hasattr(output, "logits"):
        output = output.logits
    elif isinstance(output, (tuple, list)):
        output = output[0]
    return output


def _auto_expansion_point(model: nn.Module, norm_names: Sequence[str]) -> str:
    """Where the members can be split off without a residual mixing shapes.

    ResNet stems (TorchUncertainty, torchvision) feed the stem convolution into ``bn1``
    only; a timm ViT's patch and position embeddings feed ``blocks`` only. Anything else
    expands at the input.
    """
    first = norm_names[0]
    if first == "bn1" and isinstance(getattr(model, "conv1", None), nn.Conv2d):
        return "bn1"
    if (
        first.startswith("blocks.")
        and hasattr(model, "patch_embed")
        and isinstance(getattr(model, "blocks", None), nn.Sequential)
    ):
        return "blocks"
    return "input"


class MemberExpansion(nn.Module):
    """Base of the member wrappers: one backbone pass over member-major ``(M·B, ...)`` rows.

    Members split off at ``expand_at``: a forward pre-hook repeats that module's input M
    times, so the work before it runs once per input; ``"input"`` repeats the inputs.
    Subclasses set ``num_estimators`` and call :meth:`_set_backbone`.
    """

    num_estimators: int

    def _set_backbone(self, model: nn.Module, expand_at: str) -> None:
        self.backbone = model
        self.expand_at = expand_at
        if expand_at != "input":
            model.get_submodule(expand_at).register_forward_pre_hook(self._expand_first_argument)

    def _expand_first_argument(self, module: nn.Module, args: tuple) -> tuple:
        return (repeat_members(args[0], self.num_estimators), *args[1:])

    def _call_backbone(self, inputs: Any) -> Any:
        """The backbone's output on the members' rows, from ``(B, ...)`` inputs."""
        if self.expand_at == "input":
            inputs = repeat_members(inputs, self.num_estimators)
        return self.backbone(**inputs) if isinstance(inputs, Mapping) else self.backbone(inputs)


class SigmaNormEnsemble(MemberExpansion):
    r"""Wrap a classifier into a σNorm-Ensemble of ``num_estimators`` members.

    Every normalisation layer becomes a σNorm layer :math:`\sigma(\gamma_m) \odot
    \mathrm{norm}_m(x)` (own statistics and scale logits per member); every other weight is
    shared. The classifier is replaced by fresh per-member heads (σNorm, then linear).
    The backbone is modified in place.

    Args:
        model: A classifier: TorchUncertainty ResNet/WideResNet, torchvision ResNet,
            timm model, or transformers sequence classifier.
        num_estimators: Number of members M.
        num_classes: Classes of the member heads; defaults to the replaced classifier's.
        pretrained: ``True`` converts each norm layer so that every member reproduces the
            pretrained output (frozen magnitude, sign and shift), and refuses a backbone whose
            norm layers are all at their initial values (nothing pretrained was loaded);
            ``False`` builds from-scratch σNorm with :math:`\gamma \sim \mathcal{N}(0, 1)`
            and no shift.
        checkpoint: A single model's checkpoint (TorchUncertainty/Lightning ``.ckpt``, torch
            state dict or ``.safetensors``) loaded into ``model`` before the conversion;
            requires ``pretrained=True`` (the σN-Ens FineTune recipe).
        regularized_layers: Layers the diversity regulariser acts on: a preset
            (``"all"``, ``"resnet18"``, ``"resnet50"``, ``"wideresnet28x10"``,
            ``"transformer"``), a regex matching whole layer names, or a list of names or
            name suffixes.
        tau: Softmax temperature :math:`\tau` of the regulariser, the diversity control, in
            :data:`~torch_uncertainty_signorm.regularization.TAU_RANGE`.
        diversity_strength: Regularisation strength :math:`\lambda`.
        scale_init_std: Standard deviation of the from-scratch scale logits.
        head: Name of the classifier to replace; found automatically when ``None``.
        head_norm: Norm of the member heads: ``"batch"``, ``"layer"``, or ``"auto"``
            (``"layer"`` when the backbone's norms are LayerNorm/RMSNorm).
        expand_at: Where members split off: ``"input"``, a module name (work before it runs
            once per input), or ``"auto"`` (ResNet stem norm, ViT blocks, else input).

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
        *,
        num_classes: int | None = None,
        pretrained: bool = False,
        checkpoint: str | Path | None = None,
        regularized_layers: str | Sequence[str] = "all",
        tau: float = 0.1,
        diversity_strength: float = 1e-2,
        scale_init_std: float = 1.0,
        head: str | None = None,
        head_norm: Literal["auto", "batch", "layer"] = "auto",
        expand_at: str = "auto",
    ) -> None:
        super().__init__()
        if isinstance(num_estimators, bool) or not isinstance(num_estimators, int):
            raise ValueError(f"num_estimators must be an integer >= 1, got {num_estimators!r}.")
        if num_estimators < 1:
            raise ValueError(f"num_estimators must be an integer >= 1, got {num_estimators!r}.")
        if head_norm not in ("auto", "batch", "layer"):
            raise ValueError(f"head_norm must be 'auto', 'batch' or 'layer', got {head_norm!r}.")
        self.num_estimators = num_estimators
        self.penalty = ImportanceSharingPenalty(tau, diversity_strength)
        # Validate everything before modifying the user's model in place.
        norm_names = find_norm_layers(model)
        self.signorm_layer_names = norm_names
        self.regularized_layer_names = select_layers(norm_names, regularized_layers)
        classifier, in_features, replaced_classes = _find_classifier(model, head)
        if expand_at == "auto":
            expand_at = _auto_expansion_point(model, norm_names)
        if expand_at != "input":
            try:
                model.get_submodule(expand_at)
            except AttributeError:
                raise ValueError(
                    f"expand_at={expand_at!r} is not a module of {type(model).__name__}; use "
                    f"'auto', 'input' or a module name such as {norm_names[0]!r}."
                ) from None
        if num_classes is not None and (
            isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1
        ):
            raise ValueError(f"num_classes must be an integer >= 1, got {num_classes!r}.")
        if not isinstance(pretrained, bool):
            raise ValueError(f"pretrained must be True or False, got {pretrained!r}.")
        if checkpoint is not None and not pretrained:
            raise ValueError(
                f"checkpoint={str(checkpoint)!r} needs pretrained=True: from-scratch σNorm would "
                f"discard the checkpoint's normalisation layers."
            )
        if isinstance(scale_init_std, bool) or not (
            isinstance(scale_init_std, (int, float)) and 0 <= scale_init_std < float("inf")
        ):
            raise ValueError(f"scale_init_std must be finite and >= 0, got {scale_init_std!r}.")
        state = None if checkpoint is None else read_backbone_checkpoint(model, checkpoint)
        if pretrained:
            current = model.state_dict() if state is None else state
            _check_pretrained_state(model, current, norm_names, checkpoint)
        placement = _placement(model, classifier)
        self._batch_dims = _first_convolution_dims(model)
        self._takes_token_ids = any(isinstance(m, nn.Embedding) for m in model.modules())

        if state is not None:
            model.load_state_dict(state)
        converted = convert_norm_layers(
            model, num_estimators, pretrained=pretrained, scale_init_std=scale_init_std
        )
        _remove_classifier(model, classifier)
        self._set_backbone(model, expand_at)
        if head_norm == "auto":
            is_layer_norm = any(isinstance(m, SigmaLayerNorm) for m in converted.values())
            head_norm = "layer" if is_layer_norm else "batch"
        self.heads = MemberHeads(
            in_features, num_classes or replaced_classes, num_estimators, norm=head_norm
        ).to(**placement)
        self._rows_checked = False

    def signorm_layers(self, regularized_only: bool = False) -> dict[str, _SigmaNorm]:
        """The backbone's σNorm layers by name (member heads excluded)."""
        names = self.regularized_layer_names if regularized_only else self.signorm_layer_names
        return {name: self.backbone.get_submodule(name) for name in names}

    def importances(self, regularized_only: bool = False) -> list[Tensor]:
        """Per-layer member importances σ(γ), each ``(M, F_ℓ)``."""
        return [layer.importance() for layer in self.signorm_layers(regularized_only).values()]

    def diversity_loss(self) -> Tensor:
        r"""The regulariser :math:`\lambda \mathcal{L}_{div}` over the regularised layers."""
        return self.penalty(self.importances(regularized_only=True))

    def scale_logits(self) -> list[nn.Parameter]:
        """Every σNorm scale-logit parameter (backbone and heads), for their own param group.

        σNorm scales train with a larger learning rate (100× in the paper) and no weight
        decay.
        """
        return [m.scale_logits for m in self.modules() if isinstance(m, _SigmaNorm)]

    def forward_features(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Members' penultimate features ``(M·B, D)``, member-major, from ``(B, ...)`` inputs."""
        if isinstance(inputs, Tensor):
            self._check_tensor_input(inputs)
        batch_size = _batch_size(inputs)
        if self._rows_checked:
            output = self._call_backbone(inputs)
        else:
            output = self._call_backbone_checking_rows(inputs, batch_size)
        features = _features(output)
        expected = self.num_estimators * batch_size
        if not isinstance(features, Tensor) or features.dim() != 2 or features.shape[0] != expected:
            shape = tuple(features.shape) if isinstance(features, Tensor) else type(features)
            raise ValueError(
                f"The backbone {type(self.backbone).__name__} without its classifier returned "
                f"{shape}; expected pooled features of shape ({expected}, D). Pass head= the "
                f"final nn.Linear so that what precedes it is a pooled feature vector."
            )
        return features

    def forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Member-major logits ``(M·B, C)`` from ``(B, ...)`` inputs."""
        return self.heads(self.forward_features(inputs))

    def _check_tensor_input(self, inputs: Tensor) -> None:
        """Float inputs with a batch dimension (integer ones only for token-id backbones)."""
        if not (inputs.is_floating_point() or inputs.is_complex() or self._takes_token_ids):
            raise TypeError(
                f"SigmaNormEnsemble takes floating-point inputs, got dtype {inputs.dtype} (shape "
                f"{tuple(inputs.shape)}): convert images to float first, e.g. with "
                f"torchvision.transforms.v2.ToDtype(torch.float32, scale=True) as "
                f"TorchUncertainty's datamodules do."
            )
        unbatched = self._batch_dims is not None and inputs.dim() == self._batch_dims - 1
        if inputs.dim() == 0 or unbatched:
            raise ValueError(
                f"SigmaNormEnsemble takes inputs with a batch dimension (B, ...), got shape "
                f"{tuple(inputs.shape)}: add one, e.g. inputs.unsqueeze(0)."
            )

    def _call_backbone_checking_rows(self, inputs: Any, batch_size: int) -> Any:
        """First call: every σNorm layer must see all M·B member rows, or expand_at is wrong."""
        expected = self.num_estimators * batch_size

        def check(name: str, module: nn.Module, args: tuple) -> None:
            rows = args[0].shape[0]
            if rows != expected:
                raise RuntimeError(
                    f"σNorm layer {name!r} received {rows} rows, expected M·B = {expected}: "
                    f"expand_at={self.expand_at!r} splits the members off after this layer "
                    f"runs. Use expand_at='input'."
                )

        handles = [
            layer.register_forward_pre_hook(lambda m, a, n=name: check(n, m, a))
            for name, layer in self.signorm_layers().items()
        ]
        try:
            output = self._call_backbone(inputs)
        finally:
            for handle in handles:
                handle.remove()
        self._rows_checked = True
        return output


def signorm_ensemble(
    model: nn.Module,
    num_estimators: int,
    *,
    pretrained: bool = False,
    checkpoint: str | None = None,
    num_classes: int | None = None,
    regularized_layers: str | list[str] = "all",
    tau: float = 0.1,
    diversity_strength: float = 1e-2,
    scale_init_std: float = 1.0,
    head: str | None = None,
    head_norm: Literal["auto", "batch", "layer"] = "auto",
    expand_at: str = "auto",
) -> SigmaNormEnsemble:
    """Build a :class:`SigmaNormEnsemble` (TorchUncertainty-style factory, usable from YAML).

    Args are those of :class:`SigmaNormEnsemble`; ``pretrained=True`` selects the
    output-preserving conversion of a pretrained backbone, ``False`` from-scratch σNorm;
    ``checkpoint`` loads a single model's weights first (FineTune).
    """
    return SigmaNormEnsemble(
        model,
        num_estimators,
        num_classes=num_classes,
        pretrained=pretrained,
        checkpoint=checkpoint,
        regularized_layers=regularized_layers,
        tau=tau,
        diversity_strength=diversity_strength,
        scale_init_std=scale_init_std,
        head=head,
        head_norm=head_norm,
        expand_at=expand_at,
    )
