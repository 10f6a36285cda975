"""DiversityTargetCallback: τ set once per optimisation step, fed the ensemble's accuracy."""

from types import SimpleNamespace

import pytest
import torch

from fixtures.training import signorm_routine
from torch_uncertainty_signorm.signorm.diversity_target import DiversityTarget


def _fitting(step: int) -> SimpleNamespace:
    return SimpleNamespace(state=SimpleNamespace(fn="fit"), sanity_checking=False, global_step=step)


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
    routine = signorm_routine(target_diversity=0.5)
    callback = routine.target_callback
    callback.controller = DiversityTarget(0.5, 0.1, 100)
    _validate(routine, callback, 1.0, step=10)
    _validate(routine, callback, 0.5, step=20)  # once: early fluctuations stay silent
    with pytest.warns(
        UserWarning,
        match=r"target_diversity=0\.5 costs accuracy at this budget: "
        r"the ensemble's validation accuracy fell from 100\.0% \(its best\) to "
        r"40\.0% at step 30",
    ):
        _validate(routine, callback, 0.4, step=30)
    assert callback.controller.best_accuracy == 1.0 and callback.controller.floor is not None


def test_tau_is_set_once_per_optimisation_step():
    """Under gradient accumulation, every batch of a step sees the same τ."""
    routine = signorm_routine(target_diversity=0.5)
    callback = routine.target_callback
    callback.controller = DiversityTarget(0.5, routine.model, 100)  # τ's owner: the model
    for step in (0, 0, 1, 1):
        callback.on_train_batch_start(_fitting(step), routine, None, 0)
    assert callback.controller.updates == 2
    assert routine.model.tau == callback.controller.tau


def test_a_tested_checkpoint_away_from_the_target_is_warned_about_once():
    """eval_after_fit tests the best checkpoint by validation accuracy, which may predate the
    target (the digits quickstart at seed 5 ended fit at 0.436 for a target of 0.45 and tested
    the step-54 checkpoint at 0.561): the test says so."""
    import warnings

    from torch_uncertainty_signorm.callbacks.identical_members import regularized_cosine

    torch.manual_seed(0)
    routine = signorm_routine(target_diversity=0.1)
    callback = routine.target_callback
    cosine = regularized_cosine(routine.model)
    assert cosine > 0.2  # the fresh ensemble is away from 0.1
    callback.fit_end = (90, 0.1)  # as if the fit had ended on the target
    tested = SimpleNamespace(ckpt_path="epoch=2-step=54.ckpt")
    with pytest.warns(
        UserWarning,
        match=(
            rf"target_diversity=0.1 does not hold for the tested model: the checkpoint "
            rf"epoch=2-step=54.ckpt has the regularized layers' σNorm-cos {cosine:.4f} "
            rf"\(tolerance ±0.05\); the fit ended at 0.1000 after 90 steps \(within the "
            rf"tolerance\)\. eval_after_fit and `test --ckpt_path best` evaluate the checkpoint "
            rf"best by validation accuracy"
        ),
    ) as record:
        callback.on_test_end(tested, routine)
    assert len([w for w in record if "does not hold" in str(w.message)]) == 1
    callback.target = cosine  # tested weights on the target: nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        callback.on_test_end(tested, routine)
