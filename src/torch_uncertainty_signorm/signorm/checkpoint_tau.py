"""Where a checkpoint keeps a σN-Ens run's τ, and its one reader.

The routine stores the model's τ under :data:`CHECKPOINT_TAU` when a checkpoint is saved (the τ
controller may have moved it from the recipe's); loading, resuming, testing and exporting read
it back through :func:`checkpoint_tau`, which checks it against the run first.
"""

from __future__ import annotations

import math
from typing import Any

from .diversity_target import CONTROLLED_TAU_RANGE
from .regularization import TAU_RANGE

__all__ = ["CHECKPOINT_TAU", "TARGET_STATE_KEY", "checkpoint_tau"]

#: The key under which the σN-Ens routine stores its model's τ.
CHECKPOINT_TAU = "signorm_tau"
#: The checkpoint's key holding the τ controller's state (earlier releases kept a copy of τ there,
#: as ``log_tau``: read, not written).
TARGET_STATE_KEY = "signorm_diversity_target"


def checkpoint_tau(
    checkpoint: Any,
    configured: float | None = None,
    where: str = "the checkpoint",
    controlled: bool = False,
) -> float | None:
    """The τ a σN-Ens run had reached when ``checkpoint`` (a loaded mapping) was saved, checked:
    its :data:`CHECKPOINT_TAU`, else, in a checkpoint of an earlier release, the τ controller's
    ``log_tau``; ``None`` when it holds neither (the model's configured τ then stands).

    Whether τ may have moved is the reading run's to say (``controlled``: its routine has a
    ``target_diversity``), never the checkpoint's other keys: a run with a τ controller moves τ
    within :data:`~torch_uncertainty_signorm.signorm.diversity_target.CONTROLLED_TAU_RANGE`; a
    run without one trains at its configured τ throughout, so its checkpoint holds that τ. A
    checkpoint whose saved ``hyper_parameters`` record a ``target_diversity`` must agree.

    Raises:
        ValueError: If the value is not a finite number in range, the checkpoint was saved by a
            run with (or without) a τ controller that this run lacks (or has), or, given
            ``configured`` (the run's configuration), the value differs from it in a run
            without a controller.
    """
    if not isinstance(checkpoint, dict):
        return None
    hparams = checkpoint.get("hyper_parameters")
    if isinstance(hparams, dict) and "target_diversity" in hparams:
        saved = hparams["target_diversity"]
        if (saved is not None) != controlled:
            raise ValueError(
                f"{where} was saved by a run with target_diversity={saved!r:.40}, but this "
                f"run's configuration has "
                f"{'a' if controlled else 'no'} target_diversity: give the recipe (or the "
                f"config.yaml) of the run that saved it."
            )
    value = checkpoint.get(CHECKPOINT_TAU)
    if value is None:
        legacy = checkpoint.get(TARGET_STATE_KEY)
        log_tau = legacy.get("log_tau") if isinstance(legacy, dict) else None
        if not isinstance(log_tau, float):
            return None
        value = math.exp(log_tau) if math.isfinite(log_tau) else log_tau
    low, high = CONTROLLED_TAU_RANGE if controlled else TAU_RANGE
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and low <= value <= high)
    ):
        raise ValueError(
            f"{where} holds {CHECKPOINT_TAU}={value!r:.40}, which no run saves "
            f"(a finite τ in [{low:g}, {high:g}]): the checkpoint was altered."
        )
    if (
        configured is not None
        and not controlled
        and not math.isclose(value, configured, rel_tol=1e-6)
    ):
        raise ValueError(
            f"{where} holds {CHECKPOINT_TAU}={value:g}, but the run's configuration gives "
            f"tau={configured:g} and no target_diversity (a fixed-τ run keeps its τ, "
            f"whatever else the checkpoint holds): the checkpoint was altered, or belongs "
            f"to another recipe."
        )
    return float(value)
