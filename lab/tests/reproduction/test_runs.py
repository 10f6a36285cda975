"""Runs are grouped by training run: re-evaluating a checkpoint is not another seed."""

import os

import pytest

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.reproduction.results_table import aggregate
from signorm_lab.reproduction.runs import find_runs, merge_evaluations, trained_steps


def _config(seed, batch_size=64, **top):
    return {
        "seed_everything": seed,
        "trainer": {"max_epochs": 3},
        "data": {"class_path": "X", "init_args": {"batch_size": batch_size}},
        **top,
    }


def _training_run(folder, seed, acc, steps=(10, 30), trained=30):
    write_run(
        folder, tu_metrics(acc, 0.3, 0.01, **{"train/trained_steps": trained}), config=_config(seed)
    )
    for step in steps:
        (folder / "checkpoints").mkdir(exist_ok=True)
        (folder / "checkpoints" / f"epoch=0-step={step}-val_acc=0.5.ckpt").write_bytes(b"")
    return folder


def test_a_test_rerun_of_a_checkpoint_replaces_its_training_runs_result(tmp_path):
    logs = tmp_path / "logs" / "signorm"
    first = _training_run(logs / "version_0", seed=0, acc=0.90)
    _training_run(logs / "version_1", seed=1, acc=0.94)
    # `torch-uncertainty test --ckpt_path logs/signorm/version_0/checkpoints/...` run in
    # tmp_path: a folder of its own, whose config.yaml names the checkpoint (relative path).
    retest = write_run(
        logs / "version_2",
        tu_metrics(0.92, 0.3, 0.01),
        config=_config(
            0,
            batch_size=32,
            ckpt_path="logs/signorm/version_0/checkpoints/epoch=0-step=30-val_acc=0.5.ckpt",
        ),
    )
    os.utime(retest / "results.csv", (1e10, 1e10))  # the most recent evaluation
    runs = find_runs([logs])
    assert len(runs) == 3 and runs[2].training_run == first.resolve()

    merged = merge_evaluations(runs)
    assert [run.training_run.name for run in merged] == ["version_0", "version_1"]
    assert merged[0].path == retest / "results.csv"  # the latest evaluation counts
    assert merged[0].evaluations == (first / "results.csv", retest / "results.csv")
    assert merged[0].settings["test_batch_size"] == 32  # the evaluation's own test batches
    assert merged[0].settings["max_epochs"] == 3  # the training run's budget

    row = aggregate(runs, "x")
    assert row["runs"] == 2 and row["seeds"] == "0 1"
    assert row["Acc"] == pytest.approx(93.0)  # (92 + 94) / 2, not (90 + 94 + 92) / 3
    assert row["trained_steps"] == 30 and row["max_epochs"] == 3
    assert "MAdds" in row  # every evaluation's config gives its test batch size


def test_a_moved_log_folder_still_groups_by_its_sibling_version(tmp_path):
    moved = tmp_path / "elsewhere" / "signorm"
    _training_run(moved / "version_0", seed=0, acc=0.90)
    write_run(
        moved / "version_1",
        tu_metrics(0.92, 0.3, 0.01),
        config=_config(0, ckpt_path="/cluster/logs/signorm/version_0/checkpoints/b.ckpt"),
    )
    assert len(merge_evaluations(find_runs([moved]))) == 1


def test_a_checkpoint_outside_the_searched_folders_is_its_own_training_run(tmp_path):
    write_run(
        tmp_path / "a",
        tu_metrics(0.92, 0.3, 0.01),
        config=_config(0, ckpt_path="/nowhere/run/version_3/checkpoints/b.ckpt"),
    )
    write_run(tmp_path / "b", tu_metrics(0.90, 0.3, 0.01), config=_config(1))
    merged = merge_evaluations(find_runs([tmp_path]))
    assert len(merged) == 2
    assert str(merged[0].training_run) == "/nowhere/run/version_3"


def test_trained_steps_are_the_steps_the_run_recorded_not_a_checkpoint_name(tmp_path):
    """A run of 90 optimizer steps whose last checkpoint was saved at step 72 trained 90."""
    assert trained_steps(_training_run(tmp_path / "run", 0, 0.9, steps=(54, 72), trained=90)) == 90
    write_run(tmp_path / "old", tu_metrics(0.9, 0.3, 0.01), config=_config(0))
    (tmp_path / "old" / "checkpoints").mkdir()
    (tmp_path / "old" / "checkpoints" / "epoch=0-step=72.ckpt").write_bytes(b"")
    assert trained_steps(tmp_path / "old") is None  # unknown, not the checkpoint's 72
    assert trained_steps(tmp_path / "none") is None
