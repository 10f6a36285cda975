"""FineTune: a single model's checkpoint is read safely, loaded, converted, and reproduced by
every member (``signorm_lab.models.finetune``); the method's deprecated ``checkpoint=`` still
gets there."""

import contextlib
import copy
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint
from safetensors.torch import save_file
from torch import nn
from torch_uncertainty.models.classification import resnet
from torch_uncertainty.routines import ClassificationRoutine

from fixtures.backbones import randomize_norms, relative_error, tiny_resnet
from fixtures.digits import cpu_trainer
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.cli import cli_main
from signorm_lab.cli.recipe_bases import composed_recipe
from signorm_lab.datamodules import DigitsDataModule
from signorm_lab.models.finetune import CHECKPOINT_OPTION, finetune_ensemble
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.signorm.layers import SigmaNorm

EXPERIMENTS = Path(__file__).parents[3] / "experiments"


def digits_resnet():
    return resnet(1, 10, 18, style="cifar", width_multiplier=0.25)


def test_lightning_checkpoint_of_a_trained_single_model_is_reproduced_by_every_member(tmp_path):
    single = digits_resnet()
    routine = ClassificationRoutine(
        single,
        10,
        nn.CrossEntropyLoss(),
        optim_recipe=torch.optim.SGD(single.parameters(), lr=0.05, momentum=0.9),
    )
    checkpointing = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    trainer = cpu_trainer(
        max_epochs=1,
        limit_train_batches=5,
        limit_val_batches=1,
        enable_checkpointing=True,
        callbacks=[checkpointing],
    )
    trainer.fit(routine, DigitsDataModule(batch_size=32))
    x = torch.randn(6, 1, 8, 8)
    with torch.no_grad():
        expected = single.eval().feats_forward(x)
    ensemble = finetune_ensemble(digits_resnet(), 4, str(tmp_path / "last.ckpt")).eval()
    assert ensemble.config.pretrained
    with torch.no_grad():
        members = ensemble.forward_features(x).unflatten(0, (4, -1))
    for member in members:
        assert relative_error(member, expected) <= 1e-5


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_plain_state_dicts_load(tmp_path, suffix):
    source = randomize_norms(tiny_resnet())  # trained-looking norms: an untrained one is refused
    path = tmp_path / f"weights{suffix}"
    state = {k: v.contiguous() for k, v in source.state_dict().items()}
    torch.save(state, path) if suffix == ".pt" else save_file(state, path)
    ensemble = finetune_ensemble(tiny_resnet(), 2, path, tau=0.5)
    torch.testing.assert_close(ensemble.backbone.conv1.weight, source.conv1.weight)
    assert ensemble.config.tau == 0.5


@pytest.mark.parametrize(
    ("write", "error", "message"),
    [
        (
            lambda p: torch.save(
                resnet(3, 10, 50, style="cifar", width_multiplier=0.125).state_dict(), p
            ),
            ValueError,
            r"does not fit _ResNet: unexpected: .*shape mismatch: layer1.0.conv1.weight",
        ),
        (lambda p: p.write_bytes(b"PK\x03\x04 truncated"), ValueError, "could not be read"),
        (
            lambda p: torch.save({"step": torch.tensor(1), "notes": "x"}, p),
            ValueError,
            "holds no state dict of tensors",
        ),
        (lambda p: None, FileNotFoundError, "does not exist or is not a file"),
        (
            lambda p: torch.save(tiny_resnet().state_dict(), p),
            ValueError,
            r"holds an untrained _ResNet: every normalization layer is at its initial state",
        ),
    ],
    ids=["other-architecture", "truncated", "not-a-state-dict", "missing-file", "untrained"],
)
def test_bad_checkpoints_name_the_file_and_leave_the_model_untouched(
    tmp_path, write, error, message
):
    path = tmp_path / "bad.ckpt"
    write(path)
    model = randomize_norms(tiny_resnet())
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(error, match=message) as raised:
        finetune_ensemble(model, 4, path)
    assert str(path) in str(raised.value)
    assert not any(isinstance(m, SigmaNorm) for m in model.modules())
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_a_bad_setting_is_refused_before_the_checkpoint_is_read(tmp_path):
    with pytest.raises(ValueError, match=r"head_norm must be 'auto', 'batch' or 'layer'"):
        finetune_ensemble(tiny_resnet(), 2, tmp_path / "absent.ckpt", head_norm="group")


def test_the_deprecated_checkpoint_argument_warns_and_loads_as_finetune_does(tmp_path):
    torch.save(randomize_norms(tiny_resnet()).state_dict(), tmp_path / "single.pt")
    torch.manual_seed(0)
    new = finetune_ensemble(tiny_resnet(), 2, tmp_path / "single.pt")
    torch.manual_seed(0)
    with pytest.warns(
        FutureWarning,
        match=r"checkpoint=\.\.\.\) is deprecated and will be removed in 0\.3\.0: the lab's "
        r"signorm_lab\.models\.finetune\.finetune_ensemble",
    ):
        old = signorm_ensemble(tiny_resnet(), 2, pretrained=True, checkpoint=tmp_path / "single.pt")
    assert old.config == new.config
    for (key, a), b in zip(old.state_dict().items(), new.state_dict().values(), strict=True):
        assert torch.equal(a, b), key


@pytest.mark.parametrize("written", ["finetune_ensemble", "signorm_ensemble of 0.1.0"])
def test_the_finetune_recipe_builds_from_the_checkpoint_its_option_names(
    written, tmp_path, monkeypatch
):
    """Through the command, the option is the same whichever class the recipe names: today's
    FineTune recipe, or one written for 0.1.0 (the deprecated checkpoint=, with its warning)."""
    monkeypatch.chdir(tmp_path)
    single = randomize_norms(resnet(3, 10, 18, style="cifar", width_multiplier=0.125))
    torch.save(single.state_dict(), tmp_path / "single.pt")
    recipe = composed_recipe(EXPERIMENTS / "resnet18_c10_signorm_finetune.yaml")
    block = recipe["routine"]["init_args"]["model"]
    assert block["class_path"] == "signorm_lab.models.finetune.finetune_ensemble"
    warns = contextlib.nullcontext()
    if written != "finetune_ensemble":
        block["class_path"] = "torch_uncertainty_signorm.signorm_ensemble"
        block["init_args"]["pretrained"] = True
        warns = pytest.warns(FutureWarning, match=r"checkpoint=\.\.\.\) is deprecated")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    with warns:
        cli = cli_main(
            [
                "--config",
                "recipe.yaml",
                f"{CHECKPOINT_OPTION}={tmp_path / 'single.pt'}",
                "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125",
                f"--data={SyntheticDataModule.__module__}.SyntheticDataModule",
                "--data.init_args.batch_size=4",
                "--trainer.accelerator=cpu",
                "--trainer.precision=32",
            ],
            run=False,
        )
    ensemble = cli.routine.model
    assert ensemble.config.pretrained and ensemble.num_estimators == 4
    torch.testing.assert_close(ensemble.backbone.conv1.weight, single.conv1.weight)
