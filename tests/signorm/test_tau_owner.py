"""τ lives in one place, the penalty, changed through ``set_tau``; the config holds where a run
started, and a checkpoint records where it ended (an export: the lab's
lab/tests/signorm/test_tau_owner.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fixtures.backbones import tiny_resnet
from fixtures.training import cpu_trainer
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.checkpoint_tau import CHECKPOINT_TAU, checkpoint_tau


def test_set_tau_moves_the_penalty_and_leaves_the_config_as_it_started():
    model = signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5)
    model.set_tau(0.2)
    assert model.tau == model.penalty.tau == 0.2
    assert model.config.tau == 0.5
    with pytest.raises(AttributeError):
        model.penalty.tau = 0.3  # only through set_tau
    with pytest.raises(ValueError, match="tau"):
        model.set_tau(0.0)


def test_a_checkpoint_records_the_tau_the_run_ended_with():
    routine = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5), 10, nn.CrossEntropyLoss()
    )
    routine.model.set_tau(0.2)  # where a τ controller moved it
    checkpoint = {"signorm_diversity_target": {"target": 0.5}}  # the controller's state
    routine.on_save_checkpoint(checkpoint)
    reloaded = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5),
        10,
        nn.CrossEntropyLoss(),
        target_diversity=0.6,
    )
    reloaded.on_load_checkpoint(checkpoint)
    assert reloaded.model.tau == 0.2
    # a run without a controller kept its configured τ: another one is refused, whatever else
    # the checkpoint holds (here the controller's state)
    fixed = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5), 10, nn.CrossEntropyLoss()
    )
    with pytest.raises(
        ValueError,
        match=r"signorm_tau=0.2, but the run's configuration gives "
        r"tau=0.5 and no target_diversity",
    ):
        fixed.on_load_checkpoint(checkpoint)
    assert fixed.model.tau == 0.5


def _target_routine(tau: float = 0.5) -> SigmaNormClassificationRoutine:
    model = signorm_ensemble(
        tiny_resnet(), num_estimators=2, tau=tau, member_spread=0.3, regularized_layers="resnet18"
    )
    return SigmaNormClassificationRoutine(
        model,
        10,
        nn.CrossEntropyLoss(),
        target_diversity=0.6,
        optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
    )


def _loader():
    data = TensorDataset(torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,)))
    return DataLoader(data, batch_size=4)


def test_a_checkpoint_holds_the_live_tau_once_and_test_resume_and_load_read_it(tmp_path):
    """Under target_diversity the controller moves τ; the checkpoint records it under
    signorm_tau alone (the controller's state holds no copy), and each reader takes that key."""
    routine = _target_routine()
    trainer = cpu_trainer(max_epochs=1, limit_val_batches=0)
    trainer.fit(routine, _loader())
    path = tmp_path / "run.ckpt"
    trainer.save_checkpoint(path)
    saved = torch.load(path, weights_only=True)
    live = routine.model.tau
    assert live != 0.5 and saved[CHECKPOINT_TAU] == live
    assert "log_tau" not in saved["signorm_diversity_target"]
    saved[CHECKPOINT_TAU] = 0.3  # whatever this key says is what every reader takes
    torch.save(saved, path)

    assert (
        SigmaNormClassificationRoutine.load_from_checkpoint(
            path, model=_target_routine().model, loss=nn.CrossEntropyLoss(), weights_only=False
        ).model.tau
        == 0.3
    )
    tested = _target_routine()
    cpu_trainer().test(tested, _loader(), ckpt_path=path, weights_only=False, verbose=False)
    assert tested.model.tau == 0.3
    resumed = _target_routine()
    resumed.on_load_checkpoint(torch.load(path, weights_only=True))  # as fit --ckpt_path does
    fake = SimpleNamespace(
        optimizers=[resumed.configure_optimizers()], estimated_stepping_batches=4
    )
    resumed.target_callback.on_train_start(fake, resumed)
    assert resumed.diversity_target.tau == resumed.model.tau == 0.3
    resumed.target_callback.on_train_batch_start(SimpleNamespace(global_step=2), resumed, None, 0)
    assert resumed.diversity_target.tau == resumed.model.tau != 0.3  # one value, moved once


def test_a_checkpoint_of_an_earlier_release_gives_its_controllers_tau():
    assert checkpoint_tau({"signorm_diversity_target": {"log_tau": math.log(0.3)}}) == (
        pytest.approx(0.3)
    )
    assert (
        checkpoint_tau(
            {CHECKPOINT_TAU: 0.2, "signorm_diversity_target": {"log_tau": math.log(0.3)}}
        )
        == 0.2
    )
    assert checkpoint_tau({"state_dict": {}}) is None


def test_a_recipe_tau_outside_the_controllers_range_is_refused_not_clamped():
    with pytest.raises(
        ValueError,
        match=r"tau=50.0 is outside \[0.001, 10\] "
        r"\(CONTROLLED_TAU_RANGE\), where target_diversity moves tau",
    ):
        _target_routine(tau=50.0)
    assert _target_routine(tau=10.0).model.tau == 10.0  # the bound itself is kept
