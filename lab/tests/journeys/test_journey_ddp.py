"""Journey 5: CIFAR-100, two-process DDP on CPU (gloo) with ``sync_batchnorm``: σBN statistics
agree."""

import json
import os
from pathlib import Path

import pytest
import torch
from journey_commands import EXPERIMENTS, best_checkpoint, failure, tiny_args
from safetensors.torch import load_file

from fixtures.cifar_files import run_command

PROBE = "journey_probes.SaveRunningStatistics"
TAU_PROBE = "journey_probes.RecordTau"


@pytest.mark.slow
def test_ddp_with_sync_batchnorm_keeps_every_ranks_signorm_statistics_equal(
    cifar_root, command_env, tmp_path
):
    env = {
        **command_env,
        "PYTHONPATH": os.pathsep.join([command_env["PYTHONPATH"], str(Path(__file__).parent)]),
    }
    probes = [
        json.dumps({"class_path": name, "init_args": {"directory": str(tmp_path / "stats")}})
        for name in (PROBE, TAU_PROBE)
    ]
    done = run_command(
        [
            "fit",
            "--config",
            EXPERIMENTS / "resnet18_c100_signorm.yaml",
            "--eval_after_fit=false",
            *tiny_args(cifar_root, tmp_path / "logs", batch_size=4, devices=2),
            "--trainer.strategy=ddp",
            "--trainer.sync_batchnorm=true",
            "--routine.init_args.target_diversity=0.5",
            *(f"--trainer.callbacks+={probe}" for probe in probes),
        ],
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, failure(done)
    # The τ controller reads replicated weights only: every rank trains with the same τ.
    taus = [json.loads((tmp_path / "stats" / f"tau_rank{r}.json").read_text()) for r in (0, 1)]
    assert len(taus[0]) == 2 and taus[0] == taus[1] and taus[0][-1] != 0.1
    rank0 = load_file(tmp_path / "stats" / "rank0.safetensors")
    rank1 = load_file(tmp_path / "stats" / "rank1.safetensors")
    signorm = [name for name in rank0 if name.startswith("model.backbone.")]
    assert len(signorm) >= 2 * 20 and rank0.keys() == rank1.keys()
    # After the last step (before DDP's next buffer broadcast) the ranks, which saw different
    # halves of each batch, hold the same statistics; without sync_batchnorm all 40 differ.
    for name in signorm:
        torch.testing.assert_close(rank1[name], rank0[name], rtol=1e-6, atol=1e-7, msg=name)
    assert any(not torch.all(rank0[name] == 0) for name in signorm if "mean" in name)
    # Rank 0's checkpoint holds those statistics.
    state = torch.load(best_checkpoint(tmp_path / "logs"), map_location="cpu", weights_only=True)[
        "state_dict"
    ]
    for name in signorm:
        torch.testing.assert_close(state[name], rank0[name], rtol=0, atol=0, msg=name)
