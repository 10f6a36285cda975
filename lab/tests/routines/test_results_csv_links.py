"""The routine never appends its test row to a ``results.csv`` that is a link: the row would
land in the file the link leads to, outside the run."""

from __future__ import annotations

import os
from types import SimpleNamespace
from unittest import mock

import pytest
from fixtures.backbones import tiny_resnet
from torch import nn

from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

PROFILE = b"test/cls/Acc\n0.9000\n"


@pytest.mark.parametrize("link", ["hard", "symbolic", "none"])
def test_a_linked_results_csv_is_left_as_it_is(link, tmp_path):
    routine = SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), num_estimators=2),
        10,
        nn.CrossEntropyLoss(),
        save_to_csv=True,
    )
    outside, run = tmp_path / "other_run.csv", tmp_path / "run"
    outside.write_bytes(PROFILE)
    run.mkdir()
    if link == "hard":
        os.link(outside, run / "results.csv")
    elif link == "symbolic":
        (run / "results.csv").symlink_to(outside)
    logger = SimpleNamespace(log_dir=str(run))
    with mock.patch.object(
        type(routine), "logger", new_callable=mock.PropertyMock, return_value=logger
    ):
        if link == "none":
            assert routine._csv_is_the_runs()
            return
        with pytest.warns(
            UserWarning,
            match=rf"is a {link} link.*: the test results were not "
            rf"written to it",
        ):
            assert not routine._csv_is_the_runs()
    assert outside.read_bytes() == PROFILE
