"""Synchronised FiLM-Ensemble BatchNorm across processes (gloo on CPU), and DDP through the
command: two processes match one process holding their inputs together (σN-Ens's layers: the
method's tests/test_distributed.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from fixtures.backbones import relative_error, tiny_resnet
from fixtures.contracts import check_two_processes_match_one
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.baselines import film_ensemble
from signorm_lab.cli import cli_main

M = 2
TESTS = Path(__file__).parent
REPO = TESTS.parents[1]


def _film() -> nn.Module:
    torch.manual_seed(0)
    return film_ensemble(tiny_resnet(18), M)


def test_two_processes_match_one_process_on_the_concatenated_batch(tmp_path):
    check_two_processes_match_one(_film, M, tmp_path)


class OrderedSyntheticDataModule(SyntheticDataModule):
    """The synthetic images, unshuffled: rank r of P trains on samples r, r + P, ..."""

    def train_dataloader(self):
        return self._data_loader(self.get_train_set(), training=False)


def _fit_args(root: Path, devices: int, batch_size: int) -> list[str]:
    return [
        "fit",
        "--config",
        str(REPO / "experiments" / "resnet18_c10_signorm.yaml"),
        "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125",
        f"--data.class_path={__name__}.OrderedSyntheticDataModule",
        f"--data.init_args.batch_size={batch_size}",
        "--data.init_args.num_samples=8",
        "--data.init_args.eval_ood=false",
        "--data.init_args.eval_shift=false",
        "--trainer.accelerator=cpu",
        f"--trainer.devices={devices}",
        "--trainer.precision=32",
        "--trainer.strategy=" + ("ddp" if devices > 1 else "auto"),
        "--trainer.sync_batchnorm=true",
        "--trainer.max_epochs=1",
        "--trainer.logger=false",
        "--trainer.limit_val_batches=0",
        "--trainer.enable_progress_bar=false",
        "--trainer.callbacks=[]",
        f"--trainer.default_root_dir={root}",
        "--eval_after_fit=false",
        "--seed_everything=0",
    ]


def _final_state(root: Path) -> dict[str, torch.Tensor]:
    (checkpoint,) = root.rglob("*.ckpt")
    return torch.load(checkpoint, weights_only=True)["state_dict"]


@pytest.mark.slow
def test_ddp_through_the_command_matches_one_process(tmp_path, monkeypatch):
    """``torch-uncertainty fit`` with ``strategy: ddp``, ``devices: 2`` and ``sync_batchnorm``:
    after one step on 2 × 4 images, statistics and weights equal one process on the 8 images."""
    env = {
        **os.environ,
        # this module (the datamodule's class path) and the shared fixtures
        "PYTHONPATH": os.pathsep.join(
            [str(TESTS), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
        ),
        "OMP_NUM_THREADS": "1",
    }
    command = [
        sys.executable,
        "-m",
        "signorm_lab.cli",
        *_fit_args(tmp_path / "ddp", devices=2, batch_size=4),
    ]
    result = subprocess.run(
        command, env=env, check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])
    monkeypatch.chdir(tmp_path)
    cli_main(_fit_args(tmp_path / "single", devices=1, batch_size=8))

    ddp, single = _final_state(tmp_path / "ddp"), _final_state(tmp_path / "single")
    assert ddp.keys() == single.keys()
    stats = [k for k in single if k.endswith(("running_mean", "running_var"))]
    assert len(stats) > 10
    for key in stats:
        torch.testing.assert_close(ddp[key], single[key], rtol=1e-4, atol=1e-5)
    weights = [k for k in single if single[k].is_floating_point() and k not in stats]
    for key in weights:  # the averaged gradients of the synchronised layers took the same step
        assert relative_error(ddp[key], single[key]) < 1e-4, key
