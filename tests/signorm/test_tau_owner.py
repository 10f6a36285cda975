"""τ lives in one place, the penalty, changed through ``set_tau``; the config holds where a run
started, and an export and a checkpoint record where it ended."""

from __future__ import annotations

import json

import pytest
from fixtures.backbones import tiny_resnet, tiny_signorm_spec
from torch import nn

from torch_uncertainty_signorm import export, signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine


def test_set_tau_moves_the_penalty_and_leaves_the_config_as_it_started():
    model = signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5)
    model.set_tau(0.2)
    assert model.tau == model.penalty.tau == 0.2
    assert model.config.tau == 0.5
    with pytest.raises(AttributeError):
        model.penalty.tau = 0.3  # only through set_tau
    with pytest.raises(ValueError, match="tau"):
        model.set_tau(0.0)


def test_an_export_records_the_tau_the_run_ended_with(tmp_path):
    spec = tiny_signorm_spec(2, style="cifar", tau=0.5)
    model = export.build_model(spec)
    model.set_tau(0.2)
    folder = export.export_ensemble(model.eval(), spec, tmp_path / "out")
    assert json.loads((folder / "config.json").read_text())["model"]["init_args"]["tau"] == 0.2
    assert export.load_ensemble(folder).tau == 0.2


def test_a_checkpoint_records_the_tau_the_run_ended_with():
    routine = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5), 10, nn.CrossEntropyLoss())
    routine.model.set_tau(0.2)  # where a τ controller moved it
    checkpoint = {"signorm_diversity_target": {"target": 0.5}}  # the controller's state
    routine.on_save_checkpoint(checkpoint)
    reloaded = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5), 10, nn.CrossEntropyLoss())
    reloaded.on_load_checkpoint(checkpoint)
    assert reloaded.model.tau == 0.2
    # without a controller's state, a run kept its configured τ: another one is refused
    del checkpoint["signorm_diversity_target"]
    fixed = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), num_estimators=2, tau=0.5), 10, nn.CrossEntropyLoss())
    with pytest.raises(ValueError, match=r"signorm_tau=0.2, but the run's configuration gives "
                                         r"tau=0.5 .* no τ controller state"):
        fixed.on_load_checkpoint(checkpoint)
    assert fixed.model.tau == 0.5
