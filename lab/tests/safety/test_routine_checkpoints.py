"""load_routine: a checkpoint's model, loss and batch format built from its class blocks through
the allow-list, the file read as every untrusted checkpoint is."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fixtures.backbones import tiny_signorm_spec
from fixtures.crafted import crafted_checkpoint
from fixtures.digits import cpu_trainer
from fixtures.marker_module import assert_not_imported, marker_module
from signorm_lab.export import build_model
from signorm_lab.safety.routine_checkpoints import load_routine
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

#: The recipes' model block, narrowed: TU's CIFAR ResNet-18 at 1/8 width, M = 2.
SPEC = tiny_signorm_spec(2)
LOSS = {"class_path": "torch.nn.CrossEntropyLoss"}


def test_a_checkpoint_with_class_blocks_reloads_to_the_same_logits(tmp_path):
    """A routine fitted by a plain Trainer, its checkpoint given the model and loss blocks the
    command saves: rebuilt from them, with the same logits."""
    torch.manual_seed(0)
    routine = SigmaNormClassificationRoutine(
        build_model(SPEC),
        loss=nn.CrossEntropyLoss(),
        optim_recipe=lambda model: torch.optim.SGD(model.parameters(), lr=0.1),
    )
    data = TensorDataset(torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,)))
    trainer = cpu_trainer(max_epochs=1, enable_checkpointing=True, default_root_dir=tmp_path)
    trainer.fit(routine, DataLoader(data, batch_size=4))
    (path,) = tmp_path.rglob("*.ckpt")
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"] |= {"model": SPEC, "loss": LOSS}
    torch.save(checkpoint, path)

    loaded = load_routine(path)
    inputs = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(inputs), routine.eval()(inputs))
    assert isinstance(loaded.loss, nn.CrossEntropyLoss)
    assert loaded.format_batch_fn.num_repeats == 2


def test_a_class_outside_the_allow_list_is_never_imported(tmp_path, monkeypatch):
    name, marker = marker_module(tmp_path, monkeypatch, "load_routine_marker")
    path = crafted_checkpoint(
        tmp_path / "crafted.ckpt",
        _instantiator="lightning.pytorch.cli.instantiate_module",
        model={"class_path": f"{name}.Evil"},
        num_classes=10,
    )
    with pytest.raises(ValueError, match=rf"model.class_path='{name}.Evil' is not an allowed"):
        load_routine(path)
    assert_not_imported(name, marker)


def test_a_class_in_a_yaml_string_is_never_imported(tmp_path, monkeypatch):
    """The class block hidden in a YAML string under ``model.init_args.model`` is refused
    before jsonargparse parses it: its module is never imported, its class never built."""
    name, marker = marker_module(tmp_path, monkeypatch, "load_routine_string_marker")
    spec = {**SPEC, "init_args": {**SPEC["init_args"], "model": f"{{class_path: {name}.Evil}}"}}
    path = crafted_checkpoint(tmp_path / "crafted.ckpt", model=spec, num_classes=10)
    with pytest.raises(
        ValueError,
        match=rf"model\.init_args\.model='{{class_path: {name}\.Evil}}'"
        rf" is a string where a class is expected",
    ):
        load_routine(path)
    assert_not_imported(name, marker)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"checkpoint_path='.*bad\.ckpt' is empty \(0 bytes\)"),
        (
            [1, 2],
            (
                r"checkpoint_path='.*bad\.ckpt' has hyper_parameters of type list "
                r"\(\[1, 2\]\); expected a mapping"
            ),
        ),
        (
            {"_class_path": "torch_uncertainty.routines.ClassificationRoutine"},
            r"saved by the routine 'torch_uncertainty.routines.ClassificationRoutine'",
        ),
        ({"csv_filename": "../x.csv"}, r"csv_filename='\.\./x\.csv' is not a plain file name"),
    ],
    ids=["empty", "hyper_parameters", "routine", "csv_filename"],
)
def test_a_bad_checkpoint_is_named_with_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.ckpt"
    if content is None:
        path.write_bytes(b"")
    else:
        crafted_checkpoint(path)
        torch.save({**torch.load(path, weights_only=True), "hyper_parameters": content}, path)
    with pytest.raises(ValueError, match=message):
        load_routine(path)
