"""DiversityTargetCallback: τ set once per optimisation step, fed the ensemble's accuracy."""

from types import SimpleNamespace

import pytest
import torch
from fixtures.digits import digits_signorm_routine

from torch_uncertainty_signorm.signorm.diversity_target import DiversityTarget


def _fitting(step: int) -> SimpleNamespace:
    return SimpleNamespace(state=SimpleNamespace(fn="fit"), sanity_checking=False,
                           global_step=step)


def _validate(routine, callback, accuracy: float, step: int) -> None:
    """One validation of 10 inputs whose ensemble accuracy is ``accuracy``, as the routine's
    member-health metric sums it; then the callback's hook."""
    members, targets = routine.model.num_estimators, torch.arange(10)
    right = round(accuracy * 10)
    predicted = torch.cat([targets[:right], (targets[right:] + 1) % 10])
    probs = torch.nn.functional.one_hot(predicted, 10).float().expand(members, -1, -1)
    routine.val_health.update(probs, targets)
    callback.on_validation_epoch_end(_fitting(step), routine)
    routine.val_health.reset()


def test_a_validation_accuracy_fall_twice_in_a_row_is_warned_about():
    routine = digits_signorm_routine(target_diversity=0.5)
    callback = routine.target_callback
    callback.controller = DiversityTarget(0.5, 0.1, 100)
    _validate(routine, callback, 1.0, step=10)
    _validate(routine, callback, 0.5, step=20)  # once: early fluctuations stay silent
    with pytest.warns(UserWarning, match=r"target_diversity=0\.5 costs accuracy at this budget: "
                      r"the ensemble's validation accuracy fell from 100\.0% \(its best\) to "
                      r"40\.0% at step 30"):
        _validate(routine, callback, 0.4, step=30)
    assert callback.controller.best_accuracy == 1.0 and callback.controller.floor is not None


def test_tau_is_set_once_per_optimisation_step():
    """Under gradient accumulation, every batch of a step sees the same τ."""
    routine = digits_signorm_routine(target_diversity=0.5)
    callback = routine.target_callback
    callback.controller = DiversityTarget(0.5, 0.1, 100)
    for step in (0, 0, 1, 1):
        callback.on_train_batch_start(_fitting(step), routine, None, 0)
    assert callback.controller.updates == 2
    assert routine.model.tau == callback.controller.tau
