"""The budget a results row records: a training limit of one batch (the ``int`` 1, as the
command now passes ``--trainer.limit_train_batches=1``) is a budget, not Lightning's default of
the whole epoch (the ``float`` 1.0)."""

from __future__ import annotations

import pytest

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.reproduction.results_table import aggregate
from signorm_lab.reproduction.runs import find_runs

CONFIG = {
    "seed_everything": 1,
    "data": {"class_path": "X", "init_args": {"batch_size": 128}},
    "routine": {
        "class_path": "a.SigmaNormClassificationRoutine",
        "init_args": {"model": {"init_args": {"num_estimators": 4}}},
    },
}


@pytest.mark.parametrize(("limit", "recorded"), [(1, True), (1.0, False), (0.5, True), (3, True)])
def test_one_training_batch_is_recorded_and_the_whole_epoch_is_not(tmp_path, limit, recorded):
    write_run(
        tmp_path / "run",
        tu_metrics(0.9, 0.3, 0.01),
        config={**CONFIG, "trainer": {"max_epochs": 1, "limit_train_batches": limit}},
    )
    row = aggregate(find_runs([tmp_path]), "x")
    assert ("limit_train_batches" in row) is recorded
    if recorded:
        assert row["limit_train_batches"] == limit and type(row["limit_train_batches"]) is type(
            limit
        )
