"""RunRecordCallback writes what signorm-compare reads: parameters, steps, times, class counts."""

import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
from lightning.pytorch import Callback, LightningModule, Trainer, seed_everything
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from signorm_lab.callbacks import RunRecordCallback
from signorm_lab.callbacks.run_record import (
    FIT_KEYS,
    REQUEST_ENV,
    RUN_RECORD_FILENAME,
    read_run_record,
)

X = torch.randn(24, 4, generator=torch.Generator().manual_seed(0))
Y = torch.tensor([0, 1, 2, 2, 2, 1] * 4)


class _Tiny(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Linear(4, 3)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.model(x), y)

    def test_step(self, batch, batch_idx):
        return None

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_the_record_counts_the_batches_seen_and_the_parameters(tmp_path):
    callback = RunRecordCallback()
    trainer = Trainer(
        default_root_dir=tmp_path,
        max_steps=2,
        callbacks=[callback],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        logger=True,
    )
    module = _Tiny()
    loader = DataLoader(TensorDataset(X, Y), batch_size=4, shuffle=False)
    trainer.fit(module, loader)
    trainer.test(module, DataLoader(TensorDataset(X, Y), batch_size=8), verbose=False)
    (path,) = tmp_path.rglob("run_record.json")
    record = json.loads(path.read_text())
    assert record["optimizer_steps"] == 2
    assert record["params_total"] == record["params_trainable"] == 4 * 3 + 3
    assert record["train_class_counts"] == {str(k): v for k, v in Counter(Y[:8].tolist()).items()}
    assert record["test_class_counts"] == {"0": 4, "1": 8, "2": 12}
    assert record["fit_seconds"] > 0 and record["test_seconds"] >= 0
    assert record["provenance"]["versions"]["torch"] == torch.__version__.split("+")[0]


def test_a_resumed_run_keeps_the_fit_time_and_counts_of_before():
    before = RunRecordCallback()
    before.fit_seconds, before.train_counts = 12.5, Counter({0: 3, 1: 5})
    after = RunRecordCallback()
    after.load_state_dict(before.state_dict())
    assert after.fit_seconds == 12.5 and after.train_counts == Counter({0: 3, 1: 5})


def test_a_later_test_of_the_runs_own_checkpoint_keeps_the_fit_of_its_folder(tmp_path):
    """The record of a fit names its best checkpoint; a process testing that checkpoint into the
    run's own folder (no fit of its own: no steps, no train counts) keeps the fit's fields, and one
    testing it into another folder, even one holding a copy of the record, does not."""

    def trainer(version: int, **kwargs) -> Trainer:
        return Trainer(
            logger=CSVLogger(tmp_path, name="run", version=version),
            callbacks=[RunRecordCallback()],
            enable_progress_bar=False,
            enable_model_summary=False,
            **kwargs,
        )

    trainer(0, max_steps=2).fit(_Tiny(), DataLoader(TensorDataset(X, Y), batch_size=4))
    run = tmp_path / "run" / "version_0"
    fitted = json.loads((run / "run_record.json").read_text())
    best = run / fitted["best_checkpoint"]
    assert best.is_file() and fitted["test_seconds"] is None and fitted["optimizer_steps"] == 2
    other = run.with_name("version_1")
    other.mkdir()
    shutil.copy(run / "run_record.json", other)
    tests = DataLoader(TensorDataset(X, Y), batch_size=8)
    trainer(1).test(_Tiny(), tests, ckpt_path=best, verbose=False)
    elsewhere = json.loads((other / "run_record.json").read_text())
    assert elsewhere["optimizer_steps"] == 0 and "test_provenance" not in elsewhere
    trainer(0).test(_Tiny(), tests, ckpt_path=best, verbose=False)
    record = json.loads((run / "run_record.json").read_text())
    assert {key: record[key] for key in FIT_KEYS} == {key: fitted[key] for key in FIT_KEYS}
    assert record["test_seconds"] is not None
    assert record["test_class_counts"] == {"0": 4, "1": 8, "2": 12}
    assert record["test_provenance"]["versions"] == record["provenance"]["versions"]


def test_a_run_records_what_decided_it_from_its_start_and_its_best_checkpoints_sha256(
    tmp_path, monkeypatch
):
    """The request its comparison handed it, the seed it was seeded with and its saved
    configuration's sha256, written when the fit starts (an interrupted run says what it was),
    and the sha256 of its best checkpoint."""
    monkeypatch.setenv(REQUEST_ENV, json.dumps({"seed": 3, "options": ["--x=1"], "recipes": []}))
    seen = {}

    class Started(Callback):
        def on_train_start(self, trainer, pl_module):
            seen.update(read_run_record(Path(trainer.log_dir) / RUN_RECORD_FILENAME))

    seed_everything(3)
    (tmp_path / "run" / "version_0").mkdir(parents=True)
    (tmp_path / "run" / "version_0" / "config.yaml").write_text("seed_everything: 3\n")
    Trainer(
        logger=CSVLogger(tmp_path, name="run", version=0),
        max_steps=2,
        callbacks=[RunRecordCallback(), Started()],
        enable_progress_bar=False,
        enable_model_summary=False,
    ).fit(_Tiny(), DataLoader(TensorDataset(X, Y), batch_size=4))
    assert seen["request"]["options"] == ["--x=1"] and seen["fit_seconds"] is None
    record = read_run_record(tmp_path / "run" / "version_0" / RUN_RECORD_FILENAME)
    assert record["seed"] == 3 and record["request"]["seed"] == 3
    saved = hashlib.sha256(b"seed_everything: 3\n").hexdigest()
    assert seen["config_sha256"] == record["config_sha256"] == saved
    best = tmp_path / "run" / "version_0" / record["best_checkpoint"]
    assert record["best_checkpoint_sha256"] == hashlib.sha256(best.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"test_seconds": 1.', "not a run record"),
        (b"[1, 2]", "holds a JSON list, not the object a run writes"),
        (b'{"a": "' + b"x" * (1 << 20) + b'"}', "holds more than 1048576 bytes"),
        (b'{"test_seconds": 1.0}', "'params_total' is missing, not the int a finished run"),
        (b"\xff\xfe{}", "not a run record"),
        (None, "a symbolic link, not the record a run writes"),
    ],
    ids=["truncated", "a list", "over 1 MB", "keys missing", "not UTF-8", "a symbolic link"],
)
def test_a_record_that_cannot_be_read_is_refused_in_one_line_saying_what_to_do(
    tmp_path, content, message
):
    path = tmp_path / RUN_RECORD_FILENAME
    if content is None:  # a link to a record elsewhere (a finished run's, another seed's)
        (tmp_path / "elsewhere.json").write_text("{}")
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as error:
        read_run_record(path, finished=True)
    assert str(path) in str(error.value) and "run again" in str(error.value)
    assert "\n" not in str(error.value)
