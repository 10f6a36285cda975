"""Journey: a recipe giving σN-Ens's settings as one ``config:`` block (``SigmaNormConfig``'s
fields) trains, tests its checkpoint and exports, as the keyword form does."""

import shutil

import pytest
import torch
import yaml
from journey_commands import EXPERIMENTS, best_checkpoint, failure, only, results_row, tiny_args

from fixtures.cifar_files import run_command, run_module
from signorm_lab.export import load_ensemble

SETTINGS = ("pretrained", "regularized_layers", "tau", "diversity_strength")


def config_block_recipe(folder):
    """``resnet18_c10_signorm.yaml`` with its settings moved into ``config:``, beside its bases."""
    recipe = yaml.safe_load((EXPERIMENTS / "resnet18_c10_signorm.yaml").read_text())
    block = recipe["routine"]["init_args"]["model"]["init_args"]
    block["config"] = {name: block.pop(name) for name in SETTINGS}
    block["config"]["tau"] = 0.25  # not the default: the value must come from the block
    shutil.copytree(EXPERIMENTS / "base", folder / "base")
    path = folder / "config_block.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


@pytest.mark.slow
def test_settings_in_a_config_block_train_test_and_export(cifar_root, command_env, tmp_path):
    recipe = config_block_recipe(tmp_path)
    logs = tmp_path / "logs"
    # fit, then (the recipe's eval_after_fit) test of the best checkpoint in the same process
    done = run_command(
        ["fit", "--config", recipe, *tiny_args(cifar_root, logs)], cwd=tmp_path, env=command_env
    )
    assert done.returncode == 0, failure(done)
    saved = yaml.safe_load(only(logs.rglob("config.yaml"), "saved config.yaml").read_text())
    model_block = saved["routine"]["init_args"]["model"]["init_args"]
    assert model_block["config"]["init_args"]["tau"] == 0.25, model_block
    ckpt = best_checkpoint(logs)
    assert 0 <= results_row(logs)["test/cls/Acc"] <= 1

    done = run_module(
        "signorm_lab.cli.export",
        [
            "--config",
            recipe,
            "--ckpt_path",
            ckpt,
            "--output",
            tmp_path / "export",
            ("--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"),
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    exported = load_ensemble(tmp_path / "export").eval()
    assert exported.config.tau == 0.25 and exported.num_estimators == 4
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    model_state = {
        key.removeprefix("model."): value
        for key, value in state.items()
        if key.startswith("model.")
    }
    assert all(torch.equal(exported.state_dict()[key], value) for key, value in model_state.items())
