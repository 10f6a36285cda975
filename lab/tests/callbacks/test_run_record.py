"""RunRecordCallback writes what signorm-compare reads: parameters, steps, times, class counts."""

import json
import shutil
from collections import Counter

import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from signorm_lab.callbacks import RunRecordCallback
from signorm_lab.callbacks.run_record import FIT_KEYS

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
