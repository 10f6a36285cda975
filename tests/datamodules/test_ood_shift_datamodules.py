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
from torch_uncertainty_signorm.datamodules import (
    CIFAR10OODShiftDataModule,
    CIFAR100OODShiftDataModule,
    ImageNetOODShiftDataModule,
)
from torch_uncertainty_signorm.evaluation import EvalSet

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
    with pytest.raises(FileNotFoundError, match=r"CIFAR-10-C not found in .*download=True"):
        datamodule.setup_eval_sets()
