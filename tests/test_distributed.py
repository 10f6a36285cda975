"""Synchronised σBN across processes (gloo on CPU) and the σNorm-aware layer-sync plugin.

The reference for ``P`` processes each holding ``B`` inputs is one process holding the ``P·B``
inputs concatenated: with synchronised statistics both must give the same per-member running
statistics, outputs and (averaged) gradients (FiLM-Ensemble's, and DDP through the command: the
lab's lab/tests/test_distributed.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch.plugins.layer_sync import TorchSyncBatchNorm
from torch import nn

from fixtures.backbones import tiny_resnet
from fixtures.contracts import check_two_processes_match_one
from torch_uncertainty_signorm import SigmaBatchNorm2d, signorm_ensemble
from torch_uncertainty_signorm.members.distributed import (
    MemberSyncBatchNorm,
    convert_sync_member_norms,
    gather_member_moments,
    member_sync_batchnorm_plugins,
    revert_sync_member_norms,
)

M = 2


def _ensemble() -> nn.Module:
    torch.manual_seed(0)
    return signorm_ensemble(tiny_resnet(18), M)


def test_two_processes_match_one_process_on_the_concatenated_batch(tmp_path):
    check_two_processes_match_one(_ensemble, M, tmp_path)


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
