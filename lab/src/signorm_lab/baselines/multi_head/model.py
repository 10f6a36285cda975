r"""Multi-head ensemble: M fresh linear heads on one shared backbone, run once per batch.

The backbone's classifier is replaced by M independently initialised linear heads
(:class:`~torch_uncertainty_signorm.members.linear.MemberLinear`); every other weight is shared
and the backbone runs once on the ``B`` inputs, its pooled features then read by each head:

.. math::
    p_m(y \mid x) = \operatorname{softmax}(W_m f(x) + b_m), \qquad m = 1, \dots, M .

The members differ only through their heads' initialisation and the gradients those heads
receive, so it is the cheapest ensemble one pretrained model gives (one backbone pass, M · C ·
(D + 1) parameters more than the model): the baseline against which σN-Ens's per-member
normalisation layers must earn their extra backbone passes.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from torch_uncertainty_signorm.members.linear import MemberLinear
from torch_uncertainty_signorm.members.wrapper import (
    MemberWrapper,
    batch_major_members,
    classifier_placement,
    find_classifier,
    pooled_output,
    remove_classifier,
)

from .config import MultiHeadConfig

__all__ = ["MultiHeadEnsemble", "multi_head_ensemble"]

#: The settings' defaults, read from
#: :class:`~signorm_lab.baselines.multi_head.config.MultiHeadConfig`.
_DEFAULT = MultiHeadConfig


class MultiHeadEnsemble(MemberWrapper):
    """Wrap a classifier into ``num_estimators`` fresh linear heads on its shared backbone.

    The backbone is modified in place: its classifier becomes the members' heads. Logits are
    member-major ``(M·B, C)``, as TorchUncertainty's ensembles (train it with ``is_ensemble``
    and ``RepeatTarget(M)``).

    Args:
        model: A classifier ending in an ``nn.Linear`` (a timm model, a TorchUncertainty or
            torchvision ResNet, EfficientNet's ``_fc``, a transformers sequence classifier).
        num_estimators: Number of heads M.
        config: The settings below as one
            :class:`~signorm_lab.baselines.multi_head.config.MultiHeadConfig`
            (or its ``to_dict()``), instead of keyword arguments; a keyword argument left at
            its default takes the config's value, and one differing from it is an error.
        num_classes: Classes of the heads; defaults to the replaced classifier's.
        head: Name of the classifier to replace; found automatically when ``None``.

    Example:
        >>> from torch_uncertainty.models.classification import resnet
        >>> model = MultiHeadEnsemble(resnet(3, 10, 18, style="cifar"), num_estimators=4)
        >>> model(torch.randn(2, 3, 32, 32)).shape
        torch.Size([8, 10])
    """

    def __init__(
        self,
        model: nn.Module,
        num_estimators: int,
        config: MultiHeadConfig | None = None,
        *,
        num_classes: int | None = _DEFAULT.num_classes,
        head: str | None = _DEFAULT.head,
    ) -> None:
        config = MultiHeadConfig.resolve(config, {"num_classes": num_classes, "head": head})
        super().__init__(num_estimators, config)
        classifier, in_features, replaced_classes = find_classifier(model, config.head)
        placement = classifier_placement(model, classifier)
        remove_classifier(model, classifier)
        self.set_backbone(model, "input", member_layers=())
        self.heads = MemberLinear(
            in_features, config.num_classes or replaced_classes, num_estimators
        ).to(**placement)

    def backbone_rows(self, inputs: Any, what: str = "pooled features") -> Tensor:
        """The shared features ``(B, D)`` of one backbone pass, repeated for the heads as
        batch-major rows ``(B·M, D)``.

        Raises:
            ValueError: If the backbone does not return pooled features ``(B, D)``.
        """
        batch_size = self.check_inputs(inputs)
        features = pooled_output(self._call(inputs))
        if (
            not isinstance(features, Tensor)
            or features.dim() != 2
            or (features.shape[0] != batch_size)
        ):
            shape = tuple(features.shape) if isinstance(features, Tensor) else type(features)
            raise ValueError(
                f"The backbone {type(self.backbone).__name__} returned {shape}; expected "
                f"{what} of shape ({batch_size}, D). Pass head= the final nn.Linear so that "
                f"what precedes it is pooled."
            )
        return batch_major_members(features, self.num_estimators)


#: TorchUncertainty's lowercase name (as its ``packed_resnet``) for :class:`MultiHeadEnsemble`:
#: the same class, so a recipe's ``class_path`` may name either.
multi_head_ensemble = MultiHeadEnsemble
