"""Quickstart datamodule on scikit-learn's bundled ``digits`` images.

The UCI optical-recognition ``digits`` set ships inside scikit-learn
(:func:`sklearn.datasets.load_digits`): 1797 grayscale 8x8 images of the digits
0-9 (about 180 per class), pixel values in ``0..16``. Nothing is downloaded, so
this datamodule gives a real-data, CPU-sized end-to-end run of a TorchUncertainty
:class:`~torch_uncertainty.routines.ClassificationRoutine`.

Splits:
    The 1797 images are split once, stratified by class and deterministic in
    ``seed``: ``test_split`` of all images is the test set, then ``val_split`` of
    the remaining images is the validation set and the rest is the training set.
    With the defaults (``test_split=0.2``, ``val_split=0.2``) this gives
    train/val/test = 1149/288/360 images. The three splits are disjoint, cover the
    dataset and contain every class.

Preprocessing:
    Images are ``float32`` tensors of shape ``(1, 8, 8)``: pixel values are
    divided by 16 to lie in ``[0, 1]``, then standardised with the scalar mean and
    standard deviation of all training-split pixels (stored as :attr:`mean` and
    :attr:`std` after :meth:`setup`), so the training split has mean 0 and std 1.
    The same constants are applied to every split. Targets are ``int64``. There is
    no data augmentation.

Out-of-distribution set (``eval_ood=True``):
    Pixel-permuted test images: the 64 pixels of each test image are shuffled by
    an independent random permutation drawn from ``seed``. The OOD set has
    exactly as many images as the test set. This is a classic synthetic
    far-OOD control: every OOD image keeps the exact pixel-value multiset (so the
    same total ink, intensity histogram and global statistics) as a real test
    digit, hence a detector cannot separate the two sets by brightness or
    contrast; it has to rely on the spatial structure that makes a digit a digit,
    which the permutation destroys. We do not use flipped or rotated digits
    because several digits (0, 1, 8) are nearly symmetric, so a flipped "0" is
    still an in-distribution "0"; and we do not hold out digit classes because
    that would change :attr:`num_classes`. The OOD images carry the labels of
    their source images only to keep the ``(inputs, targets)`` batch format;
    :class:`~torch_uncertainty.routines.ClassificationRoutine` ignores them.

Distribution-shift set (``eval_shift=True``):
    The test images (in ``[0, 1]`` scale) with additive Gaussian noise of standard
    deviation ``0.1 * shift_severity`` (``shift_severity`` in ``1..5``, so 0.1 to
    0.5, i.e. 1.6 to 8 of the original 17 grey levels), clipped back to
    ``[0, 1]`` and then standardised like the other splits, drawn from ``seed``.
    Labels are the true test labels, so shift accuracy and calibration are
    meaningful. This mirrors the ``gaussian_noise`` corruption of CIFAR-10-C and
    MNIST-C.

As in TorchUncertainty's CIFAR and MNIST datamodules, :meth:`test_dataloader`
returns ``[test]``, then the OOD loader if ``eval_ood`` and then the shift loader
if ``eval_shift``, matching the ``dataloader_idx`` convention of
:class:`~torch_uncertainty.routines.ClassificationRoutine` (0: in-distribution,
1: OOD, then shift).
"""

from pathlib import Path
from typing import Literal

import numpy as np
import torch
from numpy.typing import ArrayLike
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset
from torch_uncertainty.datamodules import TUDataModule

from ..checks import check_fraction, check_integer
from ..evaluation.eval_sets import check_severities

__all__ = ["DigitsDataModule"]

_NUM_IMAGES = 1797
_MAX_PIXEL_VALUE = 16.0
_NOISE_STD_PER_SEVERITY = 0.1
_OOD_STREAM, _SHIFT_STREAM = 1, 2
_MAX_SEED = 2**32 - 1


class DigitsDataModule(TUDataModule):
    """DataModule for scikit-learn's 8x8 ``digits``; see the module docstring for the design."""

    num_classes = 10
    num_channels = 1
    input_shape = (1, 8, 8)
    training_task = "classification"
    shift_severity = 1

    def __init__(
        self,
        root: str | Path = "./data",
        batch_size: int = 64,
        eval_batch_size: int | None = None,
        eval_ood: bool = False,
        eval_shift: bool = False,
        shift_severity: int = 1,
        num_tta: int = 1,
        val_split: float = 0.2,
        test_split: float = 0.2,
        seed: int = 0,
        postprocess_set: Literal["val", "test"] = "val",
        num_workers: int = 0,
        pin_memory: bool = False,
        persistent_workers: bool = False,
    ) -> None:
        """DataModule for scikit-learn's ``digits``.

        Args:
            root: Root directory of the datasets. Unused (the data ships with
                scikit-learn); kept for TorchUncertainty API compatibility.
                Defaults to ``"./data"``.
            batch_size: Number of samples per batch during training. Defaults to ``64``.
            eval_batch_size: Number of samples per batch during evaluation (val
                and test). Set to :attr:`batch_size` if ``None``. Defaults to ``None``.
            eval_ood: Whether to evaluate on the pixel-permuted OOD set. Defaults
                to ``False``.
            eval_shift: Whether to evaluate on the Gaussian-noise shifted set.
                Defaults to ``False``.
            shift_severity: Severity in ``1..5`` of the shift; the noise std is
                ``0.1 * shift_severity`` in ``[0, 1]`` pixel units. Defaults to ``1``.
            num_tta: Number of test-time augmentations. There is no augmentation,
                so the ``num_tta`` copies of an image are identical. Defaults to ``1``.
            val_split: Share in ``(0, 1)`` of the non-test images used for
                validation. Defaults to ``0.2``.
            test_split: Share in ``(0, 1)`` of all images used for testing.
                Defaults to ``0.2``.
            seed: Seed in ``[0, 2**32 - 1]`` of the stratified splits, the OOD
                permutations and the shift noise. Defaults to ``0``.
            postprocess_set: Split used to fit post-processing methods. Defaults
                to ``"val"``.
            num_workers: Number of data-loading workers. Defaults to ``0``.
            pin_memory: Whether to pin memory. Defaults to ``False``.
            persistent_workers: Whether to keep workers alive; needs
                ``num_workers > 0``. Defaults to ``False``.

        Raises:
            ValueError: If an argument is outside its valid range, or if the
                splits would leave fewer images than classes in a split.
        """
        check_integer("batch_size", batch_size, low=1)
        if eval_batch_size is not None:
            check_integer("eval_batch_size", eval_batch_size, low=1)
        check_integer("num_tta", num_tta, low=1)
        check_severities([shift_severity], "shift_severity")
        check_integer("num_workers", num_workers, low=0)
        check_integer("seed", seed, low=0, high=_MAX_SEED)
        check_fraction("val_split", val_split)
        check_fraction("test_split", test_split)
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers=True needs num_workers > 0. Got num_workers=0.")
        if postprocess_set not in ("val", "test"):
            raise ValueError(f"postprocess_set should be 'val' or 'test'. Got {postprocess_set!r}.")
        super().__init__(
            root=root,
            batch_size=batch_size,
            eval_batch_size=eval_batch_size,
            val_split=val_split,
            num_workers=num_workers,
            pin_memory=pin_memory,
            persistent_workers=persistent_workers,
            num_tta=num_tta,
            postprocess_set=postprocess_set,
        )
        self.eval_ood = eval_ood
        self.eval_shift = eval_shift
        self.shift_severity = shift_severity
        self.test_split = test_split
        self.seed = seed
        self._check_split_sizes()
        self._images: Tensor | None = None
        self._targets: Tensor | None = None
        self.split_indices: dict[str, np.ndarray] = {}
        self.mean: tuple[float] | None = None
        self.std: tuple[float] | None = None

    def _check_split_sizes(self) -> None:
        """Raise if a stratified split would hold fewer images than classes."""
        num_test = int(np.ceil(self.test_split * _NUM_IMAGES))
        num_val = int(np.ceil(self.val_split * (_NUM_IMAGES - num_test)))
        sizes = {"train": _NUM_IMAGES - num_test - num_val, "val": num_val, "test": num_test}
        for name, size in sizes.items():
            if size < self.num_classes:
                raise ValueError(
                    f"val_split={self.val_split} and test_split={self.test_split} leave "
                    f"{size} image(s) in the {name} split; every split needs at least "
                    f"{self.num_classes} (one per class)."
                )

    def prepare_data(self) -> None:
        """Do nothing: the dataset ships with scikit-learn."""

    def _load(self) -> None:
        """Load the images once, split them and compute the training statistics."""
        if self._images is not None:
            return
        digits = load_digits()
        images = torch.from_numpy(digits.images / _MAX_PIXEL_VALUE).float().unsqueeze(1)
        targets = torch.from_numpy(digits.target).long()
        all_idx = np.arange(len(targets))
        labels = digits.target
        rest_idx, test_idx = train_test_split(
            all_idx, test_size=self.test_split, stratify=labels, random_state=self.seed
        )
        train_idx, val_idx = train_test_split(
            rest_idx, test_size=self.val_split, stratify=labels[rest_idx], random_state=self.seed
        )
        self.split_indices = {"train": train_idx, "val": val_idx, "test": test_idx}
        train_pixels = images[torch.from_numpy(train_idx)]
        self.mean = (train_pixels.mean().item(),)
        self.std = (train_pixels.std(correction=0).item(),)
        self._images, self._targets = images, targets

    def _dataset(self, images: Tensor, idx: np.ndarray) -> TensorDataset:
        """Standardise ``[0, 1]`` images and pair them with the targets at ``idx``."""
        normalised = (images - self.mean[0]) / self.std[0]
        return TensorDataset(normalised, self._targets[torch.from_numpy(idx)])

    def _raw(self, split: str) -> Tensor:
        """Return the ``[0, 1]``-scaled images of ``split``."""
        return self._images[torch.from_numpy(self.split_indices[split])]

    def setup(self, stage: Literal["fit", "validate", "test"] | None = None) -> None:
        """Build the datasets of the requested stage.

        Args:
            stage: ``"fit"`` or ``"validate"`` (train and val), ``"test"`` (test,
                and OOD / shift if enabled) or ``None`` (all). Defaults to ``None``.

        Raises:
            ValueError: If ``stage`` is not one of the above.
        """
        if stage not in ("fit", "validate", "test", None):
            raise ValueError(
                f"Stage {stage!r} is not supported; use 'fit', 'validate', 'test' or None."
            )
        self._load()
        if stage in ("fit", "validate", None):
            self.train = self._dataset(self._raw("train"), self.split_indices["train"])
            self.val = self._dataset(self._raw("val"), self.split_indices["val"])
        if stage in ("test", None):
            test_idx = self.split_indices["test"]
            test_images = self._raw("test")
            self.test = self._dataset(test_images, test_idx)
            if self.eval_ood:
                self.ood = self._dataset(self._permute_pixels(test_images), test_idx)
            if self.eval_shift:
                self.shift = self._dataset(self._add_noise(test_images), test_idx)

    def _permute_pixels(self, images: Tensor) -> Tensor:
        """Shuffle the pixels of each image with its own seeded permutation."""
        rng = np.random.default_rng([self.seed, _OOD_STREAM])
        flat = images.flatten(1)
        perms = torch.from_numpy(np.argsort(rng.random(tuple(flat.shape)), axis=1))
        return flat.gather(1, perms).view_as(images)

    def _add_noise(self, images: Tensor) -> Tensor:
        """Add seeded Gaussian noise of std ``0.1 * shift_severity`` and clip to ``[0, 1]``."""
        rng = np.random.default_rng([self.seed, _SHIFT_STREAM, self.shift_severity])
        noise = torch.from_numpy(rng.standard_normal(tuple(images.shape))).float()
        return (images + _NOISE_STD_PER_SEVERITY * self.shift_severity * noise).clamp(0.0, 1.0)

    def test_dataloader(self) -> list[DataLoader]:
        """Get the test dataloaders.

        Returns:
            list[DataLoader]: The in-distribution test loader, then the OOD loader
            if :attr:`eval_ood`, then the shift loader if :attr:`eval_shift`.
        """
        loaders = [self._data_loader(self.get_test_set(), training=False, shuffle=False)]
        if self.eval_ood:
            loaders.append(self._data_loader(self.get_ood_set(), training=False, shuffle=False))
        if self.eval_shift:
            loaders.append(self._data_loader(self.get_shift_set(), training=False, shuffle=False))
        return loaders

    def _get_train_data(self) -> ArrayLike:
        """Return the training images, used by :meth:`make_cross_val_splits`."""
        return self.train.tensors[0].numpy()

    def _get_train_targets(self) -> ArrayLike:
        """Return the training targets, used by :meth:`make_cross_val_splits`."""
        return self.train.tensors[1].numpy()

