"""A checkpoint's τ and its τ controller's state are what the run's configuration allows."""

from __future__ import annotations

import math

import pytest

from torch_uncertainty_signorm.signorm.checkpoint_tau import checkpoint_tau
from torch_uncertainty_signorm.signorm.diversity_target import DiversityTarget

CONTROLLED = {"signorm_diversity_target": {"target": 0.5}}


def test_a_fixed_tau_runs_checkpoint_holds_its_configured_tau():
    assert checkpoint_tau({"signorm_tau": 0.1}, 0.1) == 0.1
    assert checkpoint_tau({}, 0.1) is None
    with pytest.raises(
        ValueError,
        match=r"signorm_tau=500, but the run's configuration gives "
        r"tau=0.1",
    ) as error:
        checkpoint_tau({"signorm_tau": 500.0}, 0.1)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0, 1e308, "0.1", True])
def test_a_tau_no_run_saves_is_refused(value):
    with pytest.raises(ValueError, match=r"which no run saves \(a finite τ in \["):
        checkpoint_tau({"signorm_tau": value, **CONTROLLED}, 0.1)


def test_a_controlled_run_restores_the_tau_it_reached():
    assert checkpoint_tau({"signorm_tau": 2.5, **CONTROLLED}, 0.1, controlled=True) == 2.5
    assert checkpoint_tau({"signorm_tau": 2.5}, 0.1, controlled=True) == 2.5
    with pytest.raises(ValueError, match=r"in \[0.001, 10\]"):
        checkpoint_tau({"signorm_tau": 500.0, **CONTROLLED}, 0.1, controlled=True)


@pytest.mark.parametrize(
    "beside",
    [
        {"signorm_diversity_target": {}},
        {"signorm_diversity_target": {"target": 0.5}},
        {"signorm_diversity_target": {"log_tau": 1.6094379124341003}},
        {"signorm_diversity_target": 0},
        {"tau_controller": {"target": 0.5}},
    ],
    ids=["empty state", "a target", "legacy log_tau", "not a mapping", "unknown key"],
)
def test_a_fixed_tau_run_reads_tau_one_way_whatever_else_the_checkpoint_holds(beside):
    """A fixed-τ checkpoint whose τ was edited to 5 is refused beside any other entry: whether
    τ may move is the run's configuration's to say, not the checkpoint's."""
    with pytest.raises(ValueError, match=r"signorm_tau=5, but .* tau=0.1 and no target_div"):
        checkpoint_tau({"signorm_tau": 5.0, **beside}, 0.1)


def test_a_checkpoint_saved_with_another_target_setting_is_refused():
    """The checkpoint's saved hyper-parameters say whether its run had a τ controller; the run
    reading it must agree (an edited ``target_diversity`` too)."""
    saved = {"signorm_tau": 5.0, "hyper_parameters": {"target_diversity": 0.5}}
    with pytest.raises(ValueError, match=r"saved by a run with target_diversity=0.5, but this"):
        checkpoint_tau(saved, 0.1)
    with pytest.raises(ValueError, match=r"target_diversity=None, but this run's configuration"):
        checkpoint_tau({"hyper_parameters": {"target_diversity": None}}, 0.1, controlled=True)
    assert checkpoint_tau(saved, 0.1, controlled=True) == 5.0


def test_a_controller_start_no_run_saves_is_refused():
    """start=-1e308 passed the state check and pinned τ at its upper bound."""
    target = DiversityTarget(0.5, tau=1.0, total_steps=100)
    target.update(0.99, 0)
    state = target.state_dict() | {"start": -1e308}
    with pytest.raises(ValueError, match=r"start=-1e\+308, which no run saves"):
        DiversityTarget(0.5, tau=1.0, total_steps=100).load_state_dict(state)


def test_a_tau_edited_in_the_saved_hyper_parameters_instead_is_refused():
    """A routine rebuilt from hyper-parameters whose τ was edited to 5 (load_from_checkpoint)
    reads the checkpoint's own τ against it, whatever else the file holds."""
    with pytest.raises(ValueError, match=r"signorm_tau=0.1, but .* tau=5 and no target_div"):
        checkpoint_tau({"signorm_tau": 0.1, "signorm_diversity_target": {}}, 5.0)
