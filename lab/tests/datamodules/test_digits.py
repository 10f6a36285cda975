"""Tests of :class:`DigitsDataModule` on the real scikit-learn ``digits`` images."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.utils import TUTrainer

from signorm_lab.datamodules import DigitsDataModule

NUM_IMAGES, NUM_CLASSES = 1797, 10


@pytest.fixture
def single_thread():
    """Run on one intra-op thread: on a busy 2-core machine, 2 threads made training ~30x slower."""
    num_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(num_threads)


def _setup(**kwargs) -> DigitsDataModule:
    dm = DigitsDataModule(**kwargs)
    dm.setup()
    return dm


def _labels(dataset) -> np.ndarray:
    return dataset.tensors[1].numpy()


def test_splits_are_disjoint_stratified_and_cover_the_dataset() -> None:
    dm = _setup()
    splits = dm.split_indices
    assert {k: len(v) for k, v in splits.items()} == {"train": 1149, "val": 288, "test": 360}
    union = np.concatenate(list(splits.values()))
    assert len(union) == NUM_IMAGES
    assert set(union.tolist()) == set(range(NUM_IMAGES))
    full_freq = np.bincount(load_digits().target) / NUM_IMAGES
    for dataset in (dm.train, dm.val, dm.test):
        counts = np.bincount(_labels(dataset), minlength=NUM_CLASSES)
        assert (counts > 0).all()
        np.testing.assert_allclose(counts / counts.sum(), full_freq, atol=0.01)


def test_split_is_deterministic_in_seed() -> None:
    a, b, c = _setup(seed=0), _setup(seed=0), _setup(seed=1)
    for name in ("train", "val", "test"):
        np.testing.assert_array_equal(a.split_indices[name], b.split_indices[name])
    assert not np.array_equal(np.sort(a.split_indices["test"]), np.sort(c.split_indices["test"]))
    torch.testing.assert_close(a.test.tensors[0], b.test.tensors[0])


def test_tensors_have_documented_shapes_dtypes_and_train_normalization() -> None:
    dm = _setup()
    assert dm.input_shape == (1, 8, 8)
    assert dm.num_channels == 1
    assert dm.num_classes == NUM_CLASSES
    images, targets = next(iter(dm.train_dataloader()))
    assert images.shape == (64, 1, 8, 8)
    assert images.dtype == torch.float32
    assert targets.dtype == torch.int64
    train_images = dm.train.tensors[0]
    assert abs(train_images.mean().item()) < 1e-5
    assert abs(train_images.std().item() - 1) < 1e-3
    # Every split uses the train statistics: raw [0, 1] values map back to 17 grey levels.
    for dataset in (dm.val, dm.test):
        raw = dataset.tensors[0] * dm.std[0] + dm.mean[0]
        torch.testing.assert_close(raw * 16, (raw * 16).round(), atol=1e-4, rtol=0)
        assert raw.min() >= -1e-5
        assert raw.max() <= 1 + 1e-5


def test_test_dataloader_returns_ood_loader_of_permuted_test_images() -> None:
    assert len(_setup().test_dataloader()) == 1
    dm = _setup(eval_ood=True)
    loaders = dm.test_dataloader()
    assert len(loaders) == 2
    test_images = dm.test.tensors[0].flatten(1)
    ood_images = loaders[1].dataset.tensors[0].flatten(1)
    assert ood_images.shape == test_images.shape
    # Same pixel values per image (a permutation), but not the same image.
    torch.testing.assert_close(ood_images.sort(dim=1).values, test_images.sort(dim=1).values)
    assert (ood_images != test_images).any(dim=1).all()
    # Permutations differ across images.
    assert not torch.equal(ood_images.argsort(dim=1)[0], ood_images.argsort(dim=1)[1])


def test_shift_loader_comes_last_and_noise_grows_with_severity() -> None:
    dists = []
    for severity in (1, 5):
        dm = _setup(eval_ood=True, eval_shift=True, shift_severity=severity)
        loaders = dm.test_dataloader()
        assert len(loaders) == 3
        shifted, test = loaders[2].dataset.tensors, dm.test.tensors
        torch.testing.assert_close(shifted[1], test[1])
        dists.append((shifted[0] - test[0]).abs().mean().item())
    assert 0 < dists[0] < dists[1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"val_split": 0.0}, r"val_split .*\(0, 1\), got 0\.0"),
        ({"val_split": 1.5}, r"val_split .*\(0, 1\), got 1\.5"),
        ({"test_split": 1.0}, r"test_split .*\(0, 1\), got 1\.0"),
        ({"batch_size": 0}, r"batch_size must be an integer >= 1, got 0"),
        ({"eval_batch_size": -3}, r"eval_batch_size .*>= 1, got -3"),
        ({"shift_severity": 6}, r"shift_severity .*integers in 1\.\.5, got \[6\]"),
        ({"seed": -1}, r"seed .*got -1"),
        ({"num_workers": 0, "persistent_workers": True}, r"num_workers > 0"),
        ({"val_split": 0.999}, r"val_split=0\.999.* 1 image\(s\) in the train split"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DigitsDataModule(**kwargs)


def test_bad_stage_raises_value_error() -> None:
    with pytest.raises(ValueError, match="'predict'"):
        DigitsDataModule().setup("predict")


@pytest.mark.filterwarnings("ignore:You called `self.log", "ignore:Metric `FPR95`")
def test_classification_routine_trains_and_detects_ood(tmp_path, single_thread: None) -> None:
    torch.manual_seed(0)
    dm = DigitsDataModule(batch_size=32, eval_ood=True)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, NUM_CLASSES),
    )
    routine = ClassificationRoutine(
        model=model,
        num_classes=NUM_CLASSES,
        loss=nn.CrossEntropyLoss(),
        optim_recipe=torch.optim.Adam(model.parameters(), lr=3e-3),
        eval_ood=True,
    )
    trainer = TUTrainer(
        accelerator="cpu",
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(routine, dm)
    results = trainer.test(routine, dm, verbose=False)[0]
    assert results["test/cls/Acc"] > 0.8
    assert "ood/AUROC" in results
    # Measured 0.93-0.96 accuracy and 0.90-0.95 AUROC over seeds 0-4; chance is 0.1 and 0.5.
    assert results["ood/AUROC"] > 0.8


# --------------------------------------------------------------- the study's harder variant
STUDY = {"held_out_classes": [8, 9], "train_size": 400, "val_size": 200, "input_noise": 0.3}


def test_held_out_digits_are_absent_from_every_split_and_form_the_near_ood_set() -> None:
    dm = _setup(**STUDY, eval_near_far_ood=True)
    digits = load_digits().target
    assert dm.num_classes == 8
    sizes = {name: len(idx) for name, idx in dm.split_indices.items()}
    assert sizes == {"train": 400, "val": 200, "test": 1443 - 600, "held_out": 354}
    for split in ("train", "val", "test"):
        original = digits[dm.split_indices[split]]
        assert not np.isin(original, [8, 9]).any()
        # Labels are the kept digits relabelled 0..7 (here unchanged), every class present.
        labels = _labels(getattr(dm, split))
        np.testing.assert_array_equal(labels, original)
        assert set(labels.tolist()) == set(range(8))
    assert set(digits[dm.split_indices["held_out"]].tolist()) == {8, 9}
    near = dm.test_dataloader()[1].dataset
    assert len(near) == 354
    assert [s.kind for s in dm.eval_sets[:3]] == ["id", "ood", "ood"]
    assert [s.group for s in dm.eval_sets[1:3]] == ["near", "far"]


def test_held_out_classes_other_than_the_last_are_relabelled_in_order() -> None:
    dm = _setup(held_out_classes=[0, 5])
    digits = load_digits().target
    relabel = {d: i for i, d in enumerate([1, 2, 3, 4, 6, 7, 8, 9])}
    for split in ("train", "test"):
        expected = [relabel[d] for d in digits[dm.split_indices[split]]]
        np.testing.assert_array_equal(_labels(getattr(dm, split)), expected)


def test_input_noise_is_one_fixed_draw_per_image_shared_by_the_shifted_sets() -> None:
    clean, noisy = _setup(**{**STUDY, "input_noise": 0.0}), _setup(**STUDY)
    again = _setup(**STUDY)
    torch.testing.assert_close(noisy.test.tensors[0], again.test.tensors[0])
    raw = lambda dm, x: x * dm.std[0] + dm.mean[0]  # noqa: E731
    residual = raw(noisy, noisy.test.tensors[0]) - raw(clean, clean.test.tensors[0])
    assert abs(residual.std().item() - 0.3) < 0.01 and abs(residual.mean().item()) < 0.01
    # A corruption of strength 0 would give back the noisy test image: each shifted set is
    # corrupt(clean) + the same sensor noise, so blurring does not remove the noise.
    dm = _setup(
        **STUDY, eval_shift_severities=True, corruptions=["translation"], shift_severities=[1]
    )
    shifted = raw(dm, dm.test_dataloader()[1].dataset.tensors[0])
    corrupted_clean = dm._corrupt(dm._raw("test"), "translation", 1)
    torch.testing.assert_close(shifted - corrupted_clean, residual, atol=1e-5, rtol=0)


def test_corruptions_grow_with_severity_and_keep_the_labels() -> None:
    dm = _setup(**STUDY, eval_shift_severities=True)
    loaders = dm.test_dataloader()
    assert len(loaders) == 1 + 5 * 3 and len(dm.eval_sets) == len(loaders)
    clean = dm._raw("test")
    for name in ("gaussian_noise", "gaussian_blur", "translation"):
        distances = [(dm._corrupt(clean, name, s) - clean).abs().mean().item() for s in (1, 3, 5)]
        assert 0 < distances[0] < distances[1] < distances[2], name
    for spec, loader in zip(dm.eval_sets[1:], loaders[1:], strict=True):
        assert spec.kind == "shift"
        assert torch.equal(loader.dataset.tensors[1], dm.test.tensors[1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"held_out_classes": [8, 10]}, r"held_out_classes .*0\.\.9.*got \[8, 10\]"),
        ({"held_out_classes": list(range(9))}, r"leaving at least two classes"),
        ({"train_size": 400}, r"train_size and val_size go together"),
        ({"train_size": 1000, "val_size": 790}, r"leave 7 test image\(s\)"),
        ({"input_noise": -0.1}, r"input_noise must be a finite number >= 0, got -0\.1"),
        ({"corruptions": ["fog"]}, r"corruptions \['fog'\]; valid names"),
        ({"eval_ood": True, "eval_shift_severities": True}, r"cannot be combined"),
        ({"eval_near_far_ood": True}, r"needs held_out_classes"),
    ],
)
def test_bad_study_arguments_name_the_value(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DigitsDataModule(**kwargs)


# --- imagenet_input: RGB images for an ImageNet-pretrained CNN --------------------------------

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def _as_imagenet(images: torch.Tensor, size: int) -> torch.Tensor:
    """``[0, 1]`` grey images resized, repeated to RGB and normalised as ImageNet's."""
    resized = nn.functional.interpolate(images, size=size, mode="bilinear", align_corners=False)
    return (resized.repeat(1, 3, 1, 1) - IMAGENET_MEAN) / IMAGENET_STD


def test_imagenet_input_serves_resized_rgb_images_in_every_loader() -> None:
    dm = _setup(
        imagenet_input=32,
        train_size=1000,
        val_size=200,
        batch_size=32,
        eval_ood=True,
        eval_shift=True,
    )
    assert dm.input_shape == (3, 32, 32) and dm.num_channels == 3
    assert (dm.mean, dm.std) == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    images, targets = next(iter(dm.train_dataloader()))
    assert images.shape == (32, 3, 32, 32) and images.dtype == torch.float32
    assert targets.shape == (32,)
    assert len(dm.train) == 1000 and len(dm.val) == 200 and len(dm.test) == 597
    for loader in (dm.val_dataloader(), *dm.test_dataloader()):
        assert loader.dataset.tensors[0].shape[1:] == (3, 32, 32)
    # The class attributes (and a default instance) keep the 8x8 grey images.
    assert DigitsDataModule.input_shape == (1, 8, 8) and _setup().input_shape == (1, 8, 8)


def test_imagenet_input_normalises_with_imagenet_statistics() -> None:
    dm = _setup(imagenet_input=32, train_size=1000, val_size=200, eval_ood=True)
    raw = torch.from_numpy(load_digits().images / 16.0).float().unsqueeze(1)
    test = raw[torch.from_numpy(dm.split_indices["test"])]
    torch.testing.assert_close(dm.test.tensors[0], _as_imagenet(test, 32))
    # A blank (0) pixel is -mean/std per channel: the top-left corner of every test digit.
    assert (test[:, 0, 0, 0] == 0).all()
    corner = dm.test.tensors[0][:, :, 0, 0]
    expected = torch.tensor([-0.485 / 0.229, -0.456 / 0.224, -0.406 / 0.225])
    torch.testing.assert_close(corner, expected.expand_as(corner))
    # Full ink (16 of 16) at most maps to (1 - mean) / std.
    assert dm.test.tensors[0][:, 0].max() <= (1 - 0.485) / 0.229 + 1e-5
    # The OOD images are the 8x8 permuted test digits, then resized.
    grey = _setup(train_size=1000, val_size=200, eval_ood=True)
    permuted = grey.ood.tensors[0] * grey.std[0] + grey.mean[0]
    torch.testing.assert_close(dm.ood.tensors[0], _as_imagenet(permuted, 32), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("value", [0, -32, 2.5, "32", True])
def test_a_bad_imagenet_input_names_the_value_and_what_is_valid(value) -> None:
    with pytest.raises(
        ValueError,
        match=rf"imagenet_input must be an integer >= 1, got "
        rf"{value!r}\..*None serves the 8x8 grey images",
    ):
        DigitsDataModule(imagenet_input=value)
