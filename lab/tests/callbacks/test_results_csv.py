"""ResultsCSVCallback completes TorchUncertainty's results.csv row (σN-Ens's test values, the
steps taken), adds each test's row to the file whole, and never lets the row land outside the
run; a row no test wrote is told from the rows tests wrote."""

from __future__ import annotations

import csv
import os
from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch import nn

from fixtures.backbones import tiny_resnet
from fixtures.digits import cpu_trainer
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.callbacks import ResultsCSVCallback
from signorm_lab.cli.stand_in import stand_in_label
from signorm_lab.datamodules.stand_in_data import STAND_IN_COLUMN
from signorm_lab.evaluation.results_csv import (
    ROW_CHECK_COLUMN,
    add_test_row,
    append_to_last_row,
    check_test_rows,
)
from signorm_lab.reproduction.runs import TRAINED_STEPS_COLUMN, read_results, trained_steps
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

PROFILE = b"test/cls/Acc\n0.9000\n"


def _routine(**kwargs) -> SigmaNormClassificationRoutine:
    return SigmaNormClassificationRoutine(
        signorm_ensemble(tiny_resnet(), 2),
        loss=nn.CrossEntropyLoss(),
        optim_recipe=lambda model: torch.optim.SGD(model.parameters(), lr=0.01),
        save_to_csv=True,
        **kwargs,
    )


def _rows(folder) -> list[dict[str, str]]:
    (path,) = folder.rglob("results.csv")
    with path.open() as file:
        return list(csv.DictReader(file))


def test_the_row_gets_the_routines_test_values_and_the_steps_taken(tmp_path):
    torch.manual_seed(0)
    routine, data = _routine(eval_ood=True), SyntheticDataModule(eval_ood=True)
    trainer = cpu_trainer(logger=CSVLogger(tmp_path), callbacks=[ResultsCSVCallback()])
    trainer.fit(routine, data)
    trainer.test(routine, data, verbose=False)
    (row,) = _rows(tmp_path)
    for key in (
        "test/cls/Acc",  # TorchUncertainty's, in the same row
        "ood/AUROC",
        "test/ens_MI",
        "test/div/signorm_cos",
        "test/div/signorm_cos_regularized",
        "test/div/jensen_gap",
        "test/div/geometric_ambiguity",
        "test/health/dead_members",
        *(f"test/member_{m}/{name}" for m in range(2) for name in ("Acc", "NLL")),
    ):
        assert row[key] != "", key
    assert 0 <= float(row["test/member_1/Acc"]) <= 1  # a fraction, as test/cls/Acc
    assert "test/div/MI" not in row  # the mutual information is TorchUncertainty's ens_MI
    assert float(row[TRAINED_STEPS_COLUMN]) == trainer.global_step == 2


@pytest.mark.slow
def test_trained_steps_are_the_steps_taken_not_the_last_checkpoints(tmp_path):
    """3 steps checkpointed at step 2: the fit's row says 3; a test of that checkpoint by a new
    trainer (no step of its own) says 2."""
    torch.manual_seed(0)
    data = SyntheticDataModule(num_samples=12)
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=-1)
    trainer = cpu_trainer(
        max_steps=3,
        limit_val_batches=0,
        logger=CSVLogger(tmp_path / "fit"),
        callbacks=[checkpoints, ResultsCSVCallback()],
        enable_checkpointing=True,
    )
    routine = _routine()
    trainer.fit(routine, data)
    trainer.test(routine, data, verbose=False)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["epoch=0-step=2.ckpt"]
    assert float(_rows(tmp_path / "fit")[-1][TRAINED_STEPS_COLUMN]) == 3
    (run,) = {p.parent for p in (tmp_path / "fit").rglob("results.csv")}
    assert trained_steps(run) == 3

    tester = cpu_trainer(logger=CSVLogger(tmp_path / "test"), callbacks=[ResultsCSVCallback()])
    tester.test(
        _routine(), data, ckpt_path=tmp_path / "ckpt" / "epoch=0-step=2.ckpt", verbose=False
    )
    assert float(_rows(tmp_path / "test")[-1][TRAINED_STEPS_COLUMN]) == 2


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_a_linked_results_csv_is_left_as_it_is(link, tmp_path):
    """TorchUncertainty would append its row through the link, into the file outside the run:
    its writing is off for this test, and on again after it."""
    outside, run = tmp_path / "other_run.csv", tmp_path / "run"
    outside.write_bytes(PROFILE)
    run.mkdir()
    if link == "hard":
        os.link(outside, run / "results.csv")
    else:
        (run / "results.csv").symlink_to(outside)
    routine = SimpleNamespace(
        save_to_csv=True, csv_filename="results.csv", logger=SimpleNamespace(log_dir=str(run))
    )
    trainer = SimpleNamespace(ckpt_path=None, global_step=0, is_global_zero=True)
    callback = ResultsCSVCallback()
    with pytest.warns(
        UserWarning, match=rf"is a {link} link.*: the test results were not written to it"
    ):
        callback.on_test_start(trainer, routine)
    assert routine.save_to_csv is False
    callback.on_test_end(trainer, routine)
    assert routine.save_to_csv is True
    assert outside.read_bytes() == PROFILE


def test_a_csv_filename_leading_out_of_the_run_is_refused(tmp_path):
    routine = SimpleNamespace(
        save_to_csv=True, csv_filename="../results.csv", logger=SimpleNamespace(log_dir=tmp_path)
    )
    with pytest.raises(ValueError, match=r"csv_filename='\.\./results\.csv' is not a plain file"):
        ResultsCSVCallback().on_test_start(SimpleNamespace(ckpt_path=None), routine)


def test_a_row_written_by_another_test_meanwhile_is_not_completed(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("test/cls/Acc\n0.9000\n0.8000\n")
    with pytest.warns(UserWarning, match=r"holds 2 rows where this test's row would be row 1"):
        append_to_last_row(path, {"test/div/jensen_gap": 0.5}, run_dir=tmp_path, rows=1)
    assert path.read_text() == "test/cls/Acc\n0.9000\n0.8000\n"


def test_a_second_test_into_the_same_folder_rewrites_the_file_whole(tmp_path):
    """The comparison's resumed test, or ``test --ckpt_path ... --trainer.logger.init_args.
    version=N`` run again: TorchUncertainty alone would append its 17 columns under the 30-odd
    of the first test's completed row."""
    torch.manual_seed(0)
    routine, data = _routine(), SyntheticDataModule()
    trainer = cpu_trainer(logger=CSVLogger(tmp_path, version=0), callbacks=[ResultsCSVCallback()])
    trainer.fit(routine, data)
    trainer.test(routine, data, verbose=False)
    again = cpu_trainer(logger=CSVLogger(tmp_path, version=0), callbacks=[ResultsCSVCallback()])
    again.test(_routine(), data, verbose=False)  # a fresh model: other values
    (path,) = tmp_path.rglob("results.csv")
    header, *rows = list(csv.reader(path.open()))
    assert len(rows) == 2 and all(len(row) == len(header) for row in rows)
    assert rows[0] != rows[1] and all(row[header.index("test/div/jensen_gap")] for row in rows)
    check_test_rows(path)  # both rows are the tests'
    assert read_results(path)["test/cls/Acc"] == float(rows[1][header.index("test/cls/Acc")])
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".partial")] == []


def _started(run) -> tuple[ResultsCSVCallback, SimpleNamespace, SimpleNamespace]:
    routine = SimpleNamespace(
        save_to_csv=True, csv_filename="results.csv", logger=SimpleNamespace(log_dir=str(run))
    )
    trainer = SimpleNamespace(
        ckpt_path=None, global_step=3, is_global_zero=True, callback_metrics={}
    )
    callback = ResultsCSVCallback()
    callback.on_test_start(trainer, routine)
    (run / routine.csv_filename).write_bytes(PROFILE)  # TorchUncertainty's csv_writer
    return callback, trainer, routine


def test_a_test_cut_off_before_its_end_leaves_results_csv_as_it_was(tmp_path):
    """An exception (SIGTERM, a full disk) removes the test's own file; a SIGKILL leaves it
    under a temporary name, and results.csv whole for the next test to add its row to."""
    before = b"test/cls/Acc,test/row_crc32\n0.5000,1\n"
    (tmp_path / "results.csv").write_bytes(before)
    callback, trainer, routine = _started(tmp_path)
    callback.on_exception(trainer, routine, KeyboardInterrupt())
    assert routine.csv_filename == "results.csv"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]
    _started(tmp_path)  # killed: no hook runs
    assert (tmp_path / "results.csv").read_bytes() == before
    callback, trainer, routine = _started(tmp_path)
    callback.on_test_end(trainer, routine)
    header, *rows = list(csv.reader((tmp_path / "results.csv").open()))
    assert header == ["test/cls/Acc", ROW_CHECK_COLUMN, TRAINED_STEPS_COLUMN]
    assert [row[:1] + row[2:] for row in rows] == [["0.5000", ""], ["0.9000", "3.0000"]]


def test_a_stand_in_test_says_so_in_its_row(tmp_path):
    """The row says what the marker file says: renaming the data root or removing the marker
    leaves it."""
    torch.manual_seed(0)
    trainer = cpu_trainer(
        logger=CSVLogger(tmp_path, version=0),
        callbacks=[ResultsCSVCallback(), stand_in_label(tmp_path / "standin")],
    )
    trainer.test(_routine(), SyntheticDataModule(), verbose=False)
    assert _rows(tmp_path)[-1][STAND_IN_COLUMN] == "1.0000"


def _checked_run(folder, *rows: dict[str, float]):
    """A results.csv holding ``rows``, each added as a test adds it."""
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows:
        written = folder / ".results.csv.1-0000000000000000.partial"
        written.write_text(",".join(row) + "\n" + ",".join(f"{v:.4f}" for v in row.values()))
        add_test_row(folder / "results.csv", written, {})
    return folder / "results.csv"


@pytest.mark.parametrize(
    ("edit", "row"),
    [
        (lambda lines: [*lines, lines[-1]], 3),  # a row copied below itself
        (lambda lines: [*lines, "0.9900,0.0100,"], 3),  # a row typed in, no check
        (lambda lines: [lines[0], lines[1].replace("0.5000", "0.9500"), lines[2]], 1),
        (lambda lines: [lines[0], lines[2]], 1),  # the first test's row deleted
    ],
    ids=["copied", "typed", "edited", "deleted"],
)
def test_a_row_no_test_wrote_is_refused_naming_it(edit, row, tmp_path):
    path = _checked_run(tmp_path, {"test/cls/Acc": 0.5, "test/cls/NLL": 0.7}, {"test/cls/Acc": 0.6})
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    with pytest.raises(ValueError, match=rf"results.csv: row {row} was not written by a test"):
        check_test_rows(path)


def test_rows_of_tests_with_other_columns_are_whole_and_accepted(tmp_path):
    path = _checked_run(tmp_path, {"test/cls/Acc": 0.5}, {"test/cls/Acc": 0.6, "ood/AUROC": 0.7})
    header, *rows = list(csv.reader(path.open()))
    assert header == ["test/cls/Acc", ROW_CHECK_COLUMN, "ood/AUROC"]
    assert [len(r) for r in rows] == [3, 3] and rows[0][2] == ""
    check_test_rows(path)
    append_to_last_row(path, {"test/div/jensen_gap": 0.1})  # a later callback's values
    check_test_rows(path)


@pytest.mark.parametrize(("rows", "accepted"), [(1, True), (2, False)])
def test_a_run_tested_before_the_check_keeps_what_the_check_accepted(rows, accepted, tmp_path):
    """Its one row passed the check, and still does beside a new test's; two such rows did not
    (one may be a row appended by hand), and still do not."""
    path = tmp_path / "results.csv"
    path.write_text("test/cls/Acc\n" + "0.5000\n" * rows)
    _checked_run(tmp_path, {"test/cls/Acc": 0.6})
    if accepted:
        check_test_rows(path)
    else:
        with pytest.raises(ValueError, match="row 1 was not written by a test"):
            check_test_rows(path)
