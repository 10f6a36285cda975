"""Member health: a one-class, constant or NaN member (or ensemble) is found, named and logged."""

import csv
import warnings

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from fixtures.training import cpu_trainer
from torch_uncertainty_signorm import predict, signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.routines.member_health import (
    CONSTANT_OUTPUT_STD,
    WARNING_PREFIX,
    MemberHealth,
    diagnose,
    health_conditions,
    health_counts,
    member_accuracy_nll,
)

M, N, C = 3, 120, 4
TARGETS = torch.arange(N) % C  # balanced labels


def _healthy_probs() -> torch.Tensor:
    """Members that predict the label (with input-dependent confidence): (M, N, C)."""
    confidence = torch.linspace(0.4, 0.9, N).view(1, N, 1)
    hit = F.one_hot(TARGETS, C).float().expand(M, N, C)
    return hit * confidence + (1 - hit) * (1 - confidence) / (C - 1)


def _found(conditions) -> set[tuple[str, int | None]]:
    return {(c.condition, c.member) for c in conditions}


def test_a_healthy_ensemble_has_no_condition_and_its_members_full_accuracy():
    probs = _healthy_probs()
    assert health_conditions(probs, TARGETS) == []
    accuracy, nll = member_accuracy_nll(probs, TARGETS)
    assert accuracy.shape == nll.shape == (M,)
    torch.testing.assert_close(accuracy, torch.ones(M, dtype=torch.float64))
    expected_nll = -probs[0, torch.arange(N), TARGETS].double().log().mean()
    torch.testing.assert_close(nll, expected_nll.repeat(M))


def test_an_ensemble_predicting_one_class_on_balanced_labels_is_flagged():
    probs = _healthy_probs()
    probs[:, :, 0] += 2.0  # every member, so the ensemble, puts its argmax on class 0
    probs = probs / probs.sum(-1, keepdim=True)
    found = health_conditions(probs, TARGETS)
    ensemble = {c.condition: c for c in found if c.member is None}
    assert ensemble["one_class"].value == 1.0 and ensemble["one_class"].threshold == 0.95
    assert ensemble["chance_accuracy"].value == 0.25  # balanced 4 classes: 1/C
    assert ensemble["chance_accuracy"].threshold == pytest.approx(0.26)
    assert health_counts(found)["one_class"] == 1
    # Labels that are one class themselves: predicting it is not flagged as one class.
    assert "one_class" not in {c.condition for c in health_conditions(probs, TARGETS * 0)}


def test_a_dead_member_is_flagged_with_its_index_and_the_healthy_ones_are_not():
    probs = _healthy_probs()
    probs[1] = torch.tensor([0.7, 0.1, 0.1, 0.1])  # member 1: the same output for every input
    found = health_conditions(probs, TARGETS)
    assert {member for _, member in _found(found)} == {1}
    constant = next(c for c in found if c.condition == "constant_output")
    assert constant.value < 1e-6 and constant.threshold == CONSTANT_OUTPUT_STD
    assert _found(found) == {("constant_output", 1), ("one_class", 1), ("chance_accuracy", 1)}
    assert health_counts(found) == {
        "non_finite": 0,
        "constant_output": 0,
        "one_class": 0,
        "chance_accuracy": 0,
        "dead_members": 1,
    }


def test_nan_in_one_member_is_flagged_for_it_and_the_ensemble():
    probs = _healthy_probs()
    probs[2, 5, 1] = float("nan")
    flagged = {m for c, m in _found(health_conditions(probs, TARGETS)) if c == "non_finite"}
    assert flagged == {2, None}
    logits = torch.zeros(M, N, C)
    logits[0, 0, 0] = -float("inf")  # softmax gives a finite 0: only the logits show it
    found = health_conditions(_healthy_probs(), TARGETS, logits)
    assert _found(found) == {("non_finite", 0)} and found[0].value == 1


def test_the_metric_sums_batches_to_the_whole_sets_statistics():
    probs = _healthy_probs()
    probs[1] = torch.tensor([0.7, 0.1, 0.1, 0.1])
    metric = MemberHealth(M, C)
    for part in torch.arange(N).split(50):
        metric.update(probs[:, part], TARGETS[part])
    stats = metric.compute()
    assert diagnose(stats) == health_conditions(probs, TARGETS)
    torch.testing.assert_close(stats.accuracy()[:M], member_accuracy_nll(probs, TARGETS)[0])
    with pytest.raises(ValueError, match=r"expects 3 members' probabilities, got shape \(2, "):
        metric.update(probs[:2], TARGETS)


# --- through the routine ------------------------------------------------------------------------

FEATURES, CLASSES, MEMBERS = 6, 3, 4


def _data(size: int, seed: int) -> TensorDataset:
    """Inputs whose label is the largest of their first 3 features: linearly separable."""
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(size, FEATURES, generator=generator)
    return TensorDataset(inputs, inputs[:, :CLASSES].argmax(-1))


def _trained_routine(**kwargs) -> SigmaNormClassificationRoutine:
    """A σN-Ens of a BatchNorm MLP (M = 4), trained until every member is accurate; ``kwargs``
    go to the routine."""
    torch.manual_seed(0)
    mlp = nn.Sequential(
        nn.Linear(FEATURES, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, CLASSES)
    )
    model = signorm_ensemble(mlp, MEMBERS, head="3")
    inputs, targets = _data(256, seed=1).tensors
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(60):
        loss = F.cross_entropy(model(inputs), targets.repeat(MEMBERS)) + model.diversity_loss()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return SigmaNormClassificationRoutine(model, loss=nn.CrossEntropyLoss(), **kwargs)


def _test(routine) -> tuple[dict, list[str]]:
    loader = DataLoader(_data(96, seed=2), batch_size=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (results,) = cpu_trainer().test(routine, loader, verbose=False)
    return results, [str(w.message) for w in caught if WARNING_PREFIX in str(w.message)]


def test_a_dead_member_is_warned_about_by_index_and_the_members_metrics_are_logged():
    routine = _trained_routine()
    with torch.no_grad():  # member 2 ignores its features: the same logits for every input
        routine.model.heads.weight[2] = 0.0
        routine.model.heads.bias[2] = torch.tensor([3.0, 0.0, 0.0])
    results, health = _test(routine)
    assert health and all("member 2 " in message for message in health), health
    constant = next(m for m in health if "same output for every input" in m)
    assert constant.startswith(f"{WARNING_PREFIX} (test, step 0): member 2 ")
    assert "try a lower scale_lr_multiplier or a higher tau" in constant
    assert results["test/health/dead_members"] == 1
    assert results["test/health/constant_output"] == 0  # the ensemble still follows the input
    for member in range(MEMBERS):
        assert f"test/member_{member}/Acc" in results and f"test/member_{member}/NLL" in results
    assert results["test/member_2/Acc"] < 0.5 < results["test/member_0/Acc"]
    assert results["test/member_2/NLL"] > results["test/member_0/NLL"]


def test_a_healthy_routine_gives_no_health_warning_and_the_members_accuracy():
    results, health = _test(_trained_routine())
    assert health == []
    assert results["test/health/dead_members"] == 0
    accuracies = [results[f"test/member_{m}/Acc"] for m in range(MEMBERS)]
    assert min(accuracies) > 0.8, accuracies
    # The members' accuracies are fractions, as TorchUncertainty's ensemble accuracy.
    assert 0.8 < results["test/cls/Acc"] <= 1


def test_validations_during_fit_log_the_checks_and_warn_once_per_condition_and_member(tmp_path):
    """Two validations (after steps 3 and 6) find the same dead member: warned once, when it is
    found again (not at the sanity check, nor at the first, which may be a transient); both
    validations are logged."""
    routine = _trained_routine(  # a rate too small to revive the member
        optim_recipe=lambda model: torch.optim.SGD(model.parameters(), lr=1e-12)
    )
    with torch.no_grad():
        routine.model.heads.weight[2] = 0.0
    loader = DataLoader(_data(96, seed=2), batch_size=32)
    trainer = cpu_trainer(max_epochs=2, logger=CSVLogger(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(routine, loader, loader)
    health = [str(w.message) for w in caught if WARNING_PREFIX in str(w.message)]
    assert len(health) == 3, health  # constant output, one class, chance accuracy
    assert all(m.startswith(f"{WARNING_PREFIX} (val, step 6): member 2 ") for m in health)
    (metrics,) = tmp_path.rglob("metrics.csv")
    with metrics.open() as file:
        rows = [row for row in csv.DictReader(file) if row.get("val/health/dead_members")]
    assert [(int(r["step"]), float(r["val/health/dead_members"])) for r in rows] == [
        (2, 1.0),
        (5, 1.0),
    ]
    assert all(float(r["val/health/one_class"]) == 0 for r in rows)


def test_a_condition_seen_at_the_only_validation_is_warned_about_when_fit_ends():
    routine = _trained_routine(
        optim_recipe=lambda model: torch.optim.SGD(model.parameters(), lr=1e-12)
    )
    with torch.no_grad():
        routine.model.heads.weight[1] = 0.0
    loader = DataLoader(_data(96, seed=2), batch_size=32)
    with pytest.warns(
        UserWarning,
        match=rf"^{WARNING_PREFIX} \(val, step 3\): member 1 gives "
        r"the same output for every input",
    ):
        cpu_trainer(max_epochs=1, num_sanity_val_steps=0).fit(routine, loader, loader)


def test_predict_returns_each_members_probabilities_beside_their_mean():
    routine = _trained_routine()
    loader = DataLoader(_data(10, seed=3), batch_size=4)  # batches of 4, 4, 2
    prediction = predict(routine.model, loader)
    assert prediction.member_probs.shape == (MEMBERS, 10, CLASSES)
    torch.testing.assert_close(prediction.member_probs.mean(0), prediction.probs, atol=1e-6, rtol=0)
    whole = predict(routine.model, _data(10, seed=3).tensors[0])
    torch.testing.assert_close(prediction.member_probs, whole.member_probs, atol=1e-6, rtol=0)
    outputs = cpu_trainer().predict(routine, loader)
    member_probs = torch.cat([out.member_probs for out in outputs], dim=1)
    torch.testing.assert_close(member_probs, whole.member_probs, atol=1e-6, rtol=0)
