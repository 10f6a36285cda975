"""SigmaNormClassificationRoutine: the regularizer, its logs, its groups, its checkpoints."""

import csv
import warnings

import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.transforms import RepeatTarget

from fixtures.backbones import randomize_norms, tiny_resnet
from fixtures.crafted import crafted_checkpoint
from fixtures.marker_module import assert_not_imported, marker_module
from fixtures.training import cpu_trainer, separable_loader, signorm_routine
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.regularization_guard import (
    MissingRegularizerError,
    require_diversity_loss,
)


def test_scale_logits_get_their_own_group_at_100x_without_weight_decay():
    routine = signorm_routine()  # base lr 0.05
    optimizer = routine.configure_optimizers()
    base, scales = optimizer.param_groups
    assert scales["lr"] == pytest.approx(5.0) and scales["weight_decay"] == 0.0
    assert base["lr"] == 0.05 and base["weight_decay"] == 5e-4
    scale_ids = {id(p) for p in routine.model.scale_logits()}
    assert {id(p) for p in scales["params"]} == scale_ids
    all_ids = [id(p) for p in routine.parameters()]
    assert sorted(all_ids) == sorted(id(p) for g in optimizer.param_groups for p in g["params"])


def test_training_loss_is_task_loss_plus_lambda_diversity_term():
    routine = signorm_routine(diversity_strength=0.3)
    routine.log = lambda *args, **kwargs: None  # logging needs a running loop
    inputs, targets = torch.randn(6, 1, 8, 8), torch.randint(0, 10, (6,))
    torch.manual_seed(0)
    loss = routine.training_step((inputs, targets))
    logits = routine.model(inputs)
    expected = nn.functional.cross_entropy(logits, targets.repeat(4))
    expected = expected + routine.model.diversity_loss()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    assert routine.model.diversity_loss() < 0  # sum of log-shares, scaled by λ > 0


def test_low_temperature_lowers_signorm_cos():
    """τ is the control: 3 epochs at τ = 0.1 end with far more diverse members than τ = 10,
    both accurate.

    Only the members' parameters are compared. Their outputs' diversity (the Jensen gap) follows
    τ in some seeds and not in others at such budgets; the digits study leaves that link open
    too (claim C2, studies/results/digits_study).
    """
    cosines = {}
    for tau in (0.1, 10.0):
        torch.manual_seed(0)
        routine = signorm_routine(tau=tau)
        trainer = cpu_trainer(max_epochs=3)
        trainer.fit(routine, separable_loader(320, batch_size=32, shuffle=True))
        results = trainer.validate(routine, separable_loader(256, seed=1), verbose=False)[0]
        assert results["val/cls/Acc"] > 0.85
        cosines[tau] = results["val/div/signorm_cos_regularized"]
    assert cosines[0.1] < cosines[10.0] - 0.3, cosines


def test_test_metrics_hold_the_members_diversity_beside_torch_uncertainty_metrics():
    """``trainer.test`` gives the diversity, member and health metrics next to TorchUncertainty's
    own (the OOD set: noise images)."""
    torch.manual_seed(0)
    routine, trainer = signorm_routine(eval_ood=True), cpu_trainer()
    noise = DataLoader(TensorDataset(torch.randn(64, 1, 8, 8), torch.zeros(64).long()), 32)
    per_loader = trainer.test(routine, [separable_loader(64, seed=2), noise], verbose=False)
    results = {key: value for logged in per_loader for key, value in logged.items()}
    for key in (
        "test/cls/Acc",
        "ood/AUROC",
        "test/ens_MI",
        "test/div/signorm_cos",
        "test/div/signorm_cos_regularized",
        "test/div/jensen_gap",
        "test/div/geometric_ambiguity",
        "test/health/dead_members",
        *(f"test/member_{m}/{name}" for m in range(4) for name in ("Acc", "NLL")),
    ):
        assert key in results, key
    assert 0 < results["test/member_3/Acc"] <= 1  # a fraction, as test/cls/Acc
    # the mutual information (modulation uncertainty) is TorchUncertainty's, logged once
    assert "test/div/MI" not in results
    assert 0 < results["test/div/signorm_cos"] <= 1


def test_optimizer_without_groups_is_warned_about():
    routine = signorm_routine()
    routine.optim_recipe = torch.optim.SGD(routine.parameters(), lr=0.01)
    trainer = cpu_trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=0)
    with pytest.warns(UserWarning, match="share an optimizer group"):
        trainer.fit(routine, separable_loader(32, batch_size=32))


def test_bad_routine_arguments_name_the_value():
    with pytest.raises(TypeError, match=r"trains a SigmaNormEnsemble.*got _ResNet"):
        SigmaNormClassificationRoutine(tiny_resnet(), 10, nn.CrossEntropyLoss())
    model = signorm_ensemble(tiny_resnet(), 2)
    with pytest.raises(ValueError, match="scale_lr_multiplier must be a finite number > 0, got 0"):
        SigmaNormClassificationRoutine(model, 10, nn.CrossEntropyLoss(), scale_lr_multiplier=0)


def _fitted_routine(tmp_path):
    """A routine built in Python and fitted by a plain Trainer, and its checkpoint."""
    torch.manual_seed(0)
    routine = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), 2),
        loss=nn.CrossEntropyLoss(),
        optim_recipe=lambda model: torch.optim.SGD(model.parameters(), lr=0.1),
    )
    data = TensorDataset(torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,)))
    trainer = cpu_trainer(max_epochs=1, enable_checkpointing=True, default_root_dir=tmp_path)
    trainer.fit(routine, DataLoader(data, batch_size=4))
    (path,) = tmp_path.rglob("*.ckpt")
    return routine, path


def test_routine_built_in_python_reloads_from_its_checkpoint(tmp_path):
    """The checkpoint saves the arguments that are data (weights_only loading); the model and
    loss are given again, and the logits are the same."""
    routine, path = _fitted_routine(tmp_path)
    saved = torch.load(path, weights_only=True)["hyper_parameters"]
    assert saved["member_lr_multiplier"] == 1.0
    assert not {"model", "loss", "optim_recipe"} & saved.keys()  # objects: given again

    loaded = SigmaNormClassificationRoutine.load_from_checkpoint(
        path, model=signorm_ensemble(tiny_resnet(), 2), loss=nn.CrossEntropyLoss()
    )
    inputs = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(inputs), routine.eval()(inputs))
    assert loaded.num_classes == 10 and loaded.format_batch_fn.num_repeats == 2


def test_load_from_checkpoint_never_imports_a_checkpoint_class(tmp_path, monkeypatch):
    """A crafted checkpoint asking for Lightning's jsonargparse instantiator and naming its own
    model class is refused, naming the block, before that class's module is imported: the
    routine takes objects, never a class path from a file."""
    name, marker = marker_module(tmp_path, monkeypatch, "routine_load_marker")
    path = crafted_checkpoint(
        tmp_path / "crafted.ckpt",
        _class_path="torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine",
        _instantiator="lightning.pytorch.cli.instantiate_module",
        model={"class_path": f"{name}.Evil"},
        num_classes=10,
    )
    with pytest.raises(
        TypeError,
        match=rf"model=\{{'class_path': '{name}\.Evil'\}} is a class_path/init_args block.*"
        r"load_from_checkpoint\(path, model=\.\.\.\).*load_routine\(path\)",
    ):
        SigmaNormClassificationRoutine.load_from_checkpoint(path)
    assert_not_imported(name, marker)


def test_a_plain_string_batch_format_is_refused(tmp_path):
    path = crafted_checkpoint(
        tmp_path / "crafted.ckpt", num_classes=10, format_batch_fn="RepeatTarget"
    )
    with pytest.raises(
        TypeError, match=r"format_batch_fn must be an nn.Module, got str 'RepeatTarget'"
    ):
        SigmaNormClassificationRoutine.load_from_checkpoint(
            path, model=signorm_ensemble(tiny_resnet(), 2)
        )


def test_non_finite_test_inputs_are_an_error_naming_the_batch():
    """Not a metric's failure on non-finite scores after the whole test set: the batch."""
    routine = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), 2), loss=nn.CrossEntropyLoss()
    )
    images = torch.randn(8, 3, 32, 32)
    images[5, 0, 0, 0] = float("nan")
    loader = DataLoader(TensorDataset(images, torch.randint(0, 10, (8,))), batch_size=4)
    with pytest.raises(
        ValueError,
        match=r"The inputs of test batch 1 of loader 0 hold 1 "
        r"non-finite value\(s\) \(NaN or inf\) out of 12288",
    ):
        cpu_trainer().test(routine, loader)


def test_ensemble_arguments_are_derived_from_the_model():
    routine = SigmaNormClassificationRoutine(signorm_ensemble(tiny_resnet(num_classes=7), 3))
    assert routine.num_classes == 7 and routine.is_ensemble is True
    assert isinstance(routine.format_batch_fn, RepeatTarget)
    assert routine.format_batch_fn.num_repeats == 3
    assert "model" not in routine.hparams  # an object, not data: give it to load_from_checkpoint


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"num_classes": 5}, r"num_classes=5, but the model's member heads predict 10 classes"),
        (
            {"is_ensemble": False},
            (
                r"is_ensemble=False, but the model is an ensemble of "
                r"num_estimators=2"
            ),
        ),
        (
            {"format_batch_fn": RepeatTarget(3)},
            (
                r"repeats the targets 3 times, but the model has "
                r"num_estimators=2"
            ),
        ),
    ],
    ids=["num_classes", "is_ensemble", "format_batch_fn"],
)
def test_arguments_contradicting_the_model_fail_at_construction(arguments, message):
    model = signorm_ensemble(tiny_resnet(), 2)
    with pytest.raises(ValueError, match=message):
        SigmaNormClassificationRoutine(model, loss=nn.CrossEntropyLoss(), **arguments)


# --- TorchUncertainty's plain ClassificationRoutine with a σN-Ens ------------------------------


def _plain_routine(model) -> ClassificationRoutine:
    return ClassificationRoutine(
        model,
        10,
        nn.CrossEntropyLoss(),
        is_ensemble=True,
        format_batch_fn=RepeatTarget(model.num_estimators),
        optim_recipe=torch.optim.SGD(model.parameters(), lr=0.1),
    )


def _loader() -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(4, 3, 32, 32, generator=generator), torch.arange(4))
    return DataLoader(data, batch_size=2)


def test_plain_routine_fit_fails_before_the_first_step():
    """TU's routine would optimise the task loss alone (another method): stopped at the first
    backward, the weights untouched, the error naming the routine to use."""
    model = signorm_ensemble(tiny_resnet(), 2)
    require_diversity_loss(model)  # idempotent; SigmaNormEnsemble should register it itself
    before = {k: v.clone() for k, v in model.state_dict().items() if v.is_floating_point()}
    trainer = cpu_trainer(max_epochs=1, limit_val_batches=0)
    with pytest.raises(
        MissingRegularizerError,
        match=r"without its diversity regularizer.*"
        r"SigmaNormClassificationRoutine",
    ):
        trainer.fit(_plain_routine(model), _loader())
    assert trainer.global_step == 0
    for name, value in model.state_dict().items():
        if name in before and "running" not in name and "num_batches" not in name:
            assert torch.equal(value, before[name]), name


def test_plain_routine_evaluates_a_signorm_ensemble():
    """Testing, validating and predicting a trained σN-Ens with TU's routine stay legitimate."""
    model = signorm_ensemble(tiny_resnet(), 2)
    require_diversity_loss(model)
    routine, trainer = _plain_routine(model), cpu_trainer(max_epochs=1)
    assert "test/cls/Acc" in trainer.test(routine, _loader(), verbose=False)[0]
    assert "val/cls/Acc" in trainer.validate(routine, _loader(), verbose=False)[0]
    logits = trainer.predict(routine, DataLoader(torch.randn(4, 3, 32, 32), batch_size=2))
    assert [x.shape for x in logits] == [(2 * 2, 10)] * 2  # (M B) member-major, per batch


def test_regularization_guard_passes_signorm_routine_and_manual_loops():
    model = signorm_ensemble(tiny_resnet(), 2)
    require_diversity_loss(model)
    inputs, targets = torch.randn(2, 3, 32, 32), torch.arange(2)
    diversity = model.diversity_loss()  # before the forward: counted too
    loss = nn.functional.cross_entropy(model(inputs), targets.repeat(2)) + diversity
    loss.backward()
    assert model.scale_logits()[0].grad is not None
    routine = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), 2),
        loss=nn.CrossEntropyLoss(),
        optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
    )
    require_diversity_loss(routine.model)
    trainer = cpu_trainer(max_epochs=1, limit_val_batches=0)
    trainer.fit(routine, _loader())
    assert trainer.global_step == 2


def _sgd_momentum(model: nn.Module) -> torch.optim.SGD:
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def _converted_routine(member_spread: float = 0.0, **routine_kwargs):
    """σN-Ens converted from a 'pretrained' tiny ResNet-18 (identical members unless spread),
    SGD with momentum and the σNorm groups."""
    torch.manual_seed(0)
    model = signorm_ensemble(
        randomize_norms(tiny_resnet()),
        2,
        pretrained=True,
        regularized_layers="resnet18",
        tau=0.5,
        diversity_strength=1e-3,
        member_spread=member_spread,
    )
    return SigmaNormClassificationRoutine(
        model,
        10,
        nn.CrossEntropyLoss(),
        optim_recipe=_sgd_momentum,
        **routine_kwargs,
    )


def _loaders(size: int = 8):
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(size, 3, 32, 32, generator=generator),
        torch.randint(0, 10, (size,), generator=generator),
    )
    return DataLoader(data, batch_size=4), DataLoader(data, batch_size=4)


def _logged(tmp_path) -> list[dict]:
    with (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").open() as file:
        return list(csv.DictReader(file))


def test_training_logs_diversity_and_tau_every_log_every_n_steps(tmp_path):
    routine = _converted_routine(member_spread=0.3)
    trainer = cpu_trainer(
        max_steps=6, log_every_n_steps=2, limit_val_batches=0, logger=CSVLogger(tmp_path)
    )
    trainer.fit(routine, _loaders(24)[0])
    assert "train/signorm_cos" in trainer.progress_bar_metrics
    assert "train/tau" not in trainer.progress_bar_metrics  # τ is fixed without a target
    rows = [r for r in _logged(tmp_path) if r.get("train/tau")]
    assert [int(r["step"]) for r in rows] == [1, 3, 5]  # Lightning logs steps 2, 4, 6
    for row in rows:
        assert float(row["train/tau"]) == 0.5  # no target: the model's τ, unchanged
        assert 0 < float(row["train/signorm_cos_regularized"]) < 0.999
        assert float(row["train/signorm_cos"]) > float(row["train/signorm_cos_regularized"])
        assert float(row["train/diversity_loss"]) < 0


def test_identical_members_are_warned_about_and_diverged_ones_are_not(tmp_path):
    train, val = _loaders()
    with pytest.warns(
        UserWarning,
        match=r"still one model at this validation: the regularized "
        r"layers' σNorm-cos is 0\.999\d+ \(>= 0\.999\) after 2 steps, at "
        r"tau=0\.5 and "
        r"diversity_strength \(lambda\)=0\.001.*member_spread.*target_diversity",
    ):
        cpu_trainer(max_epochs=1, num_sanity_val_steps=0).fit(_converted_routine(), train, val)
    silent = _converted_routine(warn_identical_members=False)
    diverse = _converted_routine(member_spread=0.5)
    for routine in (silent, diverse):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            warnings.filterwarnings("ignore", message=r"(?!The σN-Ens members)")
            cpu_trainer(max_epochs=1, num_sanity_val_steps=0).fit(routine, train, val)


def test_a_target_from_identical_members_asks_for_a_spread():
    routine = _converted_routine(target_diversity=0.6)
    with pytest.warns(
        UserWarning,
        match=r"target_diversity=0\.6 starts from identical members.*"
        r"member_spread \(e\.g\. 0\.3\)",
    ):
        cpu_trainer(max_epochs=1, limit_val_batches=0).fit(routine, _loaders()[0])


def test_a_missed_target_is_warned_about_with_the_reason():
    """Two steps cannot bring identical-but-for-a-tiny-spread members to 0.3."""
    routine = _converted_routine(member_spread=0.01, target_diversity=0.3)
    trainer = cpu_trainer(max_epochs=1, limit_val_batches=0)
    with pytest.warns(
        UserWarning,
        match=r"target_diversity=0\.3 was not reached: the "
        r"regularized layers' σNorm-cos is (0\.99\d+|1\.0000) after 2 steps",
    ):
        trainer.fit(routine, _loaders()[0])
    assert routine.model.tau < 0.5  # the controller strengthened the push
    assert "train/tau" in trainer.progress_bar_metrics  # τ moves: on the progress bar


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_diversity": 1.2}, r"target_diversity must be a number in \(0, 1\), got 1.2"),
        ({"target_diversity": "0.5"}, r"target_diversity must be a number in \(0, 1\), got '0.5'"),
        ({"warn_identical_members": "no"}, r"warn_identical_members must be True or False"),
    ],
)
def test_bad_diversity_arguments_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _converted_routine(**kwargs)


def test_grouping_loss_is_evaluated_for_the_ensemble_beside_its_output_diversity():
    """TorchUncertainty refuses ``eval_grouping_loss`` with ``is_ensemble``; the σN-Ens routine
    evaluates it on the members' features of each input, and its output diversity still reads
    the logits of the same step."""
    routine = signorm_routine(eval_grouping_loss=True).eval()
    inputs, targets = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
    with torch.no_grad():
        routine.validation_step((inputs, targets))
        expected = routine.model(inputs)
    members = routine.model.num_estimators
    assert routine.is_ensemble and routine.features.shape[0] == 8  # one row per input
    assert routine.features.shape[1] % members == 0  # every member's features side by side
    torch.testing.assert_close(routine.model.linear(routine.features), expected)
    assert len(routine.val_grouping_loss["cls/grouping_loss"].features) == 1
    assert routine.val_diversity["jensen_gap"].update_count == 1


def test_the_routine_hands_its_callbacks_to_any_trainer():
    """The τ controller and the identical-members warning come from configure_callbacks(), so a
    Trainer built without them runs them; without a target or the warning there are none."""
    from torch_uncertainty_signorm.callbacks import (
        DiversityTargetCallback,
        IdenticalMembersWarning,
    )

    routine = _converted_routine(member_spread=0.3, target_diversity=0.6)
    assert [type(c) for c in routine.configure_callbacks()] == [
        DiversityTargetCallback,
        IdenticalMembersWarning,
    ]
    trainer = cpu_trainer(max_epochs=1, limit_val_batches=0)
    trainer.fit(routine, _loaders()[0])
    assert routine.diversity_target is routine.target_callback.controller
    assert routine.configure_callbacks() == []  # attached: a later test does not replace them
    assert routine.diversity_target.updates == trainer.global_step == 2
    assert _converted_routine(warn_identical_members=False).configure_callbacks() == []


def test_the_target_state_is_in_weights_only_checkpoints_and_load_from_checkpoint(tmp_path):
    """The controller's state is written by the routine's own checkpoint hook, as before it
    became a callback: weights-only checkpoints keep it, and a routine rebuilt by
    load_from_checkpoint continues the controller where it stopped."""
    routine = _converted_routine(member_spread=0.3, target_diversity=0.6)
    trainer = cpu_trainer(max_epochs=1, limit_val_batches=0)
    trainer.fit(routine, _loaders()[0])
    path = tmp_path / "weights.ckpt"
    trainer.save_checkpoint(path, weights_only=True)
    saved = torch.load(path, weights_only=True)["signorm_diversity_target"]
    assert saved == routine.diversity_target.state_dict() and saved["updates"] == 2

    loaded = SigmaNormClassificationRoutine.load_from_checkpoint(
        path,
        model=_converted_routine(member_spread=0.3).model,
        loss=nn.CrossEntropyLoss(),
        optim_recipe=_sgd_momentum,
        weights_only=False,
    )
    cpu_trainer(max_epochs=1, limit_val_batches=0).fit(loaded, _loaders()[0])
    assert loaded.diversity_target.updates == 4  # 2 restored + 2 of this fit
