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

from collections.abc import Mapping, Sequence

from torch import Tensor, nn

from torch_uncertainty_signorm.members.linear import MemberLinear
from torch_uncertainty_signorm.members.replace import replace_modules
from torch_uncertainty_signorm.members.selection import match_names
from torch_uncertainty_signorm.members.wrapper import (
    MemberWrapper,
    classifier_module,
    classifier_placement,
    find_classifier,
    member_major,
    remove_classifier,
)

from .config import LoRAEnsembleConfig
from .layer import MemberLoRALinear

__all__ = [
    "DEFAULT_TARGET_MODULES",
    "TARGET_MODULE_PRESETS",
    "LoRAEnsemble",
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
#: :class:`~signorm_lab.baselines.lora.config.LoRAEnsembleConfig`.
_DEFAULT = LoRAEnsembleConfig


def _find_targets(
    model: nn.Module, target_modules: str | Sequence[str] | None, classifier: str | None
) -> list[str]:
    """Names of the ``nn.Linear`` layers to adapt, the classifier excluded, selected by
    :func:`~torch_uncertainty_signorm.members.selection.match_names` (``None``: ``"attention"``)."""
    replaced = {id(m) for m in classifier_module(model, classifier).modules()}
    linears = [
        n
        for n, m in model.named_modules()
        if n and isinstance(m, nn.Linear) and id(m) not in replaced
    ]
    spec = "attention" if target_modules is None else target_modules
    return match_names(
        linears,
        spec,
        argument="target_modules",
        kind="nn.Linear",
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
            :class:`~signorm_lab.baselines.lora.config.LoRAEnsembleConfig` (or its
            ``to_dict()``), instead of keyword arguments; a keyword argument left at its default
            takes the config's value, and one differing from it is an error. The ensemble's
            settings are its :attr:`config` either way.
        num_classes: Classes of the member heads; defaults to the replaced classifier's.
        rank: Adapter rank r (8 in the paper).
        alpha: Adapter scaling numerator; ``alpha / rank = 1`` in the paper.
        target_modules: Projections to adapt, in the grammar of
            :func:`~torch_uncertainty_signorm.members.selection.match_names`: a preset of
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
        config = LoRAEnsembleConfig.resolve(
            config,
            {
                "num_classes": num_classes,
                "rank": rank,
                "alpha": alpha,
                "target_modules": target_modules,
                "init_gain": init_gain,
                "head": head,
                "expand_at": expand_at,
            },
        )
        super().__init__(num_estimators, config)
        num_classes, rank, alpha = config.num_classes, config.rank, config.alpha
        init_gain, head = config.init_gain, config.head
        classifier, in_features, replaced_classes = find_classifier(model, head)
        placement = classifier_placement(model, classifier)
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
        self.heads = MemberLinear(in_features, num_classes or replaced_classes, num_estimators).to(
            **placement
        )

    def adapters(self) -> dict[str, MemberLoRALinear]:
        """The adapted projections by name."""
        return self.member_layers(self.adapted_layer_names)

    def forward_features(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Members' pooled features ``(M·B, D)``, member-major, from ``(B, ...)`` inputs."""
        return member_major(self.backbone_rows(inputs), self.num_estimators)


#: TorchUncertainty's lowercase name (as its ``packed_resnet``) for :class:`LoRAEnsemble`: the same
#: class, so a recipe's ``class_path`` may name either.
lora_ensemble = LoRAEnsemble
