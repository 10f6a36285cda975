"""Journey 3: export a trained run with ``--members``; the export alone reproduces its logits."""

import os
import shutil
import stat

import pytest
import torch
import yaml
from journey_commands import ENSEMBLE_WIDTH, EXPERIMENTS, best_checkpoint, failure, only
from jsonargparse import ArgumentParser
from lightning.pytorch import LightningModule

from fixtures.cifar_files import run_module
from signorm_lab.export import load_ensemble, load_member

NUM_ESTIMATORS = 4


def trained_model(config_path, ckpt_path) -> torch.nn.Module:
    """The run's model as the command builds it (jsonargparse, the saved ``routine:`` block),
    with the checkpoint's weights, in eval mode."""
    parser = ArgumentParser()
    parser.add_subclass_arguments(LightningModule, "routine")
    routine_block = yaml.safe_load(config_path.read_text())["routine"]
    routine = parser.instantiate_classes(parser.parse_object({"routine": routine_block})).routine
    state = torch.load(ckpt_path, map_location="cpu", weights_only=True)["state_dict"]
    routine.load_state_dict(state)
    return routine.model.eval()


@pytest.mark.slow
def test_export_reproduces_the_trained_logits_without_the_run(signorm_run, command_env, tmp_path):
    run_dir = shutil.copytree(signorm_run.log_dir, tmp_path / "run")
    config = only(run_dir.rglob("config.yaml"), "saved config.yaml")
    ckpt = best_checkpoint(run_dir)
    images = torch.randn(5, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = trained_model(config, ckpt)(images)
    assert expected.shape == (NUM_ESTIMATORS * 5, 10)  # (m b) c, member-major

    # From the recipe with the run's command-line override, and from the run's saved config.
    sources = {
        "recipe": (EXPERIMENTS / "resnet18_c10_signorm.yaml", [ENSEMBLE_WIDTH]),
        "saved_config": (config, []),
    }
    done = {
        name: run_module(
            "signorm_lab.cli.export",
            [
                "--config",
                source,
                "--ckpt_path",
                ckpt,
                "--output",
                tmp_path / name,
                "--members",
                *overrides,
            ],
            cwd=tmp_path,
            env=command_env,
        )
        for name, (source, overrides) in sources.items()
    }
    shutil.rmtree(run_dir)  # the export stands alone

    assert done["recipe"].returncode == 0, failure(done["recipe"])
    with torch.no_grad():
        assert torch.equal(load_ensemble(tmp_path / "recipe")(images), expected)
        for member in range(NUM_ESTIMATORS):
            rows = expected[member * 5 : (member + 1) * 5]
            torch.testing.assert_close(
                load_member(tmp_path / "recipe", member)(images), rows, atol=1e-5, rtol=0
            )
    assert done["saved_config"].returncode == 0, failure(done["saved_config"])
    for name in ("ensemble.safetensors", "member_3.safetensors"):
        assert (tmp_path / "saved_config" / name).read_bytes() == (
            tmp_path / "recipe" / name
        ).read_bytes()
    # Every exported file has the mode the user's umask gives (safetensors alone writes 0600).
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {
        path.name: stat.S_IMODE(path.stat().st_mode) for path in (tmp_path / "recipe").iterdir()
    }
    assert set(modes.values()) == {0o666 & ~umask}, modes
