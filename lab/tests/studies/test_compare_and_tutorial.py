"""The comparison command (Single, Deep Ensembles, Packed-Ensembles, σN-Ens); the tutorial is the
method's (tests/test_tutorials.py)."""

import csv
import math
import re

import pytest
import torch

from studies import compare as compare_module
from studies.compare import compare, main

METHODS = ("Single", "Deep Ensembles", "Packed Ensembles", "σN-Ens")


@pytest.fixture(autouse=True)
def _restore_lightning_seed(monkeypatch):
    """seed_everything exports PL_GLOBAL_SEED; remove it again after the test."""
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)


@pytest.mark.slow
def test_compare_trains_four_methods_and_prints_one_table(capsys, monkeypatch, tmp_path):
    num_estimators = 4
    rows = compare(epochs=3, seed=0, num_estimators=num_estimators)
    by_method = {row["method"]: row for row in rows}
    assert tuple(by_method) == METHODS
    for row in rows:
        for key in ("acc", "nll", "ece", "auroc", "time_s"):
            assert math.isfinite(row[key]), (row["method"], key)
        assert row["acc"] > 0.5, row  # chance is 0.1
        assert 0 <= row["ece"] <= 1 and 0 <= row["auroc"] <= 1, row
    single = by_method["Single"]["params"]
    assert by_method["σN-Ens"]["params"] == pytest.approx(single, rel=0.03)
    assert by_method["Deep Ensembles"]["params"] == pytest.approx(num_estimators * single, rel=0.01)

    # main prints these rows (not retrained) as one table, then the total wall time
    monkeypatch.setattr(compare_module, "compare", lambda *args: rows)
    output = tmp_path / "results.csv"
    assert main(["--epochs", "3", "--output", str(output)]) is rows
    printed = capsys.readouterr().out
    for title in ("Method", "Acc (%)", "NLL", "ECE (%)", "AUROC (%)", "Params", "Time (s)"):
        assert title in printed
    for method in METHODS:
        assert method in printed
    assert "Total wall time:" in printed
    with output.open() as file:
        assert [row["method"] for row in csv.DictReader(file)] == list(METHODS)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--epochs", "0"], "argument --epochs: expected an integer >= 1, got 0"),
        (["--epochs", "two"], "argument --epochs: expected an integer >= 1, got 'two'"),
        (["--num-estimators", "1"], "argument --num-estimators: expected an integer >= 2, got 1"),
        (["--num-estimators", "3"], "num_estimators=3: Packed-Ensembles"),
    ],
)
def test_invalid_arguments_are_argparse_errors_naming_the_value(argv, message, capsys):
    with pytest.raises(SystemExit) as error:
        main(argv)
    assert error.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("epochs", "num_estimators", "message"),
    [
        (0, 4, "epochs must be an integer >= 1, got 0"),
        (2.0, 4, "epochs must be an integer >= 1, got 2.0"),
        (2, 1, "num_estimators must be an integer >= 2, got 1"),
        (2, 6, "num_estimators=6: Packed-Ensembles at width 0.25 need M to divide their 32"),
    ],
)
def test_compare_rejects_invalid_arguments_before_training(epochs, num_estimators, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        compare(epochs=epochs, num_estimators=num_estimators)


def test_baseline_routine_repeats_targets_for_the_packed_members():
    routine = compare_module.baseline_routine(compare_module.packed_resnet(4), 4)
    assert routine.is_ensemble and routine.eval_ood
    assert routine.format_batch_fn.num_repeats == 4
    assert routine.model(torch.randn(2, 1, 8, 8)).shape == (4 * 2, 10)  # (M·B, C)
    assert not compare_module.baseline_routine(compare_module.packed_resnet(1)).is_ensemble
    with pytest.raises(ValueError):  # M must divide the packed stem's channels
        compare_module.packed_resnet(3)
