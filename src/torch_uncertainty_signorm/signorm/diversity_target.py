r"""Hold the members' σNorm-cos at a target by adjusting τ during training (beyond the paper).

The regularizer's temperature sets how hard members are pushed apart, but which σNorm-cos a
given τ reaches depends on the budget: from an exact conversion the members' spread grows by
about :math:`\eta \lambda \sigma'^2 T / \tau^2` e-folds over T steps, so a τ that diversifies
a 10,000-step run leaves a 100-step run's members identical. :class:`DiversityTarget` turns the
question around: the user names the σNorm-cos of the regularized layers to reach, and τ follows.

The plant is one-sided and slow to stop: lowering τ makes σNorm-cos fall faster, nothing in
σN-Ens pulls members back together but the task loss, and the optimiser's momentum carries the
scale logits on for about ``lookahead`` = 1/(1 - momentum) steps after the push stops. The
controller therefore steers where σNorm-cos will *coast to*, :math:`\hat c = c + L \hat v`
(:math:`\hat v` the smoothed change per step), along a reference that approaches the target
exponentially in the scale where the push acts, :math:`\log(1 - c)`:

.. math::
    e = \log(1 - \hat c) - \log d_{ref}(t), \qquad
    d_{ref}(t) = d^* (d_0 / d^*)^{e^{-t/T_s}}, \qquad d^* = 1 - c^*,

and integrates log τ against it, patiently downwards and at once upwards,

.. math::
    \log \tau \leftarrow \mathrm{clip}\big(\log \tau + \mathrm{clip}(g\, e / L
    \text{ if } e < 0 \text{ else } g\, e,\ -\log 2,\ \log 10)\big),

with ``gain`` :math:`g` and :math:`T_s` = ``settle_fraction`` × the run's steps / 3 (the
reference is within 5 % of the target, in log scale, after ``settle_fraction`` of the run). Too
little diversity strengthens the push by at most a factor 4 a step (τ halves), a predicted
overshoot stops it within a step or two; at the target τ settles where the push balances the
task loss, or at the upper end of :data:`CONTROLLED_TAU_RANGE` if nothing pulls the members
back. Everything is computed from the weights, which data-parallel training keeps identical on
every rank, so every rank computes the same τ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from torch import Tensor
from torch.optim import Optimizer

from ..utils.checks import check_fraction, check_positive_number
from .regularization import TAU_RANGE, check_tau

__all__ = [
    "ACCURACY_DROP",
    "CONTROLLED_TAU_RANGE",
    "TARGET_TOLERANCE",
    "DiversityTarget",
    "check_controlled_tau",
    "missed_target_message",
    "optimizer_lookahead",
    "target_cost_message",
    "tested_off_target_message",
]

#: Where the controller moves τ: TAU_RANGE's lower end, and 10, above which the push on
#: importances in (0, 1) is under λ/200 per feature (off, for any budget); going higher only
#: delays its return.
CONTROLLED_TAU_RANGE = (TAU_RANGE[0], 10.0)
#: How far from its target σNorm-cos may end and still count as reached.
TARGET_TOLERANCE = 0.05
#: Fall of the ensemble's validation accuracy below its best of the run (a fraction), seen at two
#: validations in a row, at which the controller stops strengthening the push: the target costs
#: that much at this budget. One low validation is not enough: early in a fine-tune, accuracy
#: fluctuates by more than this while the push is still weak.
ACCURACY_DROP = 0.05
#: Smallest 1 - σNorm-cos the controller resolves (float32 cosines of identical members).
_MIN_DIVERGENCE = 1e-6
#: Largest change of log τ per step: down by a factor 2 (the push grows up to 4x a step),
#: up by a factor 10 (the push stops at once when σNorm-cos would overshoot).
_MAX_FALL, _MAX_RISE = math.log(2.0), math.log(10.0)


class TemperatureOwner(Protocol):
    """What holds τ: the model (``SigmaNormEnsemble``) or its penalty."""

    @property
    def tau(self) -> float: ...

    def set_tau(self, tau: float) -> None: ...


class _Temperature:
    """τ alone, for a controller run without a model (tests, studies of the arithmetic)."""

    def __init__(self, tau: float) -> None:
        self.tau = tau

    def set_tau(self, tau: float) -> None:
        self.tau = check_tau(tau)


def check_controlled_tau(tau: Any) -> float:
    """``tau`` as a float if it lies in :data:`CONTROLLED_TAU_RANGE`, where the controller
    moves it, else a ValueError naming it and the range (a τ above it would be lowered to the
    bound at the first step, silently)."""
    tau = check_tau(tau)
    low, high = CONTROLLED_TAU_RANGE
    if not low <= tau <= high * (1 + 1e-12):
        raise ValueError(
            f"tau={tau!r} is outside [{low:g}, {high:g}] (CONTROLLED_TAU_RANGE), where "
            f"target_diversity moves tau: start the model at a tau in that range, or train at "
            f"the fixed tau={tau!r} without target_diversity."
        )
    return tau


def _log_divergence(cosine: float) -> float:
    """log(1 - σNorm-cos), within what float32 cosines resolve: the scale in which the push
    grows the members' spread (exponentially, from a symmetric start)."""
    return math.log(min(max(1.0 - cosine, _MIN_DIVERGENCE), 2.0))


def optimizer_lookahead(optimizer: Optimizer, params: list[Tensor]) -> float:
    """Steps an optimiser keeps moving ``params`` once their gradient stops: ``1 / (1 - μ)``
    for the momentum μ of their group (SGD's ``momentum``, Adam's first beta), 1 without."""
    ids = {id(p) for p in params}
    for group in optimizer.param_groups:
        if any(id(p) in ids for p in group["params"]):
            momentum = group.get("momentum", group.get("betas", (0.0,))[0])
            return 1.0 / (1.0 - min(float(momentum or 0.0), 0.99))
    return 1.0


class DiversityTarget:
    """τ controller holding the regularized layers' σNorm-cos at ``target``.

    τ itself is not kept here: the controller reads and sets it on ``tau``'s owner (the model,
    whose penalty is the one place τ lives during a run and whose checkpoint key records it), so
    loading, resuming and exporting read one value.

    Args:
        target: σNorm-cos of the regularized layers to reach and hold, in (0, 1).
        tau: The owner of τ (the model: anything with ``tau`` and ``set_tau``), or a starting
            temperature for a controller run alone; in :data:`CONTROLLED_TAU_RANGE`.
        total_steps: Optimisation steps of the run (Lightning's
            ``trainer.estimated_stepping_batches``).
        lookahead: Steps over which the optimiser keeps moving after the push stops:
            ``1 / (1 - momentum)`` for SGD's momentum or Adam's first beta
            (:func:`optimizer_lookahead`).
        settle_fraction: Fraction of the run after which the reference is at the target.
        gain: Integral gain of log τ on the error (see the module docstring).
        smoothing: Exponential smoothing of the measured rate (0: the last step's change).

    Raises:
        ValueError: If a value is out of its range; each error names it.
    """

    def __init__(
        self,
        target: float,
        tau: float | TemperatureOwner,
        total_steps: float,
        *,
        lookahead: float = 10.0,
        settle_fraction: float = 0.25,
        gain: float = 3.0,
        smoothing: float = 0.5,
    ) -> None:
        self.target = check_fraction("target_diversity", target)
        owner = tau if hasattr(tau, "set_tau") else _Temperature(check_tau(tau))
        check_controlled_tau(owner.tau)
        self.owner: TemperatureOwner = owner
        total_steps = check_positive_number("total_steps", total_steps)
        fraction = check_fraction("settle_fraction", settle_fraction)
        self.settle_steps = max(1.0, fraction * min(total_steps, 1e9) / 3)
        self.lookahead = check_positive_number("lookahead", lookahead)
        self.gain = check_positive_number("gain", gain)
        self.smoothing = float(smoothing)
        if not 0 <= self.smoothing < 1:
            raise ValueError(f"smoothing must be a number in [0, 1), got {smoothing!r}.")
        self.previous: float | None = None  # σNorm-cos at the last update
        self.rate = 0.0  # its smoothed change per step
        self.start = 0.0  # log(1 - σNorm-cos) at the first update
        self.updates = 0
        self.step: int | None = None  # optimisation step of the last update
        self.best_accuracy: float | None = None  # the ensemble's best validation accuracy
        self.floor: float | None = None  # log τ below which it stops pushing, once held
        self.falling: float | None = None  # log τ at the last validation, if it was a fall

    @property
    def tau(self) -> float:
        """The current temperature (its owner's)."""
        return float(self.owner.tau)

    @property
    def log_tau(self) -> float:
        """log τ, read from and written to τ's owner."""
        return math.log(self.owner.tau)

    @log_tau.setter
    def log_tau(self, value: float) -> None:
        low, high = CONTROLLED_TAU_RANGE
        self.owner.set_tau(min(max(math.exp(value), low), high))  # exp(log 10) may be 10 + ε

    def at_bound(self) -> str | None:
        """``"lower"``/``"upper"`` when τ sits at that end of :data:`CONTROLLED_TAU_RANGE`."""
        low, high = (math.log(t) for t in CONTROLLED_TAU_RANGE)
        if self.log_tau <= low + 1e-9:
            return "lower"
        if self.log_tau >= high - 1e-9:
            return "upper"
        return None

    def validated(self, accuracy: float) -> bool:
        """Take the ensemble's validation ``accuracy`` (a fraction); ``True`` when it has been
        :data:`ACCURACY_DROP` below the run's best at this validation and the one before: from
        then on τ never goes lower than it was at the first of the two (the push stops growing),
        so the target's cost stops growing with it. A first low validation at τ's upper bound
        (no push) does not count, so the hold never pins τ at the bound."""
        accuracy = float(accuracy)
        if not math.isfinite(accuracy):
            return False
        best = self.best_accuracy
        self.best_accuracy = accuracy if best is None else max(best, accuracy)
        if self.floor is not None:
            return False
        if best is None or accuracy > best - ACCURACY_DROP:
            self.falling = None
            return False
        if self.falling is None or self.falling >= math.log(CONTROLLED_TAU_RANGE[1]) - 1e-9:
            # The first low validation; or τ was at its upper bound then, where the push is off:
            # the fall was not its cost, and holding τ there would end the push for good.
            self.falling = self.log_tau
            return False
        self.floor, self.falling = self.falling, None
        return True

    def update(self, cosine: float, step: int | None = None) -> float:
        """Take σNorm-cos of the regularized layers at optimisation ``step``; return the τ to
        train that step with."""
        self.step = step
        if self.previous is None:
            self.start = _log_divergence(cosine)
            self.updates = 0
        else:
            change = cosine - self.previous
            self.rate = self.smoothing * self.rate + (1 - self.smoothing) * change
        self.previous = cosine
        goal = _log_divergence(self.target)
        reference = goal + (self.start - goal) * math.exp(-self.updates / self.settle_steps)
        self.updates += 1
        coasting = cosine + self.lookahead * self.rate  # where the optimiser carries it
        error = _log_divergence(coasting) - reference  # > 0: more diverse than the reference
        # Strengthen the push patiently (its effect shows after the optimiser's lag), weaken
        # it at once (a push that overshoots cannot be undone: nothing pulls members back).
        step_size = self.gain * error / (self.lookahead if error < 0 else 1.0)
        step_size = min(max(step_size, -_MAX_FALL), _MAX_RISE)
        low, high = (math.log(t) for t in CONTROLLED_TAU_RANGE)
        low = low if self.floor is None else max(low, min(self.floor, high))
        self.log_tau = min(high, max(low, self.log_tau + step_size))
        return self.tau

    def reached(self, cosine: float) -> bool:
        """Whether ``cosine`` is within :data:`TARGET_TOLERANCE` of the target."""
        return abs(cosine - self.target) <= TARGET_TOLERANCE

    def state_dict(self) -> dict[str, Any]:
        """Everything :meth:`update` depends on but τ, as plain floats (for the checkpoint; τ
        is its owner's, saved once under the routine's ``signorm_tau``)."""
        return {
            "previous": self.previous,
            "rate": self.rate,
            "start": self.start,
            "updates": self.updates,
            "step": self.step,
            "target": self.target,
            "best_accuracy": self.best_accuracy,
            "floor": self.floor,
            "falling": self.falling,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; a target other than this one's is an error. τ is not
        restored here: its owner was (an earlier release's ``log_tau`` is checked, not read;
        :func:`~torch_uncertainty_signorm.signorm.checkpoint_tau.checkpoint_tau` reads it)."""
        if not isinstance(state, Mapping):
            raise ValueError(
                f"The checkpoint's τ controller state is {type(state).__name__} "
                f"{state!r:.80}, not a mapping of its values (target, previous, ...) as a run "
                f"saves it: the checkpoint was not written by a run of this package."
            )
        if state.get("target") != self.target:
            raise ValueError(
                f"The checkpoint's τ controller held target_diversity={state.get('target')!r}, "
                f"this run's is {self.target!r}: resume with the same target."
            )
        _check_state(state)
        self.previous = None if state["previous"] is None else float(state["previous"])
        self.rate = float(state["rate"])
        self.start = float(state["start"])
        self.updates = int(state["updates"])
        self.step = None if state["step"] is None else int(state["step"])
        for key in ("best_accuracy", "floor", "falling"):  # absent from earlier checkpoints
            setattr(self, key, None if state.get(key) is None else float(state[key]))


def _check_state(state: dict[str, Any]) -> None:
    """Refuse a τ-controller state no run could have saved (a tampered checkpoint): each value
    finite and in its range (log τ within :data:`CONTROLLED_TAU_RANGE`, σNorm-cos in [-1, 1],
    accuracy in [0, 1], counts >= 0)."""
    low, high = (math.log(bound) for bound in CONTROLLED_TAU_RANGE)
    ranges = {
        "log_tau": (low, high, True),
        "previous": (-1.0, 1.0, True),
        "rate": (-2.0, 2.0, False),
        "start": (math.log(_MIN_DIVERGENCE), math.log(2.0), False),
        "updates": (0, math.inf, False),
        "step": (0, math.inf, True),
        "best_accuracy": (0.0, 1.0, True),
        "floor": (low, high, True),
        "falling": (low, high, True),
    }
    for key, (lowest, highest, optional) in ranges.items():
        value = state.get(key)
        if value is None and (optional or key not in ("rate", "start", "updates")):
            continue
        valid = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (math.isfinite(value) and lowest - 1e-9 <= value <= highest + 1e-9)
        )
        if not valid:
            raise ValueError(
                f"The checkpoint's τ controller state has {key}={value!r}, which no run saves "
                f"(valid: a finite number in [{lowest:.4g}, {highest:.4g}]"
                f"{', or None' if optional else ''}): the checkpoint was altered; resume from "
                f"another checkpoint of the run."
            )


def target_cost_message(
    target: DiversityTarget, best: float, accuracy: float, cosine: float, step: int
) -> str:
    """The warning when ``target`` stops strengthening the push because the validation accuracy
    fell from ``best`` to ``accuracy`` at two validations in a row
    (:meth:`DiversityTarget.validated`)."""
    return (
        f"target_diversity={target.target:g} costs accuracy at this budget: the ensemble's "
        f"validation accuracy fell from {best:.1%} (its best) to {accuracy:.1%} at step {step} "
        f"(and was as low at the validation before) "
        f"while tau was pushed to {target.tau:.4g} and σNorm-cos reached {cosine:.4f}; the "
        f"controller stops strengthening the push (tau stays >= {math.exp(target.floor):.4g}, its "
        f"value at the first low validation). Choose a "
        f"higher target, train longer, or lower the scale rate (scale_lr_multiplier)."
    )


def missed_target_message(
    target: DiversityTarget, cosine: float, steps: int, member_spread: float = 0.0
) -> str:
    """The warning when a run ends with the regularized layers' σNorm-cos ``cosine`` away from
    ``target``'s target, saying why (a bound reached, the budget, the accuracy floor) and what
    to try."""
    bound = target.at_bound()
    spread = (
        f"raise member_spread (it is {member_spread:g})"
        if member_spread
        else "give the model member_spread (e.g. 0.3)"
    )
    if bound == "lower" or (bound is None and cosine > target.target):
        why = (
            "tau reached its lower bound: the regularizer pushes as hard as it can and the "
            f"members still share too much. {spread.capitalize()}, raise "
            "diversity_strength (lambda), or train longer"
            if bound == "lower"
            else "the run ended before σNorm-cos came down to the target: train longer, "
            f"{spread}, or raise diversity_strength (lambda)"
        )
    elif bound == "upper":
        why = (
            "tau reached its upper bound, where the regularizer stops pushing: nothing in "
            "σN-Ens pulls members together but the task loss, so members more diverse than "
            "the target stay so. Choose a lower target"
            + (f", a lower member_spread (it is {member_spread:g})" if member_spread else "")
            + ", or train longer"
        )
    else:
        why = "the run ended before σNorm-cos settled: train longer"
    if target.floor is not None:
        why = (
            f"the controller stopped strengthening the push when the validation accuracy "
            f"stayed {ACCURACY_DROP:.0%} below its best for two validations (tau held >= "
            f"{math.exp(target.floor):.4g}): this target costs more accuracy than this "
            f"budget affords"
        )
    return (
        f"target_diversity={target.target:g} was not reached: the regularized layers' "
        f"σNorm-cos is {cosine:.4f} after {steps} steps (tolerance ±{TARGET_TOLERANCE}), with "
        f"tau at {target.tau:.4g}; {why}."
    )


def tested_off_target_message(
    target: float, cosine: float, checkpoint: str | None, fit_end: tuple[int, float] | None
) -> str:
    """The warning when the model a ``test`` evaluated (``checkpoint``, else the weights in
    memory) has the regularized layers' σNorm-cos ``cosine`` away from ``target``; ``fit_end``
    is ``(steps, σNorm-cos)`` where this process's ``fit`` ended, if it ran one."""
    tested = f"the checkpoint {checkpoint}" if checkpoint else "the weights in memory"
    ended = ""
    if fit_end is not None:
        steps, end = fit_end
        verdict = "within" if abs(end - target) <= TARGET_TOLERANCE else "also outside"
        ended = f"; the fit ended at {end:.4f} after {steps} steps ({verdict} the tolerance)"
    return (
        f"target_diversity={target:g} does not hold for the tested model: {tested} has the "
        f"regularized layers' σNorm-cos {cosine:.4f} (tolerance ±{TARGET_TOLERANCE}){ended}. "
        f"eval_after_fit and `test --ckpt_path best` evaluate the checkpoint best by "
        f"validation accuracy, which may be saved before the push reached the target: test "
        f"the last weights (ckpt_path='last' with ModelCheckpoint(save_last=True)), or train "
        f"longer so that the target is reached earlier in the run."
    )
