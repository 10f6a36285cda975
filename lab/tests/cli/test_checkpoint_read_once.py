"""``--ckpt_path`` is read once: Lightning loads the checkpoint the command checked, not the file
read again; and weights of another kind of dtype than the model's are refused, not converted."""

from __future__ import annotations

import pytest
import torch
from command_args import routine_args
from torch import nn

from signorm_lab.cli import ckpt_path_args, cli_main
from signorm_lab.safety.checkpoint_io import AtomicCheckpointIO

QUIET = ["--trainer.logger=false", "--trainer.enable_progress_bar=false"]


def _checkpoint(path, weight: torch.Tensor) -> str:
    state = {"model.weight": weight, "model.bias": torch.zeros(10, dtype=weight.dtype)}
    saved = {"state_dict": state, "hyper_parameters": {}, "pytorch-lightning_version": "2.6.0"}
    torch.save(saved, path)
    return str(path)


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.bool, torch.complex64], ids=["int64", "bool", "complex"]
)
def test_weights_of_another_kind_than_the_models_are_refused(dtype, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt = _checkpoint(tmp_path / "run.ckpt", torch.ones(10, 3).to(dtype))
    with pytest.raises(
        ValueError,
        match=rf"ckpt_path='{ckpt}' holds state_dict\['model.weight'\] as {dtype}, where the "
        r"model holds torch.float32: refused",
    ):
        cli_main(["test", *routine_args(), "--ckpt_path", ckpt, *QUIET])


def test_a_checkpoint_replaced_after_the_commands_check_is_tested_as_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    checked = torch.full((10, 3), 0.5)
    ckpt = _checkpoint(tmp_path / "run.ckpt", checked)
    check = ckpt_path_args.check_lightning_checkpoint

    def check_then_swap(checkpoint, path, *args):
        check(checkpoint, path, *args)
        _checkpoint(tmp_path / "run.ckpt", torch.full((10, 3), -7.0))
        return checkpoint

    monkeypatch.setattr(ckpt_path_args, "check_lightning_checkpoint", check_then_swap)
    loaded, load = [], AtomicCheckpointIO.load_checkpoint

    def load_then_stop(self, path, *args, **kwargs):
        loaded.append(load(self, path, *args, **kwargs))
        raise _Loaded

    monkeypatch.setattr(AtomicCheckpointIO, "load_checkpoint", load_then_stop)
    with pytest.raises(_Loaded):
        cli_main(["test", *routine_args(), "--ckpt_path", ckpt, *QUIET])
    assert torch.equal(loaded[0]["state_dict"]["model.weight"], checked)


class _Loaded(Exception):
    """Raised once Lightning has loaded the checkpoint: the test stops there."""


def test_the_checked_checkpoint_is_handed_over_once(tmp_path):
    path = tmp_path / "run.ckpt"
    torch.save({"state_dict": {"w": torch.ones(1)}}, path)
    content = {"state_dict": {"w": torch.zeros(1)}}
    io = AtomicCheckpointIO((str(path), content))
    assert io.load_checkpoint(path) is content
    assert torch.equal(io.load_checkpoint(path)["state_dict"]["w"], torch.ones(1))


def test_a_float_checkpoint_of_another_precision_still_loads(tmp_path):
    from signorm_lab.safety.checkpoints import check_dtype_kinds

    model = nn.Linear(3, 10)
    check_dtype_kinds({"weight": torch.ones(10, 3, dtype=torch.bfloat16)}, model.state_dict(), "x")
