"""Step-based learning-rate schedules for the transformer recipes (linear warm-up, cosine decay)."""

from __future__ import annotations

from torch.optim import Optimizer
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR

from .utils.checks import check_integer

__all__ = ["WarmupCosineLR"]


class WarmupCosineLR(SequentialLR):
    r"""Linear warm-up over ``warmup_steps``, then cosine decay to ``eta_min`` at ``total_steps``.

    Built from torch's :class:`~torch.optim.lr_scheduler.LinearLR` and
    :class:`~torch.optim.lr_scheduler.CosineAnnealingLR`. After warm-up, at step
    :math:`t`,

    .. math::
        \eta_t = \eta_{\min} + \tfrac12 (\eta - \eta_{\min})
        \left(1 + \cos\frac{\pi (t - t_w)}{T - t_w}\right).

    It is stepped once per optimisation step, not per epoch: the ``torch-uncertainty``
    command reads :attr:`interval` and tells Lightning so (a recipe's ``lr_scheduler:``
    block is otherwise stepped once per epoch).

    Args:
        optimizer: The optimiser; every parameter group is scheduled.
        total_steps: Length :math:`T` of the schedule in optimisation steps (the
            trainer's ``max_steps``).
        warmup_steps: Warm-up steps :math:`t_w`; ``0`` starts the cosine at once.
        warmup_start_factor: Learning-rate factor of the first warm-up step; it grows
            linearly to 1 at ``warmup_steps``.
        eta_min: Final learning rate.

    Raises:
        ValueError: If the steps are not integers with ``0 <= warmup_steps < total_steps``
            or ``warmup_start_factor`` is not in ``(0, 1]``.
    """

    #: How often Lightning steps this scheduler (read by the ``torch-uncertainty`` command).
    interval = "step"

    def __init__(
        self,
        optimizer: Optimizer,
        total_steps: int,
        warmup_steps: int = 0,
        warmup_start_factor: float = 1e-3,
        eta_min: float = 0.0,
    ) -> None:
        check_integer("total_steps", total_steps, low=0)
        check_integer("warmup_steps", warmup_steps, low=0)
        if warmup_steps >= total_steps:
            raise ValueError(
                f"warmup_steps={warmup_steps} must be smaller than total_steps={total_steps}."
            )
        if not 0 < warmup_start_factor <= 1:
            raise ValueError(f"warmup_start_factor must be in (0, 1], got {warmup_start_factor!r}.")
        cosine = CosineAnnealingLR(optimizer, T_max=total_steps - warmup_steps, eta_min=eta_min)
        if warmup_steps == 0:
            super().__init__(optimizer, schedulers=[cosine], milestones=[])
        else:
            warmup = LinearLR(optimizer, start_factor=warmup_start_factor, total_iters=warmup_steps)
            super().__init__(optimizer, schedulers=[warmup, cosine], milestones=[warmup_steps])
