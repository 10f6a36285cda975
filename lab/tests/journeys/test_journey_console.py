"""Journey: what the command prints is what happened, and a failure says what to fix.

The shared trained run's console (no warning the user did not cause, the best checkpoint named,
the test tables whole, with the ensemble's diversity and the FLOPs per input); ``--help`` without
importing torch; a first run that fails leaves no ``version_0`` behind and no note about
interruption checkpoints; offline, a CIFAR recipe names the data set, the root and the files.
"""

import os
import re
from pathlib import Path

import pytest
from journey_commands import EXPERIMENTS, failure, tiny_args

from fixtures.cifar_files import run_command
from signorm_lab.cli.entry_point import SUBCOMMANDS

DIGITS = EXPERIMENTS / "digits_signorm.yaml"


@pytest.mark.slow
def test_a_run_prints_whole_tables_its_diversity_and_its_best_checkpoint(signorm_run):
    output = signorm_run.stdout + signorm_run.stderr
    assert "LightningCLI's args parameter" not in output  # the user gave no args= in Python
    best = re.search(r"^Best checkpoint \(val/cls/Acc\): (\S+\.ckpt)$", signorm_run.stdout, re.M)
    assert best and Path(best.group(1)).is_file() and "-val_acc=" in best.group(1)
    tables = signorm_run.stdout[signorm_run.stdout.index("Test metric") :]
    assert "…" not in tables  # TorchUncertainty cuts names at 12 characters
    for name in (
        "Ensemble diversity",
        "σNorm-cos (all layers)",
        "σNorm-cos (regularized layers)",
        "Jensen gap",
        "Mutual information U_mod (nats)",
        "ens_Disagreement",
        "FLOPs (first test batch, 8 inputs)",
        "FLOPs per input",
        "Members",
        "Member health",
    ):
        assert name in tables, name
    # The model summary counts one input's FLOPs, those the test prints per input (not 0).
    summary = re.search(r"Total FLOPs: (\S+ [KMG])", output)
    per_input = re.search(r"FLOPs per input +│ +(\S+ [KMG])", tables)
    assert summary and per_input, output
    assert _count(summary.group(1)) == pytest.approx(_count(per_input.group(1)), rel=0.01)


def _count(text: str) -> float:
    """``"17.3 M"`` -> 17.3e6 (Lightning's and TorchUncertainty's readable counts)."""
    number, unit = text.split()
    return float(number) * {"K": 1e3, "M": 1e6, "G": 1e9}[unit]


def test_help_lists_the_subcommands_without_importing_torch(tmp_path):
    # The plain environment: the journeys' sitecustomize (command_env) imports the test fixtures.
    done = run_command(["--help"], cwd=tmp_path, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0, failure(done)
    imported = set(re.findall(r"\|\s+(\S+)$", done.stderr, re.M))
    assert "signorm_lab.cli.entry_point" in imported  # the import profile is on
    assert not {"torch", "lightning", "torch_uncertainty"} & imported, sorted(imported)
    from lightning.pytorch.cli import LightningCLI

    assert set(SUBCOMMANDS) == set(LightningCLI.subcommands())
    for name in SUBCOMMANDS:
        assert re.search(rf"^  {name} ", done.stdout, re.M), done.stdout


@pytest.mark.slow
def test_a_failed_first_run_leaves_no_version_folder_and_no_interruption_note(
    command_env, tmp_path
):
    # Batches of one image: σBatchNorm cannot normalize the 1x1 last stage, at the first step.
    done = run_command(
        [
            "fit",
            "--config",
            DIGITS,
            "--data.init_args.batch_size=1",
            f"--trainer.logger.init_args.save_dir={tmp_path / 'logs'}",
            "--trainer.enable_progress_bar=false",
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 1, failure(done)
    assert "needs more than 1 value per channel" in done.stderr, failure(done)
    assert "interruption checkpoint" not in done.stdout + done.stderr
    assert (tmp_path / "logs" / "signorm").is_dir()
    assert not list((tmp_path / "logs" / "signorm").iterdir())  # the next run is version_0
    assert "removed" in done.stderr and "version_0" in done.stderr


@pytest.mark.slow
def test_offline_a_cifar_recipe_names_the_data_set_root_and_files(command_env, tmp_path):
    unreachable = "http://127.0.0.1:9"  # urllib's proxy: every download is refused at once
    env = {
        **command_env,
        "http_proxy": unreachable,
        "https_proxy": unreachable,
        "HTTP_PROXY": unreachable,
        "HTTPS_PROXY": unreachable,
        "no_proxy": "",
        "NO_PROXY": "",
    }
    empty = tmp_path / "data"
    done = run_command(
        [
            "fit",
            "--config",
            EXPERIMENTS / "resnet18_c10_signorm.yaml",
            *tiny_args(empty, tmp_path / "logs"),
        ],
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 1, failure(done)
    message = done.stderr[done.stderr.index("FileNotFoundError: ") :]
    assert f"CIFAR10DataModule could not download its data into root='{empty}'" in message
    assert "URLError" in message and "the machine may be offline" in message
    assert (
        f"CIFAR10 (in-distribution): {empty}/cifar-10-batches-py/{{data_batch_1, "
        "data_batch_2, data_batch_3, data_batch_4, data_batch_5, test_batch, batches.meta}: "
        "all missing; downloaded from https://www.cs.toronto.edu/"
    ) in message
    assert f"SVHN (OOD): {empty}/test_32x32.mat: missing" in message
    assert "urllib/request.py" not in done.stderr  # no network traceback
    assert "interruption checkpoint" not in done.stderr


@pytest.mark.slow
def test_the_laptop_override_runs_the_main_recipe_narrow(cifar_root, command_env, tmp_path):
    """The documented overrides (experiments/README.md, "On a laptop"), as written there."""
    text = (EXPERIMENTS / "README.md").read_text()
    section = text[text.index("## On a laptop") :]
    laptop = re.search(r'^LAPTOP="(.+)"$', section, re.M).group(1).split()
    line = next(
        row
        for row in section.splitlines()
        if row.startswith("torch-uncertainty fit --config experiments/wrn_c100_signorm")
    )
    args = [arg for arg in line.split()[1:] if arg != "$LAPTOP"]  # fit --config <recipe> ...
    args[2] = str(EXPERIMENTS.parent / args[2])  # the recipe path, from the repository root
    done = run_command(
        [
            *args,
            *laptop,
            f"--data.init_args.root={cifar_root}",
            f"--trainer.logger.init_args.save_dir={tmp_path / 'logs'}",
            "--trainer.enable_progress_bar=false",
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    (config,) = (tmp_path / "logs").rglob("config.yaml")
    assert "signorm_lab.models.backbones.wideresnet28" in config.read_text()
    assert re.search(r"params +│ +3\d\d\.\d\d K", done.stdout), failure(done)  # 0.4 M, not 146 M
