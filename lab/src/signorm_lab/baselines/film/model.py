r"""FiLM-Ensemble (Turkoglu et al., 2022): M members modulating one backbone's BatchNorm layers.

Every BatchNorm layer of the backbone becomes a :class:`FiLMBatchNorm` holding, for each
member :math:`m`, its own running statistics and its own unconstrained affine

.. math::
    y_m = \gamma_m \odot \frac{x_m - \mu_m}{\sqrt{\sigma^2_m + \epsilon}} + \beta_m ,

while every other weight, the classifier included, is shared. The members differ only
through the initialisation of :math:`(\gamma_m, \beta_m)`: each is drawn around a centre with
a spread set by ``gain``,

.. math::
    \gamma_m = c_\gamma + g\,\xi_m, \quad \beta_m = c_\beta + g\,\eta_m, \quad
    \xi_m, \eta_m \sim \mathcal{U}\!\left(-\sqrt{6 / (M + F)},\ \sqrt{6 / (M + F)}\right),

the bound being Xavier-uniform's for an ``(M, F)`` tensor, the distribution of the official
implementation. The centre is the replaced layer's own affine (``init_center="affine"``,
so ``gain=0`` gives M identical copies of the backbone) or zero (``init_center="zero"``,
as the official code, where :math:`\gamma_m, \beta_m` are Xavier-uniform draws with gain
:math:`g`). Training uses one learning rate for every parameter and no regularizer, so the
diversity is whatever the initialisation seeded.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from torch_uncertainty_signorm.members.replace import replace_modules
from torch_uncertainty_signorm.members.wrapper import (
    MemberWrapper,
    classifier_module,
    find_classifier,
    member_major,
)
from torch_uncertainty_signorm.utils._compat import BATCH_NORMS

from .config import FiLMConfig, InitCenter
from .layer import FiLMBatchNorm

__all__ = ["FiLMEnsemble", "film_ensemble"]

#: The settings' defaults, read from
#: :class:`~signorm_lab.baselines.film.config.FiLMConfig`.
_DEFAULT = FiLMConfig


def _batch_norm_names(model: nn.Module) -> list[str]:
    names = [
        name
        for name, module in model.named_modules(remove_duplicate=False)
        if name and isinstance(module, BATCH_NORMS)
    ]
    if not names:
        raise ValueError(
            f"{type(model).__name__} has no BatchNorm layer: FiLM-Ensemble modulates the "
            f"BatchNorm layers of a convolutional backbone (e.g. TorchUncertainty's resnet "
            f"or wideresnet28x10)."
        )
    return names


def _replace_classifier(model: nn.Module, name: str | None, in_features: int, classes: int) -> None:
    """A fresh shared classifier with ``classes`` outputs in place of the backbone's."""
    if name is None:
        model.reset_classifier(classes)
        return
    old = model.get_submodule(name)
    model.set_submodule(
        name, nn.Linear(in_features, classes, device=old.weight.device, dtype=old.weight.dtype)
    )


class FiLMEnsemble(MemberWrapper):
    """Wrap a convolutional classifier into a FiLM-Ensemble of ``num_estimators`` members.

    Every BatchNorm layer becomes a :class:`FiLMBatchNorm`; every other weight, the
    classifier included (as in the official implementation), is shared. The backbone is
    modified in place.

    Args:
        model: A classifier with BatchNorm layers (TorchUncertainty ResNet/WideResNet,
            torchvision ResNet, timm CNN).
        num_estimators: Number of members M.
        config: The settings below as one
        :class:`~signorm_lab.baselines.film.config.FiLMConfig`
            (or its ``to_dict()``), instead of keyword arguments; a keyword argument left at
            its default takes the config's value, and one differing from it is an error. The
            ensemble's settings are its :attr:`config` either way.
        num_classes: Replace the classifier by a fresh shared one with this many classes;
            ``None`` keeps the backbone's.
        gain: Spread of the members' affine initialisation, the only source of diversity.
        init_center: Centre of that initialisation: ``"affine"`` (the replaced layer's
            affine; ``gain=0`` gives identical members) or ``"zero"`` (the official code).
        head: Name of the classifier (found automatically when ``None``); used when
            ``num_classes`` replaces it and by TorchUncertainty's feature protocol
            (:meth:`~torch_uncertainty_signorm.members.wrapper.MemberWrapper.feats_forward`,
            the classifier's inputs).
        expand_at: Where members split off: ``"input"``, a module name, or ``"auto"``
            (a ResNet stem's first BatchNorm, else the input).

    Example:
        >>> from torch_uncertainty.models.classification import resnet
        >>> model = FiLMEnsemble(resnet(3, 10, 18, style="cifar"), num_estimators=4)
        >>> model(torch.randn(2, 3, 32, 32)).shape
        torch.Size([8, 10])
    """

    def __init__(
        self,
        model: nn.Module,
        num_estimators: int,
        config: FiLMConfig | None = None,
        *,
        num_classes: int | None = _DEFAULT.num_classes,
        gain: float = _DEFAULT.gain,
        init_center: InitCenter = _DEFAULT.init_center,
        head: str | None = _DEFAULT.head,
        expand_at: str = _DEFAULT.expand_at,
    ) -> None:
        config = FiLMConfig.resolve(
            config,
            {
                "num_classes": num_classes,
                "gain": gain,
                "init_center": init_center,
                "head": head,
                "expand_at": expand_at,
            },
        )
        super().__init__(num_estimators, config)
        num_classes, gain, init_center = config.num_classes, config.gain, config.init_center
        head = config.head
        names = _batch_norm_names(model)
        expand_at = self.expansion_point(model, config.expand_at, names)
        if num_classes is not None:
            classifier, in_features, classes = find_classifier(model, head)
            if classes != num_classes:
                _replace_classifier(model, classifier, in_features, num_classes)

        self.gain = gain
        self.init_center = init_center
        self.head = head
        self.film_layer_names = names
        replace_modules(
            model,
            names,
            lambda bn: FiLMBatchNorm.from_module(
                bn, num_estimators, gain=gain, init_center=init_center
            ),
        )
        self.set_backbone(model, expand_at, names)

    def film_layers(self) -> dict[str, FiLMBatchNorm]:
        """The backbone's FiLM layers by name."""
        return self.member_layers(self.film_layer_names)

    def forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Member-major logits ``(M·B, C)`` from ``(B, ...)`` inputs (the shared classifier
        runs on batch-major rows; one reorder at the end)."""
        return member_major(self.backbone_rows(inputs, "logits"), self.num_estimators)

    def head_module(self) -> nn.Module:
        """The shared classifier, inside the backbone (``head``, or found as the wrapper
        finds classifiers)."""
        name, _, _ = find_classifier(self.backbone, self.head)
        return classifier_module(self.backbone, name)

    def head_logits(self, rows: Tensor) -> Tensor:
        return member_major(self.head_module()(rows), self.num_estimators)

    def plain_head(self, member: int) -> nn.Module:
        """Nothing: the shared classifier stays in the member's backbone."""
        return nn.Identity()


#: TorchUncertainty's lowercase name (as its ``packed_resnet``) for :class:`FiLMEnsemble`: the same
#: class, so a recipe's ``class_path`` may name either.
film_ensemble = FiLMEnsemble
