"""MemberOwnershipCallback during training: CSV, scalars and figures per epoch."""

import csv
import gc
import importlib.util
from collections import Counter
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest
import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from matplotlib.figure import Figure
from torch import nn

from fixtures.training import NUM_ESTIMATORS, cpu_trainer, separable_loader, signorm_routine
from torch_uncertainty_signorm import ownership_counts, pairwise_cosine
from torch_uncertainty_signorm.callbacks import MemberOwnershipCallback
from torch_uncertainty_signorm.callbacks.member_ownership import importance_embedding_figure

FIGURES = ("importance_histogram", "importance_embedding", "ownership_counts")
M = NUM_ESTIMATORS
HAS_TENSORBOARD = importlib.util.find_spec("tensorboard") is not None


def _train():
    return separable_loader(96, batch_size=32, shuffle=True)


def _validation():
    return separable_loader(32, batch_size=32, seed=1)


def read_blocks(path):
    """{(epoch, scope): [(k, count, fraction), ...]} and the raw lines of ownership.csv."""
    lines = path.read_text().splitlines()
    blocks = {}
    for row in csv.DictReader(lines):
        blocks.setdefault((int(row["epoch"]), row["scope"]), []).append(
            (int(row["k"]), int(row["count"]), float(row["fraction"]))
        )
    return blocks, lines


def num_features(model, regularized_only):
    return sum(layer.num_features for layer in model.signorm_layers(regularized_only).values())


def read_events(log_dir):
    """(image tag → steps, scalar tag → [(step, value)]) from the TensorBoard event file."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"images": 0, "scalars": 0})
    events.Reload()
    images = {tag: [e.step for e in events.Images(tag)] for tag in events.Tags()["images"]}
    scalars = {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }
    return images, scalars


def read_logged_csv(log_dir):
    """The same from a CSVLogger run: PNG figures per epoch, scalars from metrics.csv."""
    images = {
        f"ownership/{png.stem}": sorted(
            int(p.parent.name.removeprefix("epoch="))
            for p in log_dir.glob(f"ownership/epoch=*/{png.name}")
        )
        for png in log_dir.glob("ownership/epoch=*/*.png")
    }
    scalars = {}
    with (log_dir / "metrics.csv").open() as file:
        for row in csv.DictReader(file):
            for tag, value in row.items():
                if tag.startswith("ownership/") and value != "":
                    scalars.setdefault(tag, []).append((int(row["step"]), float(value)))
    return images, scalars


def live_figures():
    gc.collect()
    gc.collect()  # objects freed by a finaliser during the first pass are reclaimed in the second
    return sum(type(obj) is Figure for obj in gc.get_objects())


def test_training_logs_one_block_figures_and_scalars_per_validation_epoch(tmp_path):
    """TensorBoard when installed (read back with EventAccumulator), else the CSV/PNG path."""
    torch.manual_seed(0)
    figures_before = live_figures()
    routine = signorm_routine()
    logger = TensorBoardLogger(tmp_path) if HAS_TENSORBOARD else CSVLogger(tmp_path)
    trainer = cpu_trainer(
        max_epochs=2,
        logger=logger,
        limit_train_batches=3,
        log_every_n_steps=1,
        limit_val_batches=1,
        callbacks=[MemberOwnershipCallback()],
    )
    trainer.fit(routine, _train(), _validation())  # the sanity check runs too
    assert plt.get_fignums() == []  # no figure left open in pyplot
    assert live_figures() == figures_before  # 6 figures drawn, none kept alive

    model = routine.model
    log_dir = tmp_path / "lightning_logs" / "version_0"
    blocks, lines = read_blocks(log_dir / "ownership.csv")
    assert lines[0] == "epoch,scope,k,count,fraction"
    assert lines.count(lines[0]) == 1 and len(lines) == 1 + 2 * 2 * (M + 1)
    assert set(blocks) == {(e, s) for e in (0, 1) for s in ("all", "regularized")}
    totals = {"all": num_features(model, False), "regularized": num_features(model, True)}
    assert totals["regularized"] < totals["all"]  # the resnet18 preset leaves some layers out
    for (_, scope), rows in blocks.items():
        assert [k for k, _, _ in rows] == list(range(M + 1))
        assert sum(count for _, count, _ in rows) == totals[scope]  # each feature once
        for _, count, fraction in rows:
            assert fraction == pytest.approx(count / totals[scope], abs=1e-6)
    with torch.no_grad():
        for scope, regularized_only in (("all", False), ("regularized", True)):
            expected = ownership_counts(model.importances(regularized_only)).tolist()
            assert [count for _, count, _ in blocks[(1, scope)]] == expected

    logger.save()
    images, scalars = read_events(log_dir) if HAS_TENSORBOARD else read_logged_csv(log_dir)
    for name in FIGURES:
        assert images[f"ownership/{name}"] == [0, 1]  # epoch steps, sanity check skipped
    for scope in ("all", "regularized"):
        for k, count, _ in blocks[(1, scope)]:
            (step0, _), (step1, value) = scalars[f"ownership/{scope}/k={k}"]
            assert (step0, step1) == (0, 1)
            assert value == pytest.approx(count / totals[scope], abs=1e-6)
    for name, layer in model.signorm_layers().items():
        steps, values = zip(*scalars[f"ownership/signorm_cos/{name}"], strict=True)
        assert steps == (0, 1)
        cosine = float(pairwise_cosine(layer.importance().detach()))
        assert values[1] == pytest.approx(cosine, abs=1e-5)
    assert "ownership/regularized/k=1" in trainer.callback_metrics  # usable by monitors


def set_known_ownership(model, confident=20.0):
    """Feature f of every layer: members m < k_f at +20, member k_f at σ = 0.7, others at -20,
    with k_f = f mod (M + 1). Ownership is min(k_f + 1, M) at threshold 0.5, k_f at 0.8."""
    with torch.no_grad():
        for layer in model.signorm_layers().values():
            members = torch.arange(M).unsqueeze(1)
            k = torch.arange(layer.num_features) % (M + 1)
            logits = torch.where(members < k, confident, -confident)
            logits = torch.where(members == k, torch.logit(torch.tensor(0.7)), logits)
            layer.scale_logits.copy_(logits)


def expected_counts(model, regularized_only, shift):
    counter = Counter()
    for layer in model.signorm_layers(regularized_only).values():
        counter.update(min(f % (M + 1) + shift, M) for f in range(layer.num_features))
    return [counter[k] for k in range(M + 1)]


def test_hand_built_importances_give_exact_counts_and_a_repeated_epoch_replaces_its_rows(tmp_path):
    routine = signorm_routine()
    set_known_ownership(routine.model)
    callbacks = [
        MemberOwnershipCallback(dirpath=tmp_path / "half", log_figures=False),
        MemberOwnershipCallback(dirpath=tmp_path / "high", threshold=0.8, log_figures=False),
    ]
    logger = CSVLogger(tmp_path / "logs")  # dirpath wins over the logger's directory
    trainer = cpu_trainer(logger=logger, limit_val_batches=1, callbacks=callbacks)
    trainer.validate(routine, _validation(), verbose=False)
    trainer.validate(routine, _validation(), verbose=False)  # epoch 0 again, as after a resume

    for folder, shift in (("half", 1), ("high", 0)):
        blocks, lines = read_blocks(tmp_path / folder / "ownership.csv")
        assert lines.count("epoch,scope,k,count,fraction") == 1
        assert set(blocks) == {(0, "all"), (0, "regularized")}  # replaced, not duplicated
        for scope, regularized_only in (("all", False), ("regularized", True)):
            counts = [count for _, count, _ in blocks[(0, scope)]]
            assert counts == expected_counts(routine.model, regularized_only, shift), folder
    assert not list(tmp_path.rglob("*.png"))  # log_figures=False
    assert not list((tmp_path / "logs").rglob("ownership.csv"))


def test_csv_logger_falls_back_to_png_figures(tmp_path):
    routine = signorm_routine()
    logger = CSVLogger(tmp_path)
    trainer = cpu_trainer(
        logger=logger,
        limit_val_batches=1,
        callbacks=[MemberOwnershipCallback(max_embedding_points=64)],
    )
    trainer.validate(routine, _validation(), verbose=False)
    assert plt.get_fignums() == []
    for name in FIGURES:
        png = tmp_path / "lightning_logs" / "version_0" / "ownership" / "epoch=0" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    logger.save()
    with (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").open() as file:
        header = next(csv.reader(file))
    assert {"ownership/all/k=0", "ownership/regularized/k=4", "ownership/signorm_cos/bn1"} <= set(
        header
    )


def test_embedding_plots_a_deterministic_even_subsample_capped_at_max_points():
    importances = {
        "all": [torch.rand(M, 300), torch.rand(M, 20)],
        "regularized": [torch.rand(M, 30)],
    }

    def plotted_points():
        figure = importance_embedding_figure(importances, M, max_points=50)
        return [
            torch.cat([torch.as_tensor(c.get_offsets()) for c in ax.collections])
            for ax in figure.axes
            if ax.collections
        ]

    first, second = plotted_points(), plotted_points()
    assert [len(p) for p in first] == [50, 30]  # capped at 50 of 320; all 30 below the cap
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))  # deterministic


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": 0.0}, "threshold must be a number in \\(0, 1\\), got 0.0"),
        ({"threshold": 1}, "threshold must be a number in \\(0, 1\\), got 1"),
        ({"threshold": 1.5}, "got 1.5"),
        ({"threshold": True}, "got True"),
        ({"max_embedding_points": 1}, "max_embedding_points must be an integer >= 2, got 1"),
        ({"max_embedding_points": 2.5}, "got 2.5"),
    ],
)
def test_bad_arguments_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MemberOwnershipCallback(**kwargs)


def test_routine_without_signorm_ensemble_raises_type_error_naming_it():
    module = LightningModule()
    module.model = nn.Linear(2, 2)
    trainer = SimpleNamespace(sanity_checking=False)
    with pytest.raises(TypeError, match="SigmaNormEnsemble, got Linear on LightningModule"):
        MemberOwnershipCallback().on_validation_epoch_end(trainer, module)
