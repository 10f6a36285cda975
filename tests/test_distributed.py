"""Synchronised σBN across processes (gloo on CPU) and the σNorm-aware layer-sync plugin.

The reference for ``P`` processes each holding ``B`` inputs is one process holding the ``P·B``
inputs concatenated: with synchronised statistics both must give the same per-member running
statistics, outputs and (averaged) gradients.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from lightning.pytorch.plugins.layer_sync import TorchSyncBatchNorm
from torch import nn

from fixtures.backbones import relative_error, tiny_resnet
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.baselines import film_ensemble
from signorm_lab.cli import cli_main
from torch_uncertainty_signorm import SigmaBatchNorm2d, signorm_ensemble
from torch_uncertainty_signorm.members.distributed import (
    MemberSyncBatchNorm,
    convert_sync_member_norms,
    gather_member_moments,
    member_sync_batchnorm_plugins,
    revert_sync_member_norms,
)
from torch_uncertainty_signorm.members.norm import MemberBatchNorm

WORLD, LOCAL_BATCH, M = 2, 3, 2
REPO = Path(__file__).parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_FACTORIES = {"signorm": signorm_ensemble, "film": film_ensemble}


def _ensemble(kind: str = "signorm") -> nn.Module:
    torch.manual_seed(0)
    return _FACTORIES[kind](tiny_resnet(18), M)


def _global_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(WORLD * LOCAL_BATCH, 3, 32, 32, generator=generator) * 2 + 0.5
    targets = torch.randint(0, 10, (WORLD * LOCAL_BATCH,), generator=generator)
    return inputs, targets


def _step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """One training forward/backward; returns the logits."""
    model.train()
    logits = model(inputs)
    loss = nn.functional.cross_entropy(logits, targets.repeat(M))
    if hasattr(model, "diversity_loss"):
        loss = loss + model.diversity_loss()
    loss.backward()
    return logits.detach()


def _stats(model: nn.Module) -> dict[str, torch.Tensor]:
    return {
        name: torch.stack([layer.running_mean, layer.running_var])
        for name, layer in model.named_modules()
        if isinstance(layer, MemberBatchNorm)
    }


def _worker(rank: int, port: int, out_dir: str, kind: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    try:
        model = convert_sync_member_norms(_ensemble(kind))
        inputs, targets = _global_batch()
        rows = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
        logits = _step(model, inputs[rows], targets[rows])
        grads = {}
        for name, param in model.named_parameters():
            dist.all_reduce(param.grad)  # what DDP does: average the processes' gradients
            grads[name] = param.grad / WORLD
        torch.save(
            {"stats": _stats(model), "grads": grads, "logits": logits},
            Path(out_dir) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("kind", ["signorm", "film"])
def test_two_processes_match_one_process_on_the_concatenated_batch(tmp_path, kind):
    # fork: the workers inherit the imported modules instead of importing them again
    mp.start_processes(
        _worker, args=(_free_port(), str(tmp_path), kind), nprocs=WORLD, start_method="fork"
    )
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]

    reference = _ensemble(kind)
    inputs, targets = _global_batch()
    logits = _step(reference, inputs, targets).unflatten(0, (M, -1))
    expected_stats = _stats(reference)

    assert expected_stats, "the ensemble has per-member BatchNorm layers"
    for rank, result in enumerate(ranks):
        for name, stats in expected_stats.items():
            torch.testing.assert_close(result["stats"][name], stats, rtol=1e-4, atol=1e-5)
        rows = slice(rank * LOCAL_BATCH, (rank + 1) * LOCAL_BATCH)
        torch.testing.assert_close(
            result["logits"].unflatten(0, (M, -1)), logits[:, rows], rtol=1e-4, atol=1e-5
        )
    for name, param in reference.named_parameters():  # float32 round-off grows with depth
        assert relative_error(ranks[0]["grads"][name], param.grad) < 2e-3, name
    # Without synchronisation each process normalizes with its half only: the check has teeth.
    alone = _ensemble(kind)
    _step(alone, inputs[:LOCAL_BATCH], targets[:LOCAL_BATCH])
    name = next(iter(expected_stats))
    assert not torch.allclose(_stats(alone)[name], expected_stats[name], atol=1e-3)


def test_moments_of_one_process_are_returned_unchanged():
    mean, var = torch.randn(M, 4), torch.rand(M, 4)
    out_mean, out_var, total = gather_member_moments(mean, var, 7)
    assert out_mean is mean and out_var is var
    assert torch.equal(total, torch.full((M, 4), 7.0))


def test_synchronised_layer_alone_equals_the_unsynchronised_layer():
    """In a single process the synchronised path is BatchNorm on the local batch."""
    layer = SigmaBatchNorm2d(5, M)
    synced = SigmaBatchNorm2d(5, M)
    synced.load_state_dict(layer.state_dict())
    convert_sync_member_norms(synced)
    x = torch.randn(M * 4, 5, 3, 3) * 3 + 1
    torch.testing.assert_close(synced(x), layer(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(synced.running_mean, layer.running_mean)
    torch.testing.assert_close(synced.running_var, layer.running_var)
    assert synced.num_batches_tracked == layer.num_batches_tracked == 1


def test_plugin_keeps_signorm_layers_and_converts_plain_batchnorm():
    model = nn.Sequential(nn.BatchNorm2d(3), SigmaBatchNorm2d(3, M))
    hook_calls = []
    model[1].register_forward_pre_hook(lambda module, args: hook_calls.append(1))
    plugin = MemberSyncBatchNorm()
    assert isinstance(plugin, TorchSyncBatchNorm)  # accepted with Trainer(sync_batchnorm=True)

    synced = plugin.apply(model)
    assert isinstance(synced[0], nn.SyncBatchNorm)
    assert isinstance(synced[1], SigmaBatchNorm2d) and synced[1].sync_statistics
    assert synced[1] is model[1]  # same module: parameters, buffers and hooks kept
    synced[1](torch.randn(M * 2, 3, 2, 2))
    assert hook_calls == [1]

    reverted = plugin.revert(synced)
    assert not reverted[1].sync_statistics
    assert isinstance(reverted[0], nn.modules.batchnorm._BatchNorm)
    assert not isinstance(reverted[0], nn.SyncBatchNorm)
    assert not revert_sync_member_norms(nn.Sequential(SigmaBatchNorm2d(3, M)))[0].sync_statistics


def test_torch_conversion_alone_would_leave_signorm_unsynchronised():
    """Why the plugin exists: torch's conversion does not touch σBN layers."""
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(SigmaBatchNorm2d(3, M)))
    assert isinstance(model[0], SigmaBatchNorm2d) and not model[0].sync_statistics


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"sync_batchnorm": False}, None),
        ({}, None),
        ({"sync_batchnorm": True}, [MemberSyncBatchNorm]),
        ({"sync_batchnorm": True, "plugins": TorchSyncBatchNorm()}, None),
    ],
)
def test_plugins_installed_only_for_sync_batchnorm(config, expected):
    plugins = member_sync_batchnorm_plugins(config)
    assert (None if plugins is None else [type(p) for p in plugins]) == expected


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
        "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]),
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


def test_distributed_imports_the_layers_only():
    """The per-member BatchNorm layers come from their base class in ``members``, not from a
    list that names the baselines."""
    import ast

    from torch_uncertainty_signorm.members import distributed

    tree = ast.parse(Path(distributed.__file__).read_text())
    relative = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level
    }
    assert relative == {"norm", "statistics"}
