"""The values a checkpoint's saved arguments may set where the recipe leaves them unset."""

from __future__ import annotations

import pytest

from signorm_lab.safety.checkpoint_args import (
    check_parsed_arguments,
    check_taken_arguments,
)

ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"


def _taken(taken: dict) -> dict:
    return check_taken_arguments("run.ckpt", taken, ROUTINE, {})


def test_safe_values_are_returned_as_the_tree_to_parse():
    assert _taken({"model.init_args.tau": 0.5, "ood_criterion": "msp"}) == {
        "model": {"init_args": {"tau": 0.5}},
        "ood_criterion": "msp",
    }


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("model.init_args.checkpoint", "weights/elsewhere.pt", "reads or fetches weights or files"),
        ("model.init_args.model.init_args.pretrained", True, "reads or fetches weights or files"),
        ("model.init_args.tau", float("nan"), "must be a finite number"),
        ("model.init_args.regularized_layers", "(a+)+$", "exponential time"),
        ("model.init_args.model", {"class_path": "os.system"}, "is not an allowed class path"),
    ],
)
def test_an_unsafe_value_is_refused_naming_checkpoint_and_key(key, value, message):
    with pytest.raises(ValueError, match=rf"run\.ckpt.*{key.rpartition('.')[2]}.*{message}"):
        _taken({key: value})


def test_the_conversion_flag_is_no_fetch():
    assert _taken({"model.init_args.pretrained": True}) == {
        "model": {"init_args": {"pretrained": True}}
    }


def test_a_string_parsed_as_a_class_is_refused_after_parsing():
    with pytest.raises(
        ValueError,
        match=r"loss was given as 'x', which the parser read as the "
        r"class 'torch.nn.CrossEntropyLoss'",
    ):
        check_parsed_arguments(
            "run.ckpt", {"loss": "x"}, {"loss": {"class_path": "torch.nn.CrossEntropyLoss"}}
        )
