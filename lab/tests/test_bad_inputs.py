"""A catalogue of bad inputs: each one fails with an error naming the value and what is valid.

Config values, YAML typos through the ``torch-uncertainty`` command, wrong tensor shapes,
batches not divisible by M, a backbone without normalization layers, checkpoints of another
architecture or M, truncated checkpoint files and missing dataset directories. Every case also
checks that no file on disk changed (hashes of the working directory before and after).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn

from fixtures.backbones import tiny_resnet
from signorm_lab.callbacks import ExactResumeCheckpoint
from signorm_lab.cli import cli_main
from signorm_lab.cli.export import main
from signorm_lab.datamodules import DigitsDataModule
from signorm_lab.export import export_ensemble, load_ensemble, load_member
from signorm_lab.models.finetune import finetune_ensemble
from torch_uncertainty_signorm import (
    MemberHeads,
    SigmaBatchNorm2d,
    SigmaLayerNorm,
    signorm_ensemble,
)
from torch_uncertainty_signorm.members.statistics import member_batch_norm
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.signorm.optim import signorm_param_groups

SIGNORM_ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"

M = 3
DIGITS_RECIPE = Path(__file__).parents[2] / "experiments" / "digits_signorm.yaml"
FINETUNE_RECIPE = Path(__file__).parents[2] / "experiments" / "resnet18_c10_signorm_finetune.yaml"
RESNET_SPEC = {
    "class_path": "torch_uncertainty.models.classification.resnet",
    "init_args": {
        "in_channels": 3,
        "num_classes": 10,
        "arch": 18,
        "style": "cifar",
        "width_multiplier": 0.125,
    },
}


class CommandLineError(Exception):
    """What the command printed before exiting with an error."""


def _command(*args: str) -> None:
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            cli_main(list(args))
    except SystemExit as exit_:
        if exit_.code:
            raise CommandLineError(stderr.getvalue()) from None


def _recipe_with(files: Path, old: str, new: str) -> str:
    """The digits recipe with one edit, written beside (not into) the checked directory."""
    text = DIGITS_RECIPE.read_text()
    assert old in text
    path = files.parent / f"{files.name}_inputs" / "edited_recipe.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text.replace(old, new))
    return str(path)


def _ensemble(**kwargs) -> nn.Module:
    return signorm_ensemble(tiny_resnet(), M, **kwargs)


def _finetune(checkpoint: Path, backbone: nn.Module | None = None, **kwargs) -> nn.Module:
    return finetune_ensemble(backbone or tiny_resnet(), M, str(checkpoint), **kwargs)


def _spec(num_estimators: int) -> dict:
    return {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"model": RESNET_SPEC, "num_estimators": num_estimators},
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """Checkpoints (good, truncated, another architecture, another M), recipes and an export."""
    root = tmp_path_factory.mktemp("bad_inputs")
    torch.save(tiny_resnet().state_dict(), root / "resnet18.pt")
    (root / "truncated.pt").write_bytes((root / "resnet18.pt").read_bytes()[:2000])
    ensemble_m2 = signorm_ensemble(tiny_resnet(), 2)
    torch.save(
        {"state_dict": {f"model.{k}": v for k, v in ensemble_m2.state_dict().items()}},
        root / "ensemble_m2.ckpt",
    )
    recipe_spec = _spec(M)  # as a recipe writes it: the command parses it as torch-uncertainty does
    recipe_spec["init_args"]["model"] = {
        **RESNET_SPEC,
        "init_args": {**RESNET_SPEC["init_args"], "style": "CIFAR"},
    }
    (root / "recipe_m3.yaml").write_text(
        yaml.safe_dump(
            {
                "routine": {
                    "class_path": SIGNORM_ROUTINE,
                    "init_args": {"num_classes": 10, "model": recipe_spec},
                },
                "data": {"class_path": "signorm_lab.datamodules.DigitsDataModule"},
            }
        )
    )
    (root / "empty.ckpt").write_bytes(b"")
    torch.save({"state_dict": {}, "hyper_parameters": ["model", "tau"]}, root / "hp_list.ckpt")
    torch.save({"state_dict": {}, "global_step": -5}, root / "negative_step.ckpt")
    torch.save(
        {"state_dict": {"model.heads.weight": torch.full((2, 2), float("nan"))}, "global_step": 3},
        root / "nan_weights.ckpt",
    )
    export_ensemble(signorm_ensemble(tiny_resnet(), M), _spec(M), root / "export")
    untrusted = root / "untrusted_export"
    untrusted.mkdir()
    config = json.loads((root / "export" / "config.json").read_text())
    config["model"]["class_path"] = "os.system"
    (untrusted / "config.json").write_text(json.dumps(config))
    return root


@dataclass(frozen=True)
class Case:
    id: str
    action: Callable[[Path], object]
    error: type[BaseException]
    match: str


CASES = [
    # ---------------------------------------------------------------- configuration values
    Case("num_estimators=0", lambda d: _ensemble_m(0), ValueError, r"num_estimators .*got 0"),
    Case("num_estimators='4'", lambda d: _ensemble_m("4"), ValueError, r"num_estimators .*got '4'"),
    Case(
        "num_estimators=True", lambda d: _ensemble_m(True), ValueError, r"num_estimators .*got True"
    ),
    Case(
        "num_estimators=2.0",
        lambda d: _ensemble_m(2.0),
        ValueError,
        r"num_estimators must be an integer >= 1, got 2.0",
    ),
    Case("tau=0", lambda d: _ensemble(tau=0), ValueError, r"tau .*got 0"),
    Case("tau=-1", lambda d: _ensemble(tau=-1.0), ValueError, r"tau .*got -1.0"),
    Case("tau=inf", lambda d: _ensemble(tau=float("inf")), ValueError, r"tau .*got inf"),
    Case(
        "diversity_strength<0",
        lambda d: _ensemble(diversity_strength=-0.1),
        ValueError,
        r"diversity_strength \(lambda\) .*got -0.1",
    ),
    Case(
        "scale_init_std=nan",
        lambda d: _ensemble(scale_init_std=float("nan")),
        ValueError,
        r"scale_init_std .*got nan",
    ),
    Case(
        "head_norm='group'",
        lambda d: _ensemble(head_norm="group"),
        ValueError,
        r"head_norm must be 'auto', 'batch' or 'layer', got 'group'",
    ),
    Case(
        "head='fc9'",
        lambda d: _ensemble(head="fc9"),
        ValueError,
        r"head='fc9' is not an nn.Linear submodule. Pass head='<name of the final nn.Linear>'",
    ),
    Case(
        "head='classifier'",
        lambda d: _ensemble(head="classifier"),
        ValueError,
        r"Cannot find the classifier of _?ResNet: head='classifier'",
    ),
    Case(
        "expand_at='layer9'",
        lambda d: _ensemble(expand_at="layer9"),
        ValueError,
        r"expand_at='layer9' is not a module of _?ResNet; use 'auto', 'input' or a module name",
    ),
    Case(
        "regularized_layers='resnet19'",
        lambda d: _ensemble(regularized_layers="resnet19"),
        ValueError,
        r"pattern 'resnet19' matches no σNorm layer. Presets: all, resnet18",
    ),
    Case(
        "regularized_layers=['layer9.bn2']",
        lambda d: _ensemble(regularized_layers=["layer9.bn2"]),
        ValueError,
        r"entry 'layer9.bn2' matches no σNorm layer. Available layers: .*layer1",
    ),
    Case(
        "pretrained='yes'",
        lambda d: _ensemble(pretrained="yes"),
        ValueError,
        r"pretrained must be True or False, got 'yes'",
    ),
    Case(
        "FineTune with pretrained=False",
        lambda d: _finetune(d / "resnet18.pt", pretrained=False),
        ValueError,
        r"finetune_ensemble converts a trained model: pretrained must be True .*got False",
    ),
    Case("num_classes=0", lambda d: _ensemble(num_classes=0), ValueError, r"num_classes .*got 0"),
    Case(
        "num_classes=True",
        lambda d: _ensemble(num_classes=True),
        ValueError,
        r"num_classes must be an integer >= 1, got True",
    ),
    Case("tau=1e9", lambda d: _ensemble(tau=1e9), ValueError, r"tau=1000000000.0 is outside"),
    Case(
        "tau=1e-9",
        lambda d: _ensemble(tau=1e-9),
        ValueError,
        r"tau=1e-09 is outside .*diversity_strength=0",
    ),
    Case("tau=True", lambda d: _ensemble(tau=True), ValueError, r"tau .*got True"),
    Case(
        "diversity_strength=True",
        lambda d: _ensemble(diversity_strength=True),
        ValueError,
        r"diversity_strength \(lambda\) .*got True",
    ),
    Case(
        "scale_lr_multiplier=True",
        lambda d: signorm_param_groups(_ensemble(), 0.1, True),
        ValueError,
        r"scale_lr_multiplier .*got True",
    ),
    Case(
        "routine of a plain model",
        lambda d: SigmaNormClassificationRoutine(tiny_resnet(), 10),
        TypeError,
        r"trains a SigmaNormEnsemble \(build one with torch_uncertainty_signorm.signorm_ensemble"
        r"\), got _?ResNet",
    ),
    Case(
        "scale_lr_multiplier=0",
        lambda d: SigmaNormClassificationRoutine(_ensemble(), 10, scale_lr_multiplier=0),
        ValueError,
        r"scale_lr_multiplier .*got 0",
    ),
    Case(
        "MemberHeads norm='group'",
        lambda d: MemberHeads(8, 10, M, norm="group"),
        ValueError,
        r"head norm must be 'batch' or 'layer', got 'group'",
    ),
    Case(
        "ExactResumeCheckpoint filename=''",
        lambda d: ExactResumeCheckpoint(filename=""),
        ValueError,
        r"filename must be a non-empty file name without directory, got ''",
    ),
    Case(
        "DigitsDataModule batch_size=0",
        lambda d: DigitsDataModule(batch_size=0),
        ValueError,
        r"batch_size .*got 0",
    ),
    # ---------------------------------------------------------------- tensor shapes
    Case(
        "σBN2d on a 3-D input",
        lambda d: SigmaBatchNorm2d(4, M)(torch.randn(6, 4, 5)),
        ValueError,
        r"SigmaBatchNorm2d expects a 4-D input, got shape \(6, 4, 5\)",
    ),
    Case(
        "batch not divisible by M",
        lambda d: SigmaBatchNorm2d(4, M)(torch.randn(4, 4, 2, 2)),
        ValueError,
        r"M = num_estimators = 3, got 4 rows .* does not split evenly into 3 members",
    ),
    Case(
        "head features of the wrong width",
        lambda d: MemberHeads(8, 10, M)(torch.randn(6, 5)),
        ValueError,
        r"MemberHeads expects features of shape \(B·M, 8\), got \(6, 5\)",
    ),
    Case(
        "σLN trailing shape",
        lambda d: SigmaLayerNorm(8, M)(torch.randn(6, 7)),
        ValueError,
        r"SigmaLayerNorm normalizes trailing shape \(8,\), got input shape \(6, 7\)",
    ),
    Case(
        "ensemble input as a list",
        lambda d: _ensemble()([torch.randn(2, 3, 32, 32)]),
        TypeError,
        r"takes a tensor or a mapping of tensors .*, got list",
    ),
    Case(
        "image without its batch dimension",
        lambda d: _ensemble()(torch.randn(3, 32, 32)),
        ValueError,
        r"takes inputs with a batch dimension \(B, ...\), got shape \(3, 32, 32\)",
    ),
    Case(
        "uint8 images",
        lambda d: _ensemble()(torch.zeros(2, 3, 32, 32, dtype=torch.uint8)),
        TypeError,
        r"takes floating-point inputs, got dtype torch.uint8 .*convert images to "
        r"float",
    ),
    Case(
        "last training batch of one sample (member heads)",
        lambda d: _ensemble().train()(torch.randn(1, 3, 32, 32)),
        ValueError,
        r"HeadBatchNorm needs more than 1 value .* members: batch size 1\. .*choose a "
        r"batch_size .*--data\.init_args\.batch_size",
    ),
    Case(
        "last training batch of one sample (σBN statistics)",
        lambda d: member_batch_norm(
            SigmaBatchNorm2d(4, M).train(), torch.randn(M, 4, 1, 1), torch.ones(M, 4), None
        ),
        ValueError,
        r"SigmaBatchNorm2d needs more than 1 value .*\(3, 4, 1, 1\) with 3 members: batch "
        r"size 1\. .*choose a batch_size .*--data\.init_args\.batch_size",
    ),
    Case(
        "σBN training on one value per channel",
        lambda d: SigmaBatchNorm2d(4, M).train()(torch.randn(M, 4, 1, 1)),
        ValueError,
        r"needs more than 1 value per channel and member when training, got input shape "
        r"\(3, 4, 1, 1\)",
    ),
    # ---------------------------------------------------------------- backbones
    Case(
        "backbone without normalization layers",
        lambda d: signorm_ensemble(nn.Sequential(nn.Flatten(), nn.Linear(4, 2)), M),
        ValueError,
        r"Sequential has no normalization layer to convert into σNorm; σNorm-"
        r"Ensembles need at least one of: .*BatchNorm",
    ),
    Case(
        "σN-Ens wrapped again",
        lambda d: signorm_ensemble(_ensemble(), M),
        ValueError,
        r"SigmaNormEnsemble is already an ensemble \(SigmaNormEnsemble of \d+ members\): pass "
        r"the original backbone",
    ),
    Case(
        "backbone holding a σNorm layer of another member count",
        lambda d: signorm_ensemble(
            nn.Sequential(nn.Linear(4, 8), SigmaLayerNorm(8, M + 1), nn.Linear(8, 2)), M, head="2"
        ),
        ValueError,
        rf"Sequential holds σNorm layers of another number of members than "
        rf"num_estimators={M}: '1' \(M = {M + 1}\)\. Build them with "
        rf"signorm_normalization_layer\({M}\), or pass num_estimators={M + 1}\.",
    ),
    # ---------------------------------------------------------------- pretrained weights
    Case(
        "pretrained=True on an untrained backbone",
        lambda d: _ensemble(pretrained=True),
        ValueError,
        r"pretrained=True but every normalization layer of _?ResNet is at its "
        r"initial state .*Load them into the backbone first .*finetune_ensemble",
    ),
    Case(
        "checkpoint of an untrained model",
        lambda d: _finetune(d / "resnet18.pt"),
        ValueError,
        r"checkpoint='.*resnet18.pt' holds an untrained _?ResNet",
    ),
    Case(
        "FineTune recipe without its checkpoint (command)",
        lambda d: _command(
            "fit",
            "--config",
            str(FINETUNE_RECIPE),
            "--trainer.accelerator=cpu",
            "--trainer.precision=32",
        ),
        ValueError,
        r"finetune_ensemble needs the trained single model's checkpoint .*"
        r"--routine.init_args.model.init_args.checkpoint=path/to/single.ckpt",
    ),
    Case(
        "meta-device backbone with pretrained=True",
        lambda d: signorm_ensemble(tiny_resnet().to("meta"), M, pretrained=True),
        ValueError,
        r"pretrained=True needs the weights of _?ResNet, which is on the meta device",
    ),
    # ---------------------------------------------------------------- checkpoints
    Case(
        "missing checkpoint file",
        lambda d: _finetune(d / "absent.pt"),
        FileNotFoundError,
        r"checkpoint='.*absent.pt' does not exist or is not a file",
    ),
    Case(
        "truncated checkpoint file",
        lambda d: _finetune(d / "truncated.pt"),
        ValueError,
        r"checkpoint='.*truncated.pt' could not be read .*; expected a Lightning/"
        r"TorchUncertainty .ckpt, a torch state dict or a .safetensors file",
    ),
    Case(
        "checkpoint of another architecture",
        lambda d: _finetune(d / "resnet18.pt", tiny_resnet(50)),
        ValueError,
        r"checkpoint='.*resnet18.pt' does not fit _?ResNet: missing: .*It must come from the "
        r"same architecture",
    ),
    Case(
        "checkpoint of another M (export command)",
        lambda d: main(
            [
                "--config",
                str(d / "recipe_m3.yaml"),
                "--ckpt_path",
                str(d / "ensemble_m2.ckpt"),
                "--output",
                str(d / "out"),
            ]
        ),
        ValueError,
        r"does not fit SigmaNormEnsemble: shape mismatch: .*\(2, .*\) != \(3, ",
    ),
    Case(
        "truncated checkpoint through the command",
        lambda d: _command(
            "test", "--config", str(DIGITS_RECIPE), "--ckpt_path", str(d / "truncated.pt")
        ),
        ValueError,
        r"ckpt_path='.*truncated.pt' could not be read .*; expected a Lightning checkpoint",
    ),
    Case(
        "empty checkpoint file (a write cut off)",
        lambda d: _command(
            "fit", "--config", str(DIGITS_RECIPE), "--ckpt_path", str(d / "empty.ckpt")
        ),
        ValueError,
        r"ckpt_path='.*empty.ckpt' is empty \(0 bytes\): its write was cut off",
    ),
    Case(
        "checkpoint hyper_parameters that are a list",
        lambda d: _command(
            "test", "--config", str(DIGITS_RECIPE), "--ckpt_path", str(d / "hp_list.ckpt")
        ),
        ValueError,
        r"ckpt_path='.*hp_list.ckpt' has hyper_parameters of type list .*expected a mapping",
    ),
    Case(
        "checkpoint with a negative global_step",
        lambda d: _command(
            "fit", "--config", str(DIGITS_RECIPE), "--ckpt_path", str(d / "negative_step.ckpt")
        ),
        ValueError,
        r"ckpt_path='.*negative_step.ckpt' has global_step=-5; expected an integer >= 0",
    ),
    Case(
        "NaN weights in the checkpoint tested",
        lambda d: _command(
            "test", "--config", str(DIGITS_RECIPE), "--ckpt_path", str(d / "nan_weights.ckpt")
        ),
        ValueError,
        r"ckpt_path='.*nan_weights.ckpt' holds non-finite values \(NaN or inf\) in "
        r"state_dict\['model.heads.weight'\]",
    ),
    Case(
        "NaN weights in the checkpoint resumed",
        lambda d: _command(
            "fit", "--config", str(DIGITS_RECIPE), "--ckpt_path", str(d / "nan_weights.ckpt")
        ),
        ValueError,
        r"nan_weights.ckpt' holds non-finite values .*Use an earlier checkpoint",
    ),
    Case(
        "ckpt_path that is a URL",
        lambda d: _command(
            "test", "--config", str(DIGITS_RECIPE), "--ckpt_path", "https://example.com/model.ckpt"
        ),
        ValueError,
        r"ckpt_path='https://example.com/model.ckpt' is a URL: checkpoints are read from "
        r"local files only",
    ),
    Case(
        "ckpt_path that is a file:// URL",
        lambda d: _command(
            "test", "--config", str(DIGITS_RECIPE), "--ckpt_path", (d / "resnet18.pt").as_uri()
        ),
        ValueError,
        r"ckpt_path='file:///.*resnet18.pt' is a URL: .*Download the file",
    ),
    Case(
        "ckpt_path that is a file: URL without slashes",
        lambda d: _command(
            "test", "--config", str(DIGITS_RECIPE), "--ckpt_path", f"file:{d / 'resnet18.pt'}"
        ),
        ValueError,
        r"ckpt_path='file:/.*resnet18.pt' is a URL: checkpoints are read from local files only",
    ),
    Case(
        "ckpt_path that is a data: URL",
        lambda d: _command(
            "test",
            "--config",
            str(DIGITS_RECIPE),
            "--ckpt_path",
            "data:application/octet-stream;base64,UEsDBA==",
        ),
        ValueError,
        r"ckpt_path='data:application/octet-stream;base64,UEsDBA==' is a URL",
    ),
    Case(
        "--weights_only=false",
        lambda d: _command("test", "--config", str(DIGITS_RECIPE), "--weights_only=false"),
        ValueError,
        r"--weights_only=false would let a checkpoint run code",
    ),
    Case(
        "lambda = 1e30",
        lambda d: _ensemble(diversity_strength=1e30),
        ValueError,
        r"diversity_strength \(lambda\)=1e\+30 is above 1000: the regularizer would swamp",
    ),
    Case(
        "loading a directory that is no export",
        load_ensemble,
        FileNotFoundError,
        r"config.json' does not exist: .* is no σN-Ens export",
    ),
    Case(
        "exported member out of range",
        lambda d: load_member(d / "export", 7),
        ValueError,
        r"member 7 was not exported to .*; exported members: none \(export with members=True",
    ),
    Case(
        "export config naming untrusted code",
        lambda d: load_ensemble(d / "untrusted_export"),
        ValueError,
        r"class_path='os.system' is not an allowed class path",
    ),
    # ---------------------------------------------------------------- YAML typos (command)
    Case(
        "YAML typo num_estimator",
        lambda d: _command(
            "fit", "--config", _recipe_with(d, "num_estimators: 4", "num_estimator: 4")
        ),
        CommandLineError,
        r"Option 'num_estimator' is not accepted",
    ),
    Case(
        "YAML typo trainer.max_epoch",
        lambda d: _command("fit", "--config", _recipe_with(d, "max_epochs: 5", "max_epoch: 5")),
        CommandLineError,
        r"run: torch-uncertainty fit --help\nerror: Subcommand 'fit' does "
        r"not accept option 'trainer.max_epoch'",
    ),
    Case(
        "YAML tau: -0.1",
        lambda d: _command("fit", "--config", _recipe_with(d, "tau: 0.1", "tau: -0.1")),
        ValueError,
        r"tau must be a finite number > 0, got -0.1",
    ),
    # ---------------------------------------------------------------- missing datasets
    Case(
        "OOD folder missing, no download",
        lambda d: _open_ood(d / "no_data"),
        FileNotFoundError,
        r"ninco not found in .*no_data: expected .*ninco/<class>/<image>. Pass download=True",
    ),
    Case(
        "SST-2 local_path missing",
        lambda d: _sst2(local_path=d / "no_sst2"),
        FileNotFoundError,
        r"local_path='.*no_sst2' is not a directory; write one with",
    ),
]


def _ensemble_m(num_estimators) -> nn.Module:
    return signorm_ensemble(tiny_resnet(), num_estimators)


def _open_ood(root: Path):
    from signorm_lab.datamodules.ood_datasets import OpenOODImageFolder

    return OpenOODImageFolder(root, "ninco", download=False)


def _sst2(**kwargs):
    from signorm_lab.datamodules.sst2 import SST2DataModule

    return SST2DataModule(**kwargs)


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_rejected_clearly_and_changes_no_file(case, files, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])
    monkeypatch.chdir(files)  # anything a case would write lands where it is checked
    before = _hashes(files)
    with pytest.raises(case.error, match=case.match):
        case.action(files)
    assert _hashes(files) == before
