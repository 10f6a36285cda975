"""CIFAR-C and ImageNet-C sets read the requested severity; TorchUncertainty's ImageNet-C path
raises a TypeError; bad input."""

import numpy as np
import pytest
import torch
from torch_uncertainty.datamodules.classification import ImageNetDataModule

from fixtures.benchmark_files import (
    class_intensity,
    write_cifar_c,
    write_imagenet_c,
    write_imagenet_val,
)
from signorm_lab.datamodules.corruptions import (
    BENCHMARK_CORRUPTIONS,
    CIFAR10CSeverity,
    CIFAR100CSeverity,
    ImageNetCSeverity,
)

LABELS = [0, 1, 2, 3]
WRONG = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4}  # severity s: the first s-1 images show the next class


def test_the_15_benchmark_corruptions_exclude_the_4_held_out_ones():
    assert len(BENCHMARK_CORRUPTIONS) == len(set(BENCHMARK_CORRUPTIONS)) == 15
    held_out = set(CIFAR10CSeverity.cifarc_subsets) - set(BENCHMARK_CORRUPTIONS)
    assert held_out == {"speckle_noise", "gaussian_blur", "spatter", "saturate"}


@pytest.mark.parametrize(
    ("dataset_class", "folder", "num_classes"),
    [(CIFAR10CSeverity, "CIFAR-10-C", 10), (CIFAR100CSeverity, "CIFAR-100-C", 100)],
)
def test_cifar_c_returns_the_block_of_the_requested_severity(
    tmp_path, dataset_class, folder, num_classes
):
    write_cifar_c(tmp_path, ["fog"], LABELS, WRONG, num_classes=num_classes, base_folder=folder)
    raw = np.load(tmp_path / folder / "fog.npy")
    for severity in range(1, 6):
        dataset = dataset_class(tmp_path, "fog", severity)
        assert len(dataset) == len(LABELS)
        images = np.stack([dataset[i][0] for i in range(len(dataset))])
        np.testing.assert_array_equal(images, raw[(severity - 1) * 4 : severity * 4])
        shown = [(c + 1) % num_classes if i < WRONG[severity] else c for i, c in enumerate(LABELS)]
        assert [int(img[0, 0, 0]) for img in images] == [
            class_intensity(c, num_classes) for c in shown
        ]
        assert [dataset[i][1] for i in range(len(dataset))] == LABELS


def test_imagenet_c_reads_the_severity_folder(tmp_path):
    wnids = ["n01440764", "n01443537"]
    write_imagenet_c(tmp_path, ["fog"], wnids, {3: 2}, per_class=2)
    for severity, expected_levels in ((1, [0, 0, 1, 1]), (3, [1, 1, 1, 1])):
        dataset = ImageNetCSeverity(tmp_path, "fog", severity)
        assert dataset.classes == wnids and dataset.targets == [0, 0, 1, 1]
        levels = [np.asarray(dataset[i][0])[0, 0, 0] for i in range(len(dataset))]
        assert levels == [class_intensity(c, 2) for c in expected_levels]


def test_torch_uncertainty_imagenet_shift_raises_type_error_where_ours_loads(tmp_path):
    """TorchUncertainty 0.13: ``ImageNetC(root, ..., shift_severity=s)`` in ``setup``."""
    wnids = ["n01440764", "n01443537"]
    write_imagenet_val(tmp_path, wnids)
    write_imagenet_c(tmp_path, ["fog"], wnids, {})
    datamodule = ImageNetDataModule(tmp_path, 2, eval_shift=True, shift_severity=2, num_workers=0)
    with pytest.raises(TypeError, match="positional argument"):
        datamodule.setup("test")
    assert len(ImageNetCSeverity(tmp_path, "fog", 2)) == 4


def test_bad_input_names_the_value(tmp_path):
    write_cifar_c(tmp_path, ["fog"], LABELS, {})
    with pytest.raises(ValueError, match=r"corruptions \['fgo'\]; valid names: \['brightness'"):
        CIFAR10CSeverity(tmp_path, "fgo", 1)
    for severity in (0, 6, True):
        with pytest.raises(ValueError, match=rf"integers in 1\.\.5, got \[{severity}\]"):
            CIFAR10CSeverity(tmp_path, "fog", severity)
    with pytest.raises(
        FileNotFoundError,
        match=r"CIFAR-10-C not found in .*need snow\.npy and labels\.npy.*download=True",
    ):
        CIFAR10CSeverity(tmp_path, "snow", 1)
    with pytest.raises(FileNotFoundError, match=r"CIFAR-100-C not found"):
        CIFAR100CSeverity(tmp_path, "fog", 1)
    with pytest.raises(
        FileNotFoundError, match=r"ImageNet-C not found: no folder .*imagenet-c/fog/4"
    ):
        ImageNetCSeverity(tmp_path, "fog", 4)
    with pytest.raises(ValueError, match=r"integers in 1\.\.5, got \[7\]"):
        ImageNetCSeverity(tmp_path, "fog", 7)
    folder = tmp_path / "CIFAR-10-C"
    np.save(folder / "labels.npy", np.zeros(7, dtype=np.uint8))  # not 5 blocks
    with pytest.raises(ValueError, match="a multiple of 5"):
        CIFAR10CSeverity(tmp_path, "fog", 1)


def test_cifar_c_tensor_pipeline(tmp_path):
    """With TorchUncertainty's CIFAR test transform the samples are normalized tensors."""
    from torch_uncertainty.datamodules import CIFAR10DataModule

    write_cifar_c(tmp_path, ["fog"], LABELS, {})
    transform = CIFAR10DataModule(tmp_path, 4).test_transform
    image, label = CIFAR10CSeverity(tmp_path, "fog", 1, transform=transform)[2]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32 and label == 2
    expected = (class_intensity(2, 10) / 255 - torch.tensor(CIFAR10DataModule.mean)) / torch.tensor(
        CIFAR10DataModule.std
    )
    torch.testing.assert_close(image[:, 0, 0], expected)


def test_a_truncated_or_non_image_corruption_file_is_named(tmp_path):
    """A cut-off download and a corruption set of floats (which may hold NaN) are refused
    with the file's name, not accepted or failed on inside numpy."""
    write_cifar_c(tmp_path, ["fog", "snow"], LABELS, {})
    folder = tmp_path / "CIFAR-10-C"
    (folder / "fog.npy").write_bytes((folder / "fog.npy").read_bytes()[:500])
    with pytest.raises(
        ValueError,
        match=r"'.*CIFAR-10-C/fog\.npy' could not be read "
        r"\(.*\): the file is truncated or corrupt",
    ):
        CIFAR10CSeverity(tmp_path, "fog", 1)
    floats = np.load(folder / "snow.npy").astype(np.float32)
    floats[0, 0, 0, 0] = np.nan
    np.save(folder / "snow.npy", floats)
    with pytest.raises(
        ValueError,
        match=r"snow\.npy holds float32 of shape \(20, 32, 32, 3\) "
        r".*expected uint8 images",
    ):
        CIFAR10CSeverity(tmp_path, "snow", 1)
