"""A subclass passes its base's arguments on by name once (``_arguments.arguments_for``)."""

import pytest
from torch_uncertainty.datamodules import TUDataModule

from signorm_lab.datamodules import DigitsDataModule
from signorm_lab.datamodules._arguments_for import arguments_for


def test_exactly_the_targets_named_parameters_are_taken_and_overrides_win():
    def base(self, root, batch_size, *args, num_tta=1, **kwargs):
        pass

    arguments = {"self": 0, "root": "data", "batch_size": 8, "num_tta": 2, "seed": 5}
    assert arguments_for(base, arguments) == {"root": "data", "batch_size": 8, "num_tta": 2}
    assert arguments_for(base, arguments, root="elsewhere")["root"] == "elsewhere"
    with pytest.raises(TypeError, match=r"base needs batch_size, num_tta, which the caller"):
        arguments_for(base, {"root": "data"})


def test_a_datamodule_hands_torch_uncertainty_every_loading_argument_it_was_given():
    datamodule = DigitsDataModule(
        root="somewhere",
        batch_size=7,
        eval_batch_size=9,
        num_workers=0,
        num_tta=1,
        postprocess_set="test",
    )
    assert (datamodule.root.name, datamodule.batch_size, datamodule.eval_batch_size) == (
        "somewhere",
        7,
        9,
    )
    assert datamodule.postprocess_set == "test"
    assert isinstance(datamodule, TUDataModule)
