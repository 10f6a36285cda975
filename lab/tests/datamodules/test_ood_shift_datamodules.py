"""The OOD/shift datamodules: loader order and labels, requested severities, bad input."""

import pytest
import torch
from torchvision.transforms import v2

from fixtures.benchmark_files import (
    class_intensity,
    write_cifar_c,
    write_dtd,
    write_image_folder,
    write_imagenet_c,
    write_imagenet_val,
    write_inaturalist,
    write_mnist_test,
    write_tiny_imagenet_val,
)
from signorm_lab.datamodules import (
    CIFAR10OODShiftDataModule,
    CIFAR100OODShiftDataModule,
    ImageNetOODShiftDataModule,
)
from signorm_lab.evaluation import EvalSet

LABELS = [0, 1, 2, 3]
WRONG = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4}
TO_UNIT = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


def _cifar_module(root, **kwargs):
    return CIFAR10OODShiftDataModule(
        root,
        batch_size=4,
        num_workers=0,
        persistent_workers=False,
        pin_memory=False,
        test_transform=TO_UNIT,
        **kwargs,
    )


def test_cifar10_shift_loaders_hold_the_requested_severities(tmp_path):
    """TorchUncertainty 0.13's CIFAR10DataModule builds CIFAR10C without shift_severity (always
    severity 1); here each loader holds its own severity's block."""
    write_cifar_c(tmp_path, ["fog", "snow"], LABELS, WRONG)
    datamodule = _cifar_module(
        tmp_path, eval_shift_severities=True, shift_severities=[2, 5], corruptions=["fog", "snow"]
    )
    datamodule.setup_eval_sets()
    assert datamodule.eval_sets == [
        EvalSet("id", "CIFAR10"),
        EvalSet("shift", "fog", severity=2),
        EvalSet("shift", "snow", severity=2),
        EvalSet("shift", "fog", severity=5),
        EvalSet("shift", "snow", severity=5),
    ]
    for spec, loader in zip(datamodule.eval_sets[1:], datamodule.eval_dataloaders(), strict=True):
        images, targets = next(iter(loader))
        shown = [(c + 1) % 10 if i < WRONG[spec.severity] else c for i, c in enumerate(LABELS)]
        expected = torch.tensor([class_intensity(c, 10) / 255 for c in shown])
        torch.testing.assert_close(images.mean(dim=(1, 2, 3)), expected)
        assert targets.tolist() == LABELS


def test_ood_loaders_are_rgb_at_the_cifar_size_in_near_then_far_order(tmp_path):
    write_tiny_imagenet_val(tmp_path, [10, 20])
    write_mnist_test(tmp_path, [30, 40, 50])
    write_dtd(tmp_path, [60, 70, 80])
    datamodule = _cifar_module(
        tmp_path,
        eval_near_far_ood=True,
        ood_groups={"far": ["MNIST", "Textures"], "near": ["TinyImageNet"]},
    )
    datamodule.setup_eval_sets()
    assert [(s.kind, s.group, s.name) for s in datamodule.eval_sets] == [
        ("id", None, "CIFAR10"),
        ("ood", "far", "MNIST"),
        ("ood", "far", "Textures"),
        ("ood", "near", "TinyImageNet"),
    ]
    sizes = [len(loader.dataset) for loader in datamodule.eval_dataloaders()]
    assert sizes == [3, 3, 2]
    mnist_images, _ = next(iter(datamodule.eval_dataloaders()[0]))
    assert mnist_images.shape == (3, 3, 32, 32)  # grey 28x28 -> RGB 32x32
    torch.testing.assert_close(mnist_images.mean(dim=(1, 2, 3)), torch.tensor([30, 40, 50]) / 255)


def test_default_groups_are_the_openood_split_and_tta_repeats_images(tmp_path):
    datamodule = CIFAR100OODShiftDataModule(tmp_path, 4, eval_near_far_ood=True)
    assert datamodule.ood_groups["near"] == ("CIFAR10", "TinyImageNet")
    write_cifar_c(tmp_path, ["fog"], LABELS, WRONG, num_classes=100, base_folder="CIFAR-100-C")
    datamodule = CIFAR100OODShiftDataModule(
        tmp_path,
        4,
        eval_shift_severities=True,
        corruptions=["fog"],
        num_tta=2,
        num_workers=0,
        persistent_workers=False,
        pin_memory=False,
    )
    datamodule.setup_eval_sets()
    loaders = datamodule.eval_dataloaders()
    assert [s.severity for s in datamodule.eval_sets[1:]] == [1, 2, 3, 4, 5]
    assert len(loaders[0].dataset) == 2 * len(LABELS)


def test_imagenet_module_sets_up_every_loader_without_type_error(tmp_path):
    """TorchUncertainty 0.13's ImageNetDataModule raises a TypeError with eval_shift."""
    wnids = ["n01440764", "n01443537"]
    write_imagenet_val(tmp_path, wnids)
    write_imagenet_c(tmp_path, ["fog"], wnids, {})
    write_image_folder(tmp_path / "ssb_hard", [1])
    write_image_folder(tmp_path / "ninco", [2])
    write_inaturalist(tmp_path, [3])
    write_dtd(tmp_path, [4])
    write_image_folder(tmp_path / "openimage-o" / "ood", [5], classes=1)
    datamodule = ImageNetOODShiftDataModule(
        tmp_path,
        2,
        eval_near_far_ood=True,
        eval_shift_severities=True,
        corruptions=["fog"],
        shift_severities=[4],
        num_workers=0,
        persistent_workers=False,
        pin_memory=False,
    )
    datamodule.prepare_data()  # everything is local: nothing to download
    datamodule.setup("test")
    loaders = datamodule.test_dataloader()
    assert [s.name for s in datamodule.eval_sets] == [
        "ImageNet",
        "SSB-hard",
        "NINCO",
        "iNaturalist",
        "Textures",
        "OpenImage-O",
        "fog",
    ]
    assert len(loaders) == 7 and len(loaders[0].dataset) == 4 and len(loaders[-1].dataset) == 4
    images, _ = next(iter(loaders[1]))
    assert images.shape[-2:] == (224, 224)  # TorchUncertainty's ImageNet test transform


def test_bad_arguments_name_the_value(tmp_path):
    with pytest.raises(ValueError, match=r"`eval_near_far_ood`; `eval_ood=True`"):
        CIFAR10OODShiftDataModule(tmp_path, 4, eval_ood=True)
    with pytest.raises(ValueError, match=r"`eval_shift_severities`; `eval_shift=True`"):
        ImageNetOODShiftDataModule(tmp_path, 4, eval_shift=True)
    with pytest.raises(ValueError, match=r"integers in 1\.\.5, got \[0, 3\]"):
        CIFAR10OODShiftDataModule(tmp_path, 4, shift_severities=[0, 3])
    with pytest.raises(ValueError, match=r"Unknown, missing or repeated corruptions \['fogg'\]"):
        CIFAR10OODShiftDataModule(tmp_path, 4, corruptions=["fog", "fogg"])
    with pytest.raises(ValueError, match=r"Unknown OOD datasets \['Places'\]"):
        CIFAR10OODShiftDataModule(tmp_path, 4, ood_groups={"far": ["Places"]})
    with pytest.raises(ValueError, match=r"Unknown OOD groups \['middle'\]"):
        CIFAR10OODShiftDataModule(tmp_path, 4, ood_groups={"middle": ["SVHN"]})
    datamodule = _cifar_module(tmp_path, eval_shift_severities=True, corruptions=["fog"])
    with pytest.raises(FileNotFoundError, match=r"missing under root.*\n.*CIFAR-10-C.*\n.*fog"):
        datamodule.setup_eval_sets()


def _lines_naming(message: str, *names: str) -> dict[str, str]:
    return {name: next(line for line in message.splitlines() if name in line) for name in names}


def test_offline_check_lists_every_missing_set_with_path_and_layout(tmp_path):
    """download=False: every set is checked before any work, and one error lists each missing
    one (the present MNIST is not listed), with its expected path and on-disk layout."""
    write_mnist_test(tmp_path, [40, 50])
    datamodule = _cifar_module(
        tmp_path,
        eval_near_far_ood=True,
        eval_shift_severities=True,
        corruptions=["fog", "snow"],
        download=False,
    )
    with pytest.raises(FileNotFoundError) as error:
        datamodule.prepare_data()
    message = str(error.value)
    lines = _lines_naming(
        message,
        "CIFAR10 (in-distribution)",
        "CIFAR100",
        "TinyImageNet",
        "SVHN",
        "Textures",
        "Places365",
        "CIFAR-10-C",
        "fog",
        "snow",
    )
    assert str(tmp_path / "tiny-imagenet-200" / "val") in lines["TinyImageNet"]
    assert "val_annotations.txt" in lines["TinyImageNet"]
    assert str(tmp_path / "test_32x32.mat") in lines["SVHN"]
    assert "images/<class>/<image>.jpg" in lines["Textures"]
    assert "labels.npy" in lines["CIFAR-10-C"]
    assert str(tmp_path / "CIFAR-10-C" / "fog.npy") in lines["fog"]
    assert "MNIST" not in message and "gaussian_noise" not in message
    assert "download=true" in message
    assert not any(tmp_path.glob("*.tar.gz")) and not any(tmp_path.glob("*.zip"))


def test_failed_download_stops_and_reports_every_set_in_one_error(tmp_path, monkeypatch):
    """Offline with download=True: the first failure stops the downloads; one error (no chained
    urllib traceback) gives the cause and lists every set still missing."""
    from urllib.error import URLError

    from torch_uncertainty.datamodules import CIFAR10DataModule

    from signorm_lab.datamodules.ood_shift import OODShiftMixin

    attempts = []

    def build(self, spec, download):
        if download:
            attempts.append(spec.name)
            raise URLError("[Errno -2] Name or service not known")
        return original(self, spec, download)

    original = OODShiftMixin._build
    monkeypatch.setattr(OODShiftMixin, "_build", build)
    # TorchUncertainty's own download of CIFAR-10 (its prepare_data) is not under test here.
    monkeypatch.setattr(CIFAR10DataModule, "prepare_data", lambda self: None)
    datamodule = _cifar_module(
        tmp_path,
        eval_near_far_ood=True,
        ood_groups={"near": ["TinyImageNet"], "far": ["SVHN", "MNIST"]},
    )
    with pytest.raises(FileNotFoundError) as error:
        datamodule.prepare_data()
    assert attempts == ["TinyImageNet"]
    assert error.value.__cause__ is None and error.value.__suppress_context__
    message = str(error.value)
    assert "first failure (TinyImageNet: URLError:" in message and "offline" in message
    lines = _lines_naming(message, "TinyImageNet (near OOD)", "SVHN (far OOD)", "MNIST (far OOD)")
    assert str(tmp_path / "MNIST" / "raw") in lines["MNIST (far OOD)"]
