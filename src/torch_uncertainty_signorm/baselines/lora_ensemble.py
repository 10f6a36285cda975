r"""LoRA-Ensemble (Mühlematter et al., 2024): M sets of low-rank attention adapters on one
frozen pretrained transformer.

Every targeted projection :math:`W` (the attention query, key and value) of the frozen
backbone gets, for each member :math:`m`, a rank-:math:`r` update

.. math::
    h_m = W x_m + \frac{\alpha}{r} B_m A_m x_m ,

with :math:`A_m \in \mathbb{R}^{r \times d_{in}}` drawn with high variance (Xavier-uniform
with gain 10, the LoRA-Ensemble code's setting for ViT) and :math:`B_m = 0`, so that every
member starts as the frozen backbone and the members differ through :math:`A_m` alone. Each
member has its own freshly initialised linear head; adapters and heads are the only
trainable parameters. A fused ``qkv`` projection (timm's ViT) gets separate adapters for
its query, key and value slices, as separate projections (transformers' BERT) do.

All members run in one batched pass: a batch-major batch ``(B·M, ..., d)`` is viewed as
``(B, M, ..., d)`` and the adapters, stored as ``(M, S, r, d_in)`` and
``(M, S, d_out / S, r)`` tensors for ``S`` slices, are applied with two ``einsum`` calls
(batched matrix products over members). peft is not used: its LoRA layers run one adapter
per forward pass, and its mixed-batch path (``adapter_names=`` in ``LoraLayer
._mixed_batch_forward``) groups the rows by adapter name and loops over the adapters in
Python, applying each adapter to its sub-batch in turn; it cannot apply M adapters to their
M row blocks in one batched product.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from ..checks import check_integer, check_positive_number
from ..config import LoRAEnsembleConfig, settings_of
from ..conversion import replace_modules
from ..layer_selection import match_names
from ..layers.member_heads import member_linear, plain_linear
from ..member_wrapper import MemberWrapper, find_classifier, member_major, remove_classifier

__all__ = [
    "DEFAULT_TARGET_MODULES",
    "TARGET_MODULE_PRESETS",
    "LoRAEnsemble",
    "MemberLinear",
    "MemberLoRALinear",
    "lora_ensemble",
]

#: Last name component of the attention projections adapted by default: timm's fused
#: ``qkv``, transformers' ``query``/``key``/``value`` and ``q_proj``/``k_proj``/``v_proj``.
DEFAULT_TARGET_MODULES = ("qkv", "query", "key", "value", "q_proj", "k_proj", "v_proj")
#: Named selections of ``target_modules`` (regexes on qualified names): ``"attention"``, the
#: default, is every projection named in :data:`DEFAULT_TARGET_MODULES`.
TARGET_MODULE_PRESETS = {"attention": rf"(.*\.)?({'|'.join(DEFAULT_TARGET_MODULES)})"}
#: Projections whose output concatenates query, key and value (adapted per slice).
_FUSED_QKV = ("qkv",)
#: The settings' defaults, read from
#: :class:`~torch_uncertainty_signorm.config.LoRAEnsembleConfig`.
_DEFAULT = LoRAEnsembleConfig


class MemberLoRALinear(nn.Module):
    """A frozen :class:`torch.nn.Linear` plus one rank-``r`` adapter per member and slice.

    Args:
        base: The projection to adapt (kept as is, frozen by the caller).
        num_estimators: Number of members M.
        rank: Adapter rank r.
        alpha: Adapter scaling numerator: the update is ``alpha / rank · B A``.
        num_slices: Number S of equal output slices adapted separately (3 for a fused
            query-key-value projection, else 1).
        init_gain: Xavier-uniform gain of the down-projections ``A``.
    """

    def __init__(
        self,
        base: nn.Linear,
        num_estimators: int,
        rank: int = 8,
        alpha: float = 8.0,
        num_slices: int = 1,
        init_gain: float = 10.0,
    ) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"MemberLoRALinear adapts an nn.Linear, got {type(base).__name__}.")
        check_integer("num_estimators", num_estimators)
        check_integer("rank", rank)
        check_integer("num_slices", num_slices)
        check_positive_number("alpha", alpha)
        check_positive_number("init_gain", init_gain, allow_zero=True)
        if base.out_features % num_slices != 0:
            raise ValueError(
                f"num_slices={num_slices} does not divide the {base.out_features} output "
                f"features of the adapted projection."
            )
        self.base = base
        self.num_estimators = num_estimators
        self.rank = rank
        self.scaling = alpha / rank
        self.num_slices = num_slices
        self.init_gain = init_gain
        factory = {"device": base.weight.device, "dtype": base.weight.dtype}
        slice_out = base.out_features // num_slices
        self.lora_A = nn.Parameter(
            torch.empty(num_estimators, num_slices, rank, base.in_features, **factory)
        )
        self.lora_B = nn.Parameter(
            torch.zeros(num_estimators, num_slices, slice_out, rank, **factory)
        )
        self.reset_adapters()

    @torch.no_grad()
    def reset_adapters(self) -> None:
        """``A`` Xavier-uniform with gain ``init_gain`` (per ``r × d_in`` matrix), ``B = 0``."""
        fan_in, fan_out = self.lora_A.shape[-1], self.lora_A.shape[-2]
        bound = self.init_gain * math.sqrt(6.0 / (fan_in + fan_out))
        self.lora_A.uniform_(-bound, bound)
        self.lora_B.zero_()

    def delta_weight(self, member: int) -> Tensor:
        r"""Member ``member``'s update :math:`\frac{\alpha}{r} B_m A_m`, ``(d_out, d_in)``.

        Adding it to the projection's weight merges the member into a plain backbone.
        """
        return self.scaling * torch.cat(
            [b @ a for a, b in zip(self.lora_A[member], self.lora_B[member], strict=True)]
        )

    def to_plain(self, member: int) -> nn.Linear:
        """Member ``member``'s projection as one :class:`torch.nn.Linear`: the adapter merged,
        ``W + (α/r) B_m A_m``, the bias kept."""
        check_integer("member", member, low=0, high=self.num_estimators - 1)
        base = self.base
        linear = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                           device=base.weight.device, dtype=base.weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(base.weight + self.delta_weight(member))
            if base.bias is not None:
                linear.bias.copy_(base.bias)
        return linear

    def forward(self, x: Tensor) -> Tensor:
        """``W x + b`` for every row plus member m's update on member m's rows."""
        if x.shape[0] % self.num_estimators != 0:
            raise ValueError(
                f"MemberLoRALinear expects a batch of B·M rows (batch-major) with M = "
                f"num_estimators = {self.num_estimators}, got {x.shape[0]} rows."
            )
        members = x.unflatten(0, (-1, self.num_estimators))  # (B, M, ..., d_in)
        hidden = torch.einsum("bm...i,msri->bm...sr", members, self.lora_A.to(x.dtype))
        update = torch.einsum("bm...sr,msor->bm...so", hidden, self.lora_B.to(x.dtype))
        return self.base(x) + self.scaling * update.flatten(-2).flatten(0, 1)

    def extra_repr(self) -> str:
        return (
            f"num_estimators={self.num_estimators}, rank={self.rank}, scaling={self.scaling}, "
            f"num_slices={self.num_slices}"
        )


class MemberLinear(nn.Module):
    """M independent linear heads on batch-major features ``(B·M, D)``, in one pass.

    Each member's head is initialised as :class:`torch.nn.Linear` would be.
    """

    def __init__(self, in_features: int, num_classes: int, num_estimators: int) -> None:
        super().__init__()
        check_integer("in_features", in_features)
        check_integer("num_classes", num_classes)
        check_integer("num_estimators", num_estimators)
        self.num_estimators = num_estimators
        self.weight = nn.Parameter(torch.empty(num_estimators, num_classes, in_features))
        self.bias = nn.Parameter(torch.empty(num_estimators, num_classes))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[-1])
        for member_weight in self.weight:  # initialisation only, not the forward pass
            nn.init.kaiming_uniform_(member_weight, a=math.sqrt(5))
        self.bias.uniform_(-bound, bound)

    def forward(self, features: Tensor) -> Tensor:
        """Member-major logits ``(M·B, C)`` from batch-major features ``(B·M, D)``."""
        if features.dim() != 2 or features.shape[1] != self.weight.shape[-1]:
            raise ValueError(
                f"MemberLinear expects features of shape (B·M, {self.weight.shape[-1]}), got "
                f"{tuple(features.shape)}."
            )
        return member_linear(features, self.weight, self.bias)

    def to_plain(self, member: int) -> nn.Linear:
        """Member ``member``'s head as one :class:`torch.nn.Linear`."""
        return plain_linear(self.weight, self.bias, member)


def _find_targets(
    model: nn.Module, target_modules: str | Sequence[str] | None, classifier: str | None
) -> list[str]:
    """Names of the ``nn.Linear`` layers to adapt, the classifier excluded, selected by
    :func:`~torch_uncertainty_signorm.layer_selection.match_names` (``None``: ``"attention"``)."""
    head = model.get_classifier() if classifier is None else model.get_submodule(classifier)
    replaced = {id(m) for m in head.modules()}
    linears = [n for n, m in model.named_modules()
               if n and isinstance(m, nn.Linear) and id(m) not in replaced]
    spec = "attention" if target_modules is None else target_modules
    return match_names(
        linears, spec, argument="target_modules", kind="nn.Linear",
        presets=TARGET_MODULE_PRESETS,
    )


class LoRAEnsemble(MemberWrapper):
    """Wrap a pretrained transformer classifier into a LoRA-Ensemble of ``num_estimators``.

    The backbone is frozen and modified in place: its attention projections become
    :class:`MemberLoRALinear` layers and its classifier is replaced by per-member
    :class:`MemberLinear` heads.

    Args:
        model: A timm ViT or a transformers sequence classifier (BERT).
        num_estimators: Number of members M.
        config: The settings below as one
            :class:`~torch_uncertainty_signorm.config.LoRAEnsembleConfig` (or its
            ``to_dict()``), instead of keyword arguments; a keyword argument left at its default
            takes the config's value, and one differing from it is an error. The ensemble's
            settings are its :attr:`config` either way.
        num_classes: Classes of the member heads; defaults to the replaced classifier's.
        rank: Adapter rank r (8 in the paper).
        alpha: Adapter scaling numerator; ``alpha / rank = 1`` in the paper.
        target_modules: Projections to adapt, in the grammar of
            :func:`~torch_uncertainty_signorm.layer_selection.match_names`: a preset of
            :data:`TARGET_MODULE_PRESETS` (``"attention"``, also for ``None``: timm's fused
            ``qkv``, transformers' ``query``/``key``/``value``), a regex matching whole
            qualified names, or a list of names or name suffixes, each of which must match.
            A target whose last name component is ``qkv`` is adapted per query/key/value
            slice.
        init_gain: Xavier-uniform gain of the down-projections (the diversity source).
        head: Name of the classifier to replace; found automatically when ``None``.
        expand_at: Where members split off: ``"input"``, a module name, or ``"auto"`` (a
            timm ViT's ``blocks``, else the input).

    Example:
        >>> import timm
        >>> vit = timm.create_model("vit_base_patch16_224.orig_in21k", pretrained=True)
        >>> model = LoRAEnsemble(vit, num_estimators=4, num_classes=100)
        >>> model(torch.randn(2, 3, 224, 224)).shape
        torch.Size([8, 100])
    """

    def __init__(
        self,
        model: nn.Module,
        num_estimators: int,
        config: LoRAEnsembleConfig | None = None,
        *,
        num_classes: int | None = _DEFAULT.num_classes,
        rank: int = _DEFAULT.rank,
        alpha: float = _DEFAULT.alpha,
        target_modules: str | Sequence[str] | None = _DEFAULT.target_modules,
        init_gain: float = _DEFAULT.init_gain,
        head: str | None = _DEFAULT.head,
        expand_at: str = _DEFAULT.expand_at,
    ) -> None:
        config = LoRAEnsembleConfig.resolve(config, settings_of(LoRAEnsembleConfig, locals()))
        super().__init__(num_estimators)
        self.config = config
        num_classes, rank, alpha = config.num_classes, config.rank, config.alpha
        init_gain, head = config.init_gain, config.head
        classifier, in_features, replaced_classes = find_classifier(model, head)
        targets = _find_targets(model, config.target_modules, classifier)
        expand_at = self.expansion_point(model, config.expand_at, targets)
        self.rank = rank
        self.alpha = alpha
        model.requires_grad_(False)
        remove_classifier(model, classifier)
        self.adapted_layer_names = targets
        fused = {id(model.get_submodule(t)) for t in targets if t.rpartition(".")[2] in _FUSED_QKV}
        replace_modules(
            model,
            targets,
            lambda linear: MemberLoRALinear(
                linear,
                num_estimators,
                rank=rank,
                alpha=alpha,
                num_slices=3 if id(linear) in fused else 1,
                init_gain=init_gain,
            ),
        )
        self.set_backbone(model, expand_at, targets)
        self.heads = MemberLinear(in_features, num_classes or replaced_classes, num_estimators)

    def adapters(self) -> dict[str, MemberLoRALinear]:
        """The adapted projections by name."""
        return {name: self.backbone.get_submodule(name) for name in self.adapted_layer_names}

    def forward_features(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Members' pooled features ``(M·B, D)``, member-major, from ``(B, ...)`` inputs."""
        return member_major(self.backbone_rows(inputs), self.num_estimators)

    def forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Member-major logits ``(M·B, C)`` from ``(B, ...)`` inputs."""
        return self.heads(self.backbone_rows(inputs))


#: TorchUncertainty's lowercase name (as its ``packed_resnet``) for :class:`LoRAEnsemble`: the same
#: class, so a recipe's ``class_path`` may name either.
lora_ensemble = LoRAEnsemble
