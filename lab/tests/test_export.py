"""Export to safetensors + JSON, reload into an identical model, and plain member models."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
import yaml
from lightning.pytorch import Trainer
from torch import nn

from fixtures.backbones import (
    bert_inputs,
    randomize_norms,
    tiny_bert,
    tiny_resnet,
    tiny_signorm_spec,
    tiny_vit,
)
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.cli.export import main
from signorm_lab.export import (
    build_model,
    export_ensemble,
    load_ensemble,
    load_member,
    member_model,
)
from torch_uncertainty_signorm import SigmaGroupNorm, SigmaRMSNorm, signorm_ensemble
from torch_uncertainty_signorm.members import MemberModel
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.layers import SigmaNorm

SIGNORM_ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"

M = 3
SPEC = tiny_signorm_spec(M, style="cifar", tau=0.5)


def _trained_like(model: nn.Module) -> nn.Module:
    """Move the running statistics away from their initial values, then switch to eval."""
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, 32, 32) * 2 + 1)
    return model.eval()


def _member_rows(ensemble: nn.Module, inputs, member: int) -> torch.Tensor:
    return ensemble(inputs).unflatten(0, (ensemble.num_estimators, -1))[member]


def test_export_then_reload_gives_identical_outputs(tmp_path):
    model = _trained_like(build_model(SPEC))
    export_ensemble(model, SPEC, tmp_path)
    reloaded = load_ensemble(tmp_path)

    state, reloaded_state = model.state_dict(), reloaded.state_dict()
    assert state.keys() == reloaded_state.keys()
    assert all(torch.equal(state[k], reloaded_state[k]) for k in state)
    inputs = torch.randn(5, 3, 32, 32)
    assert torch.equal(reloaded(inputs), model(inputs))
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["num_estimators"] == M and config["members"] == []
    assert not list(tmp_path.glob("*.pt*")) and (tmp_path / "ensemble.safetensors").is_file()


def _pretrained_resnet():
    return signorm_ensemble(randomize_norms(tiny_resnet()), M, pretrained=True)


def _vit():
    return signorm_ensemble(randomize_norms(tiny_vit()), M, pretrained=True)


def _groupnorm_cnn():
    torch.manual_seed(0)
    backbone = nn.Sequential(
        nn.Conv2d(3, 8, 3),
        nn.GroupNorm(2, 8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 8),
        nn.RMSNorm(8),
        nn.Linear(8, 5),
    )
    return signorm_ensemble(backbone, M, head="7", head_norm="layer")


CASES = {
    "resnet-from-scratch": (lambda: build_model(SPEC), lambda: torch.randn(4, 3, 32, 32)),
    "resnet-converted-pretrained": (_pretrained_resnet, lambda: torch.randn(4, 3, 32, 32)),
    "vit-layernorm-expand-at-blocks": (_vit, lambda: torch.randn(4, 3, 32, 32)),
    "groupnorm-rmsnorm": (_groupnorm_cnn, lambda: torch.randn(4, 3, 8, 8)),
    "bert-mapping-inputs": (
        lambda: signorm_ensemble(randomize_norms(tiny_bert()), M, pretrained=True),
        bert_inputs,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_member_model_equals_the_members_output(case):
    build, make_inputs = CASES[case]
    torch.manual_seed(0)
    ensemble = build()
    if case.startswith("resnet"):
        _trained_like(ensemble)
    ensemble.eval()
    inputs = make_inputs()
    for member in range(M):
        plain = member_model(ensemble, member).eval()
        assert not any(isinstance(m, SigmaNorm) for m in plain.modules())
        with torch.no_grad():
            torch.testing.assert_close(
                plain(inputs), _member_rows(ensemble, inputs, member), rtol=1e-5, atol=1e-5
            )
    kinds = {type(m) for m in ensemble.modules()}
    if case == "groupnorm-rmsnorm":
        assert {SigmaGroupNorm, SigmaRMSNorm} <= kinds


def test_members_differ_and_training_mode_matches_too():
    ensemble = _trained_like(build_model(SPEC)).train()
    inputs = torch.randn(6, 3, 32, 32)
    member = member_model(ensemble, 1)
    assert member.training
    with torch.no_grad():
        torch.testing.assert_close(
            member(inputs), _member_rows(ensemble, inputs, 1), rtol=1e-5, atol=1e-5
        )
        ensemble.eval()
        assert not torch.allclose(
            member_model(ensemble, 0).eval()(inputs),
            member_model(ensemble, 1).eval()(inputs),
            atol=1e-3,
        )


def test_folded_batchnorm_holds_the_members_statistics_and_effective_scale():
    ensemble = _trained_like(_pretrained_resnet())
    layer = ensemble.backbone.layer1[0].bn1
    plain = layer.to_plain(2)
    assert type(plain) is nn.BatchNorm2d
    assert torch.equal(plain.running_mean, layer.running_mean[2])
    assert torch.equal(plain.running_var, layer.running_var[2])
    expected_scale = layer.magnitude * layer.sign * torch.sigmoid(layer.scale_logits[2])
    torch.testing.assert_close(plain.weight, expected_scale)
    assert torch.equal(plain.bias, layer.shift)


def test_exported_members_reload(tmp_path):
    model = _trained_like(build_model(SPEC))
    export_ensemble(model, SPEC, tmp_path, members=True)
    inputs = torch.randn(3, 3, 32, 32)
    for member in range(M):
        reloaded = load_member(tmp_path, member)
        assert isinstance(reloaded, MemberModel)
        assert torch.equal(reloaded(inputs), member_model(model, member).eval()(inputs))


def _settings_as_config(spec: dict) -> dict:
    """``spec`` with its σN-Ens settings in one ``config:`` block, as a checkpoint stores a recipe
    that gives them as a :class:`~torch_uncertainty_signorm.SigmaNormConfig`."""
    init_args = dict(spec["init_args"])
    kept = {key: init_args.pop(key) for key in ("model", "num_estimators")}
    return {
        **spec,
        "init_args": {
            **kept,
            "config": {
                "class_path": "torch_uncertainty_signorm.SigmaNormConfig",
                "init_args": init_args,
            },
        },
    }


@pytest.mark.slow
@pytest.mark.parametrize("settings", ["keywords", "config"])
def test_command_exports_a_lightning_checkpoint(tmp_path, settings):
    """Train one step, save the Lightning checkpoint, export it from the recipe, reload: the
    settings given as keyword arguments or as one ``config:`` block."""
    spec = SPEC if settings == "keywords" else _settings_as_config(SPEC)
    routine = SigmaNormClassificationRoutine(
        build_model(spec),
        10,
        nn.CrossEntropyLoss(),
        optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
    )
    trainer = Trainer(
        accelerator="cpu",
        max_steps=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        enable_checkpointing=False,
        limit_val_batches=0,
    )
    trainer.fit(routine, SyntheticDataModule(batch_size=4))
    trainer.save_checkpoint(tmp_path / "run.ckpt")
    assert "state_dict" in torch.load(tmp_path / "run.ckpt", weights_only=True)
    recipe = tmp_path / "recipe.yaml"  # as in experiments/: the command's enum names (CIFAR)
    recipe_spec = copy.deepcopy(spec)
    recipe_spec["init_args"]["model"]["init_args"]["style"] = "CIFAR"
    recipe.write_text(
        yaml.safe_dump(
            {
                "routine": {
                    "class_path": "torch_uncertainty_signorm.routines."
                    "SigmaNormClassificationRoutine",
                    "init_args": {
                        "num_classes": 10,
                        "model": recipe_spec,
                        "loss": {"class_path": "torch.nn.CrossEntropyLoss"},
                    },
                },
                "data": {"class_path": "signorm_lab.datamodules.DigitsDataModule"},
            }
        )
    )

    out = main(
        [
            "--config",
            str(recipe),
            "--ckpt_path",
            str(tmp_path / "run.ckpt"),
            "--output",
            str(tmp_path / "export"),
            "--members",
        ]
    )

    reloaded = load_ensemble(out)
    inputs = torch.randn(2, 3, 32, 32)
    routine.model.eval()
    assert torch.equal(reloaded(inputs), routine.model(inputs))
    torch.testing.assert_close(  # the folded member computes the ensemble's rows another way
        load_member(out, 2)(inputs), _member_rows(routine.model, inputs, 2), rtol=1e-5, atol=1e-5
    )
    assert reloaded.config.tau == 0.5  # the settings, read from either form
    assert reloaded.regularized_layer_names == routine.model.regularized_layer_names


def _write_recipe(path, **routine_args) -> str:
    """A recipe of :data:`SPEC` (the command's ``CIFAR`` spelling) at ``path``."""
    recipe_spec = copy.deepcopy(SPEC)
    recipe_spec["init_args"]["model"]["init_args"]["style"] = "CIFAR"
    init_args = {
        "num_classes": 10,
        "model": recipe_spec,
        "loss": {"class_path": "torch.nn.CrossEntropyLoss"},
        **routine_args,
    }
    routine = {"class_path": SIGNORM_ROUTINE, "init_args": init_args}
    data = {"class_path": "signorm_lab.datamodules.DigitsDataModule"}
    path.write_text(yaml.safe_dump({"routine": routine, "data": data}))
    return str(path)


def test_the_command_reads_the_checkpoint_once(tmp_path, monkeypatch):
    """One ``torch.load`` (``weights_only=True``) gives both the weights and the τ the run
    ended with; the checks run on what it read."""
    routine = SigmaNormClassificationRoutine(
        _trained_like(build_model(SPEC)), 10, nn.CrossEntropyLoss()
    )
    torch.save(
        {
            "state_dict": routine.state_dict(),
            "signorm_tau": 0.25,  # a controlled run's
            "signorm_diversity_target": {"target": 0.5},
        },
        tmp_path / "run.ckpt",
    )
    _write_recipe(tmp_path / "recipe.yaml", target_diversity=0.5)
    loads, load = [], torch.load

    def counted(*args, **kwargs):
        loads.append(kwargs.get("weights_only"))
        return load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", counted)
    out = main(
        [
            "--config",
            str(tmp_path / "recipe.yaml"),
            "--ckpt_path",
            str(tmp_path / "run.ckpt"),
            "--output",
            str(tmp_path / "export"),
        ]
    )
    assert loads == [True]
    reloaded = load_ensemble(out)
    assert reloaded.tau == 0.25
    inputs = torch.randn(2, 3, 32, 32)
    assert torch.equal(reloaded(inputs), routine.model.eval()(inputs))


def test_a_config_block_that_fetches_weights_is_refused_on_loading(tmp_path):
    """An export's ``config:`` block is held to the rules of the keyword arguments: a backbone
    ``checkpoint`` set in it would read weights from elsewhere, so loading refuses it."""
    export_ensemble(build_model(SPEC), SPEC, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model"] = _settings_as_config(config["model"])
    config["model"]["init_args"]["config"]["init_args"]["checkpoint"] = "elsewhere.ckpt"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError,
        match=r"model\.init_args\.config\.init_args\.checkpoint="
        r"'elsewhere\.ckpt'",
    ):
        load_ensemble(tmp_path)
    del config["model"]["init_args"]["config"]["init_args"]["checkpoint"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert load_ensemble(tmp_path).config.tau == 0.5


def test_an_argument_holding_an_object_other_than_its_default_is_not_exported(tmp_path):
    spec = copy.deepcopy(SPEC)
    spec["init_args"]["model"]["init_args"]["activation_fn"] = torch.nn.functional.gelu
    with pytest.raises(
        ValueError,
        match=r"model\.init_args\.model\.init_args\.activation_fn="
        r".*gelu.* cannot be exported: config.json holds data",
    ):
        export_ensemble(build_model(SPEC), spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    spec["init_args"]["model"]["init_args"]["activation_fn"] = torch.nn.functional.relu  # default
    export_ensemble(build_model(SPEC), spec, tmp_path / "out")
    exported = json.loads((tmp_path / "out" / "config.json").read_text())["model"]
    assert "activation_fn" not in exported["init_args"]["model"]["init_args"]


def test_an_export_never_replaces_files_unless_asked(tmp_path):
    """``--output`` holding anything is refused before any work, with every file kept;
    ``--overwrite`` / ``overwrite=True`` replaces the export."""
    out = export_ensemble(build_model(SPEC).eval(), SPEC, tmp_path / "out")
    (out / "notes.txt").write_text("the user's")
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    with pytest.raises(
        FileExistsError,
        match=r"'.*out' is not empty \(config.json, "
        r"ensemble.safetensors, notes.txt\): nothing was "
        r"written.*--overwrite",
    ):
        main(
            [
                "--config",
                str(tmp_path / "recipe.yaml"),
                "--ckpt_path",
                str(tmp_path / "run.ckpt"),
                "--output",
                str(out),
            ]
        )  # neither file exists
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_ensemble(build_model(SPEC).eval(), SPEC, out)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before

    export_ensemble(build_model(SPEC).eval(), SPEC, out, members=True, overwrite=True)
    config = json.loads((out / "config.json").read_text())
    assert config["members"] == [f"member_{m}.safetensors" for m in range(M)]
    assert (out / "notes.txt").read_text() == "the user's"
    assert not list(out.glob("*.partial"))


def test_exports_store_the_regularized_layer_names_not_the_pattern(tmp_path):
    spec = tiny_signorm_spec(2, style="cifar", regularized_layers=r"(.*\.)?layer\d+\.\d+\.bn2")
    model = build_model(spec)
    export_ensemble(model, spec, tmp_path / "out")
    stored = json.loads((tmp_path / "out" / "config.json").read_text())["model"]["init_args"]
    assert stored["regularized_layers"] == model.regularized_layer_names
    assert load_ensemble(tmp_path / "out").regularized_layer_names == model.regularized_layer_names


def test_the_command_exports_the_tau_of_an_earlier_releases_target_checkpoint(tmp_path):
    """A checkpoint written before τ had one key holds it in the τ controller's state alone;
    the export reads it there (checkpoint_tau), as loading and resuming do."""
    routine = SigmaNormClassificationRoutine(
        _trained_like(build_model(SPEC)), 10, nn.CrossEntropyLoss()
    )
    torch.save(
        {
            "state_dict": routine.state_dict(),
            "signorm_diversity_target": {"log_tau": math.log(0.25)},
        },
        tmp_path / "run.ckpt",
    )
    _write_recipe(tmp_path / "recipe.yaml", target_diversity=0.5)
    out = main(
        [
            "--config",
            str(tmp_path / "recipe.yaml"),
            "--ckpt_path",
            str(tmp_path / "run.ckpt"),
            "--output",
            str(tmp_path / "export"),
        ]
    )
    assert load_ensemble(out).tau == pytest.approx(0.25)


#: Entries beside an edited ``signorm_tau`` that once switched the fixed-τ check off.
_BESIDE_TAU = {
    "an empty controller state": {"signorm_diversity_target": {}},
    "an earlier release's log_tau": {"signorm_diversity_target": {"log_tau": math.log(0.5)}},
    "a controller state that is no mapping": {"signorm_diversity_target": 1},
    "an unknown key": {"tau_controller": {"target": 0.5}},
    "a target in the saved hyper-parameters": {"hyper_parameters": {"target_diversity": 0.5}},
}


@pytest.mark.parametrize("beside", list(_BESIDE_TAU))
def test_an_edited_tau_is_refused_whatever_else_the_checkpoint_holds(tmp_path, beside):
    """A fixed-τ run's checkpoint with ``signorm_tau`` edited to 5 is refused in one line, with
    any other entry beside it: τ is read one way, against the recipe's routine."""
    routine = SigmaNormClassificationRoutine(
        _trained_like(build_model(SPEC)), 10, nn.CrossEntropyLoss()
    )
    checkpoint = {"state_dict": routine.state_dict(), "signorm_tau": 5.0, **_BESIDE_TAU[beside]}
    torch.save(checkpoint, tmp_path / "run.ckpt")
    argv = ["--config", _write_recipe(tmp_path / "recipe.yaml"), "--ckpt_path"]
    with pytest.raises(ValueError, match=r"run\.ckpt (holds signorm_tau=5|was saved by a run)"):
        main([*argv, str(tmp_path / "run.ckpt"), "--output", str(tmp_path / "export")])
    assert not (tmp_path / "export").exists()


def test_print_config_prints_what_would_be_exported_and_exports_nothing(tmp_path, capsys):
    """As on a Lightning CLI: the resolved configuration, exit status 0, nothing read or written
    beyond the recipe (here the checkpoint does not even exist)."""
    from signorm_lab.cli.export import command

    recipe = _write_recipe(tmp_path / "recipe.yaml")
    out = tmp_path / "export"
    argv = ["--config", recipe, "--ckpt_path", str(tmp_path / "none.ckpt"), "--output", str(out)]
    assert command([*argv, "--routine.init_args.model.init_args.tau=0.3", "--print_config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["output"] == str(out) and printed["target_diversity"] is None
    assert printed["model"]["init_args"]["tau"] == 0.3  # the override, applied
    assert printed["model"]["init_args"]["model"]["init_args"]["style"] == "cifar"
    assert not out.exists()
    assert "--print_config" in _help(command)


def _help(command) -> str:
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        command(["--help"])
    return text.getvalue()
