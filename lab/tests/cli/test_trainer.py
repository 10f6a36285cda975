"""The command's trainer reads a batch limit as Lightning does: an ``int`` is a number of batches,
a ``float`` a fraction of the epoch (``--trainer.limit_val_batches=1`` is one batch, not 100%)."""

from __future__ import annotations

from command_args import signorm_args

from signorm_lab.cli import cli_main
from signorm_lab.cli.trainer import TUSigmaNormTrainer

LIMITS = {
    "limit_train_batches": "0.5",
    "limit_val_batches": "1",
    "limit_test_batches": "1",
    "limit_predict_batches": "3",
    "val_check_interval": "1",
    "overfit_batches": "0.0",
}


def test_an_int_batch_limit_is_batches_and_a_float_a_fraction(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = cli_main(
        signorm_args(*(f"--trainer.{key}={value}" for key, value in LIMITS.items())), run=False
    )
    assert isinstance(cli.trainer, TUSigmaNormTrainer)
    given = {key: cli.config.trainer[key] for key in LIMITS}
    assert given == {
        "limit_train_batches": 0.5,
        "limit_val_batches": 1,
        "limit_test_batches": 1,
        "limit_predict_batches": 3,
        "val_check_interval": 1,
        "overfit_batches": 0.0,
    }
    assert {key: type(value) for key, value in given.items()} == {
        "limit_train_batches": float,
        "limit_val_batches": int,
        "limit_test_batches": int,
        "limit_predict_batches": int,
        "val_check_interval": int,
        "overfit_batches": float,
    }
    trainer = cli.trainer  # Lightning's own reading: 1 batch of validation and of test
    assert (trainer.limit_val_batches, trainer.limit_test_batches) == (1, 1)
    assert type(trainer.limit_val_batches) is int and type(trainer.limit_test_batches) is int
    assert trainer.limit_train_batches == 0.5
