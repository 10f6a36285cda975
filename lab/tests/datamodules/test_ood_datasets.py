"""The OpenOOD v1.5 near/far splits and the OOD set registry on local files; bad input."""

import pytest
import torch

from fixtures.benchmark_files import (
    write_dtd,
    write_image_folder,
    write_inaturalist,
    write_mnist_test,
    write_tiny_imagenet_val,
)
from signorm_lab.datamodules.ood_datasets import (
    OOD_DATASETS,
    OPENOOD_SPLITS,
    OpenOODImageFolder,
    TinyImageNetVal,
    build_ood_dataset,
    check_ood_groups,
)


def test_splits_are_openood_v1_5():
    assert OPENOOD_SPLITS["CIFAR10"] == {
        "near": ("CIFAR100", "TinyImageNet"),
        "far": ("MNIST", "SVHN", "Textures", "Places365"),
    }
    assert OPENOOD_SPLITS["CIFAR100"]["near"] == ("CIFAR10", "TinyImageNet")
    assert OPENOOD_SPLITS["CIFAR100"]["far"] == OPENOOD_SPLITS["CIFAR10"]["far"]
    assert OPENOOD_SPLITS["ImageNet"] == {
        "near": ("SSB-hard", "NINCO"),
        "far": ("iNaturalist", "Textures", "OpenImage-O"),
    }
    every_name = {n for split in OPENOOD_SPLITS.values() for names in split.values() for n in names}
    assert every_name == set(OOD_DATASETS)


def test_local_sets_load_with_their_real_layouts(tmp_path):
    write_tiny_imagenet_val(tmp_path, [10, 20, 30])
    write_mnist_test(tmp_path, [40, 50])
    write_dtd(tmp_path, [1, 2, 3, 4, 5, 6, 7])
    write_inaturalist(tmp_path, [60, 70])
    write_image_folder(tmp_path / "ssb_hard", [80, 90, 100])
    write_image_folder(tmp_path / "ninco", [110])
    write_image_folder(tmp_path / "openimage-o" / "ood", [120, 130], classes=1)
    expected = {  # name: (size, grey level of the first image)
        "TinyImageNet": (3, 10),
        "MNIST": (2, 40),
        "Textures": (7, 1),
        "iNaturalist": (2, 60),
        "SSB-hard": (3, 80),
        "NINCO": (1, 110),
        "OpenImage-O": (2, 120),
    }
    for name, (size, level) in expected.items():
        dataset = build_ood_dataset(
            name, tmp_path, transform=lambda image: torch.tensor(image.getpixel((0, 0)))
        )
        assert len(dataset) == size, name
        first = dataset[0][0]
        assert int(first.flatten()[0]) == pytest.approx(level, abs=2), name  # JPEG for TinyImageNet


def test_textures_is_all_three_dtd_splits(tmp_path):
    write_dtd(tmp_path, list(range(10, 100, 10)))  # 9 images over train/val/test
    levels = sorted(
        int(image.getpixel((0, 0))[0]) for image, _ in build_ood_dataset("Textures", tmp_path)
    )
    assert levels == list(range(10, 100, 10))


def test_bad_names_and_missing_folders(tmp_path):
    with pytest.raises(
        ValueError, match=r"Unknown OOD dataset 'Texture'; valid names: \['CIFAR10'"
    ):
        build_ood_dataset("Texture", tmp_path)
    with pytest.raises(ValueError, match=r"Unknown OOD groups \['mid'\]"):
        check_ood_groups({"near": ["NINCO"], "mid": ["SVHN"]})
    with pytest.raises(ValueError, match=r"Unknown OOD datasets \['svhn'\]; valid names"):
        check_ood_groups({"far": ["svhn"]})
    with pytest.raises(ValueError, match="No OOD set given"):
        check_ood_groups({"near": [], "far": []})
    with pytest.raises(
        ValueError, match=r"Unknown OpenOOD folder 'ssb'; valid: \['ninco', 'ssb_hard'\]"
    ):
        OpenOODImageFolder(tmp_path, "ssb")
    with pytest.raises(FileNotFoundError, match=r"ssb_hard not found in .*download=True"):
        build_ood_dataset("SSB-hard", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"TinyImageNet not found in .*download=True"):
        TinyImageNetVal(tmp_path)
    with pytest.raises(RuntimeError, match="Dataset not found"):  # torchvision's own message
        build_ood_dataset("MNIST", tmp_path)
