"""Optimizer parameter groups: σNorm scale logits train faster and without weight decay."""

from __future__ import annotations

from torch import nn

from .layers.signorm import SigmaNorm
from .checks import check_positive_number

__all__ = ["DEFAULT_SCALE_LR_MULTIPLIER", "signorm_param_groups"]

#: Learning-rate multiplier of the σNorm scales (paper Appendix "Implementation details").
DEFAULT_SCALE_LR_MULTIPLIER = 100.0


def signorm_param_groups(
    module: nn.Module, lr: float, scale_lr_multiplier: float = DEFAULT_SCALE_LR_MULTIPLIER
) -> list[dict]:
    """Two optimizer groups: every parameter at ``lr``, and the σNorm scale logits at
    ``lr * scale_lr_multiplier`` with no weight decay.

    Args:
        module: Any module holding σNorm layers (an ensemble, or a routine wrapping one).
        lr: The base learning rate of the optimizer.
        scale_lr_multiplier: Learning-rate multiplier of the scale logits (paper: 100).

    Raises:
        ValueError: If ``lr`` or ``scale_lr_multiplier`` is no finite number > 0, or
            ``module`` holds no σNorm layer.

    Example:
        >>> optimizer = torch.optim.SGD(signorm_param_groups(model, lr=0.1), lr=0.1,
        ...                             momentum=0.9, weight_decay=5e-4)
    """
    lr = check_positive_number("lr", lr)
    scale_lr_multiplier = check_positive_number("scale_lr_multiplier", scale_lr_multiplier)
    scale_logits = [m.scale_logits for m in module.modules() if isinstance(m, SigmaNorm)]
    if not scale_logits:
        raise ValueError(
            f"{type(module).__name__} holds no σNorm layer; build the model with "
            f"signorm_ensemble(...) first."
        )
    scale_ids = {id(p) for p in scale_logits}
    others = [p for p in module.parameters() if id(p) not in scale_ids]
    return [
        {"params": others},
        {"params": scale_logits, "lr": lr * scale_lr_multiplier, "weight_decay": 0.0},
    ]
