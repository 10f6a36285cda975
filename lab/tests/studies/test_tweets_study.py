"""The tweets study's grid, commands and agreement analysis, and its budget follow-up's rule."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import save_file

from signorm_lab.cli.recipe_parsing import parse_recipe
from studies import tweets_study as study
from studies.tweets_rerun import budget_verdict


def test_the_grid_spans_three_decades_of_tau_with_three_seeds_and_trains_shared_runs_once():
    runs = study.study_runs()
    assert len(runs) == len(set(runs))
    sweep = {r.tau for r in runs if r.part == "sweeps" and r.num_estimators == 4}
    assert len(sweep) >= 5 and max(sweep) / min(sweep) >= 1e3
    for tau in sweep:
        seeds = {
            r.seed for r in runs if r.part == "sweeps" and r.tau == tau and r.num_estimators == 4
        }
        assert seeds == {0, 1, 2}
    assert {r.num_estimators for r in runs if r.part == "sweeps"} == {2, 3, 4, 8}
    methods = {(r.method, r.seed) for r in runs if r.part == "methods"}
    assert methods == {(m, s) for m in study.RECIPES for s in (0, 1, 2)}


@pytest.mark.parametrize(
    "run",
    [
        study.StudyRun("signorm", 1, num_estimators=8, tau=0.01, part="sweeps"),
        study.StudyRun("deep_ensembles", 2),
    ],
)
def test_each_command_parses_with_the_command_own_parser_and_sets_the_run(run, tmp_path):
    command = run.command(tmp_path)
    assert command[:2] == ["torch-uncertainty", "fit"]
    config = parse_recipe(command[3], command[4:])
    budget = run.budget
    assert config.seed_everything == run.seed
    assert config.trainer.max_steps == budget["steps"]
    assert config.data.init_args.batch_size == budget["batch_size"]
    assert config.data.init_args.test_size == budget["test_size"]
    assert config.trainer.logger.init_args.version == f"seed{run.seed}"
    assert any("TestPredictionWriter" in c.class_path for c in config.trainer.callbacks)
    if run.method == "signorm":
        model = config.routine.init_args.model.init_args
        assert (model.tau, model.num_estimators) == (run.tau, run.num_estimators)


def _predictions(folder, probs, targets):
    folder.mkdir(parents=True)
    save_file({"probs/0": probs.contiguous(), "targets/0": targets}, folder / study.PREDICTIONS)


def test_agreement_auroc_ranks_disagreeing_members_on_low_agreement_tweets(tmp_path):
    """Members disagree exactly on the low-agreement tweets: U_mod separates them perfectly."""
    confidence = torch.tensor([1.0, 0.5, 1.0, 0.6, math.nan, 0.9])
    targets = torch.tensor([0, 1, 2, 0, 1, 2])
    agree = torch.tensor([0.8, 0.1, 0.1])
    probs = agree.expand(2, 6, 3).clone()
    probs[0, [1, 3]] = torch.tensor([0.1, 0.8, 0.1])  # member 0 disagrees on tweets 1 and 3
    _predictions(tmp_path / "ensemble", probs, targets)
    row = study.agreement_aurocs(tmp_path / "ensemble", confidence, targets)
    assert row["tweets"] == 5 and row["low_agreement"] == 2  # the NaN tweet is left out
    assert row["AUROC_U_mod"] == 1.0
    _predictions(tmp_path / "single", probs[:1], targets)
    aurocs = study.agreement_aurocs(tmp_path / "single", confidence, targets)
    assert math.isnan(aurocs["AUROC_U_mod"])


def test_predictions_of_other_tweets_are_refused(tmp_path):
    targets = torch.tensor([0, 1, 2])
    _predictions(tmp_path / "run", torch.full((1, 3, 3), 1 / 3), targets)
    with pytest.raises(ValueError, match="not the study's test tweets"):
        study.agreement_aurocs(tmp_path / "run", torch.ones(3), torch.tensor([2, 1, 0]))


def test_the_controlled_study_redraws_training_tweets_per_seed_and_compensates_members(tmp_path):
    from studies import tweets_controlled as controlled

    runs = controlled.study_runs()
    assert len(runs) == len(set(runs)) == 16
    names = {r.name for r in runs}
    assert {
        "single",
        "deep_ensembles_M4",
        "signorm_M1_tau0.08",
        "signorm_M4_tau0.04",
        "signorm_M4_tau0.08",
        "signorm_M4_tau0.16",
    } == names
    for run in (
        controlled.StudyRun("signorm", 2, tau=0.16, evaluate_shift=False),
        controlled.StudyRun("deep_ensembles", 1),
    ):
        command = run.command(tmp_path)
        config = parse_recipe(command[3], command[4:])
        data = config.data.init_args
        assert data.subset_seed == run.seed and data.test_size >= 1500
        assert data.held_out_topic == "coachella"
        assert config.lr_scheduler.init_args.warmup_steps == 10
        assert data.eval_shift_severities == run.evaluate_shift
        if run.method == "signorm":
            assert config.routine.init_args.member_lr_multiplier == run.num_estimators
            assert config.routine.init_args.model.init_args.tau == run.tau
        else:  # the members' 1/M share of the gradient, compensated the same way
            assert config.optimizer.init_args.lr == pytest.approx(0.01 * run.num_estimators)


def test_paired_tweet_difference_interval_covers_the_shift():
    import numpy as np

    from studies.tweets_controlled import paired_tweet_difference

    rng = np.random.default_rng(0)
    base = rng.normal(size=1500)
    row = paired_tweet_difference(base + 0.1 + rng.normal(scale=0.05, size=1500), base)
    assert row["low"] < row["mean"] < row["high"] and abs(row["mean"] - 0.1) < 0.005
    assert row["low"] > 0 and row["high"] - row["low"] < 0.01 and row["p"] < 1e-6


def test_the_budget_follow_up_claims_a_difference_only_where_holm_rejected():
    assert budget_verdict(-0.05, -0.01) == "σN-Ens better"
    assert budget_verdict(-0.05, -0.01, rejected=False) == "open (Holm stopped before it)"
    # Holm's decision does not touch an interval inside the margin.
    assert budget_verdict(-0.005, 0.008, rejected=False) == "equivalent within ±0.01 nats"
