"""Optimizer parameter groups: σNorm scale logits train faster and without weight decay."""

from __future__ import annotations

from torch import nn

from .checks import check_positive_number
from .layers.member_heads import MemberHeads
from .layers.signorm import SigmaNorm

__all__ = ["DEFAULT_SCALE_LR_MULTIPLIER", "signorm_param_groups"]

#: Learning-rate multiplier of the σNorm scales (paper Appendix "Implementation details").
DEFAULT_SCALE_LR_MULTIPLIER = 100.0


def signorm_param_groups(
    module: nn.Module,
    lr: float,
    scale_lr_multiplier: float = DEFAULT_SCALE_LR_MULTIPLIER,
    member_lr_multiplier: float = 1.0,
    weight_decay: float | None = None,
) -> list[dict]:
    """Optimizer groups: every parameter at ``lr``, and the σNorm scale logits at
    ``lr * scale_lr_multiplier`` with no weight decay.

    With ``member_lr_multiplier`` m ≠ 1, the parameters that belong to one member (the scale
    logits and the member heads' linear layers) train at m × their rate, and the heads' weight
    decay is divided by m, so that decay per step is unchanged. The loss averages over the M·B
    rows of M members, so each member's own parameters receive 1/M of the gradient that a single
    model's would: m = M gives them a single model's step (``SGD``'s update), while the shared
    backbone, which receives the mean of the members' gradients, keeps ``lr``.

    Args:
        module: Any module holding σNorm layers (an ensemble, or a routine wrapping one).
        lr: The base learning rate of the optimizer.
        scale_lr_multiplier: Learning-rate multiplier of the scale logits (paper: 100).
        member_lr_multiplier: Learning-rate multiplier of every per-member parameter.
        weight_decay: The optimizer's weight decay, divided by ``member_lr_multiplier`` for the
            member heads; ``None`` leaves their group at the optimizer's own value.

    Returns:
        Two groups (shared and heads, scale logits) when ``member_lr_multiplier`` is 1, else
        three (shared, member heads, scale logits).

    Raises:
        ValueError: If ``lr``, ``scale_lr_multiplier`` or ``member_lr_multiplier`` is no finite
            number > 0, ``weight_decay`` no finite number >= 0, or ``module`` holds no σNorm
            layer.

    Example:
        >>> optimizer = torch.optim.SGD(signorm_param_groups(model, lr=0.1), lr=0.1,
        ...                             momentum=0.9, weight_decay=5e-4)
    """
    lr = check_positive_number("lr", lr)
    scale_lr_multiplier = check_positive_number("scale_lr_multiplier", scale_lr_multiplier)
    member = check_positive_number("member_lr_multiplier", member_lr_multiplier)
    if weight_decay is not None:
        weight_decay = check_positive_number("weight_decay", weight_decay, allow_zero=True)
    scale_logits = [m.scale_logits for m in module.modules() if isinstance(m, SigmaNorm)]
    if not scale_logits:
        raise ValueError(
            f"{type(module).__name__} holds no σNorm layer; build the model with "
            f"signorm_ensemble(...) first."
        )
    scale_ids = {id(p) for p in scale_logits}
    scales = {"params": scale_logits, "lr": lr * scale_lr_multiplier * member,
              "weight_decay": 0.0}
    if member == 1.0:
        return [{"params": [p for p in module.parameters() if id(p) not in scale_ids]}, scales]
    heads = [p for m in module.modules() if isinstance(m, MemberHeads)
             for p in m.parameters() if id(p) not in scale_ids]
    member_ids = scale_ids | {id(p) for p in heads}
    shared = [p for p in module.parameters() if id(p) not in member_ids]
    head_group = {"params": heads, "lr": lr * member}
    if weight_decay is not None:
        head_group["weight_decay"] = weight_decay / member
    return [{"params": shared}, head_group, scales]
