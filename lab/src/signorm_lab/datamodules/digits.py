r"""Quickstart datamodule on scikit-learn's bundled ``digits`` images.

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

    For a CNN pretrained on ImageNet, ``imagenet_input=S`` serves instead RGB images of
    shape ``(3, S, S)``: each ``[0, 1]`` image (noise, permutation and corruptions
    included) is resized to ``S x S`` (bilinear, ``align_corners=False``), its grey
    channel repeated three times, and each channel normalised with ImageNet's mean
    ``(0.485, 0.456, 0.406)`` and standard deviation ``(0.229, 0.224, 0.225)``
    (:attr:`mean` and :attr:`std`), the input such a network was trained on. Every
    split, the OOD set and the shifted sets are served the same way: the OOD pixels
    are permuted at 8x8, then resized.

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
    still an in-distribution "0". Holding out digit classes changes
    :attr:`num_classes`, so it is an option of its own (``held_out_classes``, below,
    a near-OOD set). The OOD images carry the labels of
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

A harder, informative variant (the digits study, ``studies/results/digits_study``):
    - ``held_out_classes`` (e.g. ``(8, 9)``) removes those digits from every split;
      the remaining classes are relabelled ``0..K-1`` in increasing order and
      :attr:`num_classes` becomes ``K``. All images of the held-out digits form a
      *near*-OOD set: real digits of classes the model never saw.
    - ``train_size`` and ``val_size`` (given together) draw stratified training and
      validation sets of exactly that many in-distribution images; the test set is
      all the remaining ones (``400 / 200`` with 8 classes leaves 843 test images).
      ``val_split`` and ``test_split`` are then unused.
    - ``input_noise`` adds Gaussian noise of that standard deviation (in ``[0, 1]``
      pixel units, not clipped) to every image of every split, one fixed draw per
      image from ``seed``: a noisy-sensor task on which the models are not saturated.
    - ``eval_near_far_ood`` and ``eval_shift_severities`` add one test loader per OOD
      set (near: the held-out digits; far: the pixel-permuted test images) and per
      ``(severity, corruption)`` of :data:`CORRUPTIONS` (Gaussian noise, Gaussian
      blur, translation, severities 1-5), published in :attr:`eval_sets` for
      :class:`~signorm_lab.callbacks.OODShiftEvaluation` (as the
      ``*OODShiftDataModule``\ s do). A corruption acts on the clean test image, and
      the image's own ``input_noise`` draw is added after it, so the sensor noise
      stays what it was and only the scene changes.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from numpy.typing import ArrayLike
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset
from torch_uncertainty.datamodules import TUDataModule

from torch_uncertainty_signorm.utils.checks import (
    check_choices,
    check_fraction,
    check_integer,
    check_positive_number,
    check_stage,
)

from .. import _compat
from ..evaluation.eval_sets import SEVERITIES, EvalSet, check_eval_flags, check_severities
from ._arguments_for import arguments_for

__all__ = ["CORRUPTIONS", "IMAGENET_MEAN", "IMAGENET_STD", "DigitsDataModule"]

_NUM_IMAGES = 1797
_MAX_PIXEL_VALUE = 16.0
_NOISE_STD_PER_SEVERITY = 0.1
_OOD_STREAM, _SHIFT_STREAM, _INPUT_NOISE_STREAM, _CORRUPTION_STREAM = 1, 2, 3, 4
_MAX_SEED = 2**32 - 1
_NUM_DIGIT_CLASSES = 10
#: Images per digit in scikit-learn's ``digits`` (``np.bincount(load_digits().target)``).
_CLASS_COUNTS = (178, 182, 177, 183, 181, 182, 181, 179, 174, 180)
#: Corruptions of ``eval_shift_severities`` -> their strength at severities 1..5: the added
#: noise std (``[0, 1]`` pixel units), the blur's Gaussian sigma (pixels) and the length of
#: the translation (pixels, in a random direction per image, bilinear, zero outside).
CORRUPTIONS = {
    "gaussian_noise": (0.1, 0.2, 0.3, 0.4, 0.5),
    "gaussian_blur": (0.5, 0.75, 1.0, 1.25, 1.5),
    "translation": (0.5, 1.0, 1.5, 2.0, 2.5),
}
_BLUR_RADIUS = 3  # 7x7 kernels: 2 sigma of the strongest blur
#: ImageNet's per-channel mean and standard deviation, as ImageNet-pretrained CNNs expect.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


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
        held_out_classes: Sequence[int] = (),
        train_size: int | None = None,
        val_size: int | None = None,
        input_noise: float = 0.0,
        eval_near_far_ood: bool = False,
        eval_shift_severities: bool = False,
        shift_severities: Sequence[int] = SEVERITIES,
        corruptions: Sequence[str] = tuple(CORRUPTIONS),
        imagenet_input: int | None = None,
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
                permutations, the input noise and the shifts. Defaults to ``0``.
            postprocess_set: Split used to fit post-processing methods. Defaults
                to ``"val"``.
            num_workers: Number of data-loading workers. Defaults to ``0``.
            pin_memory: Whether to pin memory. Defaults to ``False``.
            persistent_workers: Whether to keep workers alive; needs
                ``num_workers > 0``. Defaults to ``False``.
            held_out_classes: Digits removed from every split and used as the near-OOD
                set (at most 8 of ``0..9``); the others are relabelled ``0..K-1``.
                Defaults to none.
            train_size: Number of in-distribution training images (stratified); needs
                ``val_size``, and the test set is every remaining image. Defaults to
                ``None`` (the ``val_split`` / ``test_split`` fractions).
            val_size: Number of validation images; needs ``train_size``.
            input_noise: Standard deviation (``[0, 1]`` pixel units, ``>= 0``) of the
                Gaussian noise added once to every image. Defaults to ``0``.
            eval_near_far_ood: Add the near (held-out digits, needs ``held_out_classes``)
                and far (pixel-permuted test images) OOD loaders, listed in
                :attr:`eval_sets`. Defaults to ``False``.
            eval_shift_severities: Add one loader per ``(severity, corruption)``, listed
                in :attr:`eval_sets`. Defaults to ``False``.
            shift_severities: Severities of ``eval_shift_severities``. Defaults to 1..5.
            corruptions: Corruptions of ``eval_shift_severities``, names of
                :data:`CORRUPTIONS`. Defaults to all three.
            imagenet_input: Side ``S`` (an integer ``>= 1``) of the RGB images served to an
                ImageNet-pretrained CNN: every image resized to ``S x S`` (bilinear), grey
                repeated to 3 channels and normalised with ImageNet's mean and std (see the
                module docs), e.g. ``32``. Defaults to ``None``: the ``(1, 8, 8)`` grey
                images standardised with the training pixels' statistics.

        Raises:
            ValueError: If an argument is outside its valid range, if the splits
                would leave fewer images than classes in a split, or if TorchUncertainty's
                single-set ``eval_ood`` / ``eval_shift`` is combined with the loaders of
                ``eval_near_far_ood`` / ``eval_shift_severities``.
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
        self.held_out_classes = _check_held_out(held_out_classes)
        if (train_size is None) != (val_size is None):
            raise ValueError(
                f"train_size and val_size go together (the test set is every remaining image), "
                f"got train_size={train_size!r}, val_size={val_size!r}."
            )
        if train_size is not None:
            check_integer("train_size", train_size, low=1)
            check_integer("val_size", val_size, low=1)
        if imagenet_input is not None:
            try:
                check_integer("imagenet_input", imagenet_input, low=1)
            except ValueError as error:
                raise ValueError(
                    f"{error} It is the side of the RGB images for an ImageNet-pretrained CNN "
                    f"(e.g. 32); None serves the 8x8 grey images."
                ) from None
        self.input_noise = check_positive_number("input_noise", input_noise, allow_zero=True)
        self.shift_severities = check_severities(shift_severities, "shift_severities")
        self.corruptions = check_choices("corruptions", corruptions, CORRUPTIONS)
        check_eval_flags(
            eval_near_far_ood, eval_shift_severities, eval_ood=eval_ood, eval_shift=eval_shift
        )
        if eval_near_far_ood and not self.held_out_classes:
            raise ValueError(
                "eval_near_far_ood=True needs held_out_classes (the near-OOD digits), e.g. "
                "held_out_classes=[8, 9]; got none."
            )
        super().__init__(**arguments_for(TUDataModule.__init__, locals()))
        self.eval_ood = eval_ood
        self.eval_shift = eval_shift
        self.shift_severity = shift_severity
        self.test_split = test_split
        self.seed = seed
        self.sizes = None if train_size is None else (int(train_size), int(val_size))
        self.eval_near_far_ood = eval_near_far_ood
        self.eval_shift_severities = eval_shift_severities
        self.imagenet_input = None if imagenet_input is None else int(imagenet_input)
        if self.imagenet_input is not None:
            self.num_channels = 3
            self.input_shape = (3, self.imagenet_input, self.imagenet_input)
        self.kept_classes = tuple(
            c for c in range(_NUM_DIGIT_CLASSES) if c not in self.held_out_classes
        )
        self.num_classes = len(self.kept_classes)
        self._check_split_sizes()
        self.eval_sets: list[EvalSet] = self._planned_sets()
        self._images: Tensor | None = None
        self._targets: Tensor | None = None
        self._noise: Tensor | None = None
        self.split_indices: dict[str, np.ndarray] = {}
        self.mean: tuple[float, ...] | None = None
        self.std: tuple[float, ...] | None = None

    def _planned_sets(self) -> list[EvalSet]:
        """The role of each test loader, in :meth:`test_dataloader` order."""
        sets = [EvalSet("id", "digits")]
        if self.eval_near_far_ood:
            sets += [
                EvalSet("ood", "held_out_digits", group="near"),
                EvalSet("ood", "pixel_permuted", group="far"),
            ]
        if self.eval_shift_severities:
            sets += [
                EvalSet("shift", name, severity=severity)
                for severity in self.shift_severities
                for name in self.corruptions
            ]
        return sets

    def _check_split_sizes(self) -> None:
        """Raise if a stratified split would hold fewer images than classes."""
        num_images = sum(_CLASS_COUNTS[c] for c in self.kept_classes)
        if self.sizes is not None:
            num_train, num_val = self.sizes
            sizes = {"train": num_train, "val": num_val, "test": num_images - num_train - num_val}
            if sizes["test"] < self.num_classes:
                raise ValueError(
                    f"train_size={num_train} and val_size={num_val} leave {sizes['test']} "
                    f"test image(s) of the {num_images} images of classes "
                    f"{list(self.kept_classes)}; keep train_size + val_size <= "
                    f"{num_images - self.num_classes}."
                )
        else:
            num_test = int(np.ceil(self.test_split * num_images))
            num_val = int(np.ceil(self.val_split * (num_images - num_test)))
            sizes = {"train": num_images - num_test - num_val, "val": num_val, "test": num_test}
        for name, size in sizes.items():
            if size < self.num_classes:
                setting = (
                    f"train_size={self.sizes[0]} and val_size={self.sizes[1]}"
                    if self.sizes
                    else f"val_split={self.val_split} and test_split={self.test_split}"
                )
                raise ValueError(
                    f"{setting} leave {size} image(s) in the {name} split; every split needs at "
                    f"least {self.num_classes} (one per class)."
                )

    def prepare_data(self) -> None:
        """Do nothing: the dataset ships with scikit-learn."""

    def _load(self) -> None:
        """Load the images once, split them and compute the training statistics."""
        if self._images is not None:
            return
        digits = load_digits()
        images = torch.from_numpy(digits.images / _MAX_PIXEL_VALUE).float().unsqueeze(1)
        labels = digits.target
        relabel = np.full(_NUM_DIGIT_CLASSES, -1)
        relabel[list(self.kept_classes)] = np.arange(self.num_classes)
        targets = torch.from_numpy(relabel[labels]).long()  # -1 for held-out digits
        kept = np.flatnonzero(relabel[labels] >= 0)
        if self.sizes is None:
            rest_idx, test_idx = train_test_split(
                kept, test_size=self.test_split, stratify=labels[kept], random_state=self.seed
            )
            train_idx, val_idx = train_test_split(
                rest_idx,
                test_size=self.val_split,
                stratify=labels[rest_idx],
                random_state=self.seed,
            )
        else:
            num_train, num_val = self.sizes
            train_idx, rest_idx = train_test_split(
                kept, train_size=num_train, stratify=labels[kept], random_state=self.seed
            )
            val_idx, test_idx = train_test_split(
                rest_idx, train_size=num_val, stratify=labels[rest_idx], random_state=self.seed
            )
        self.split_indices = {"train": train_idx, "val": val_idx, "test": test_idx}
        if self.held_out_classes:
            self.split_indices["held_out"] = np.flatnonzero(relabel[labels] < 0)
        rng = np.random.default_rng([self.seed, _INPUT_NOISE_STREAM])
        self._noise = (
            self.input_noise * torch.from_numpy(rng.standard_normal(tuple(images.shape))).float()
        )
        self._images, self._targets = images, targets
        if self.imagenet_input is not None:
            self.mean, self.std = IMAGENET_MEAN, IMAGENET_STD
            return
        train_pixels = self._noisy(self._raw("train"), "train")
        self.mean = (train_pixels.mean().item(),)
        self.std = (train_pixels.std(correction=0).item(),)

    def _noisy(self, images: Tensor, split: str) -> Tensor:
        """``images`` of ``split`` with each image's own input-noise draw added."""
        if self.input_noise == 0:
            return images
        return images + self._noise[torch.from_numpy(self.split_indices[split])]

    def _dataset(self, images: Tensor, idx: np.ndarray) -> TensorDataset:
        """Standardise ``[0, 1]`` images and pair them with the targets at ``idx``."""
        if self.imagenet_input is None:
            normalized = (images - self.mean[0]) / self.std[0]
        else:
            size = self.imagenet_input
            resized = nn.functional.interpolate(
                images, size=(size, size), mode="bilinear", align_corners=False
            )
            mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in (self.mean, self.std))
            normalized = (resized.expand(-1, 3, -1, -1) - mean) / std
        return TensorDataset(normalized, self._targets[torch.from_numpy(idx)])

    def _raw(self, split: str) -> Tensor:
        """Return the clean ``[0, 1]``-scaled images of ``split``."""
        return self._images[torch.from_numpy(self.split_indices[split])]

    def setup(self, stage: Literal["fit", "validate", "test"] | None = None) -> None:
        """Build the datasets of the requested stage.

        Args:
            stage: ``"fit"`` or ``"validate"`` (train and val), ``"test"`` (test,
                and OOD / shift if enabled) or ``None`` (all). Defaults to ``None``.

        Raises:
            ValueError: If ``stage`` is not one of the above.
        """
        check_stage(stage)
        self._load()
        if stage in ("fit", "validate", None):
            for split in ("train", "val"):
                setattr(
                    self,
                    split,
                    self._dataset(self._noisy(self._raw(split), split), self.split_indices[split]),
                )
        if stage in ("test", None):
            test_idx = self.split_indices["test"]
            test_images = self._noisy(self._raw("test"), "test")
            self.test = self._dataset(test_images, test_idx)
            if self.eval_ood:
                self.ood = self._dataset(self._permute_pixels(test_images), test_idx)
            if self.eval_shift:
                self.shift = self._dataset(self._add_noise(test_images), test_idx)
            self.eval_datasets = self._eval_datasets(test_images)

    def _eval_datasets(self, test_images: Tensor) -> list[TensorDataset]:
        """The datasets of :attr:`eval_sets` after the clean test set."""
        test_idx = self.split_indices["test"]
        datasets = []
        if self.eval_near_far_ood:
            held_out = self.split_indices["held_out"]
            near = self._noisy(self._raw("held_out"), "held_out")
            datasets.append(self._dataset(near, held_out))
            datasets.append(self._dataset(self._permute_pixels(test_images), test_idx))
        if self.eval_shift_severities:
            clean = self._raw("test")
            for severity in self.shift_severities:
                for name in self.corruptions:
                    corrupted = self._corrupt(clean, name, severity)
                    datasets.append(self._dataset(self._noisy(corrupted, "test"), test_idx))
        return datasets

    def _corrupt(self, images: Tensor, name: str, severity: int) -> Tensor:
        """``images`` under corruption ``name`` at ``severity`` (seeded per corruption)."""
        strength = CORRUPTIONS[name][severity - 1]
        stream = list(CORRUPTIONS).index(name)
        rng = np.random.default_rng([self.seed, _CORRUPTION_STREAM, stream, severity])
        if name == "gaussian_noise":
            noise = torch.from_numpy(rng.standard_normal(tuple(images.shape))).float()
            return images + strength * noise
        if name == "gaussian_blur":
            offsets = torch.arange(-_BLUR_RADIUS, _BLUR_RADIUS + 1, dtype=torch.float32)
            kernel = torch.exp(-0.5 * (offsets / strength) ** 2)
            kernel = kernel / kernel.sum()
            kernel2d = (kernel[:, None] * kernel[None, :])[None, None]
            return nn.functional.conv2d(images, kernel2d, padding=_BLUR_RADIUS)
        angles = torch.from_numpy(rng.uniform(0, 2 * np.pi, len(images))).float()
        # affine_grid works in [-1, 1] coordinates: one pixel of an 8-pixel side is 2 / 8.
        step = 2 * strength / images.shape[-1]
        theta = torch.zeros(len(images), 2, 3)
        theta[:, 0, 0] = theta[:, 1, 1] = 1.0
        theta[:, 0, 2] = -step * torch.cos(angles)
        theta[:, 1, 2] = -step * torch.sin(angles)
        grid = nn.functional.affine_grid(theta, list(images.shape), align_corners=False)
        return nn.functional.grid_sample(
            images, grid, mode="bilinear", padding_mode="zeros", align_corners=False
        )

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
            if :attr:`eval_ood`, then the shift loader if :attr:`eval_shift`; or,
            with ``eval_near_far_ood`` / ``eval_shift_severities``, one loader per
            entry of :attr:`eval_sets`.
        """
        loaders = [_compat.tu_data_loader(self, self.get_test_set(), training=False)]
        if self.eval_ood:
            loaders.append(_compat.tu_data_loader(self, self.get_ood_set(), training=False))
        if self.eval_shift:
            loaders.append(_compat.tu_data_loader(self, self.get_shift_set(), training=False))
        loaders += [
            _compat.tu_data_loader(self, dataset, training=False)
            for dataset in getattr(self, "eval_datasets", [])
        ]
        return loaders

    def _get_train_data(self) -> ArrayLike:
        """Return the training images, used by :meth:`make_cross_val_splits`."""
        return self.train.tensors[0].numpy()

    def _get_train_targets(self) -> ArrayLike:
        """Return the training targets, used by :meth:`make_cross_val_splits`."""
        return self.train.tensors[1].numpy()


def _check_held_out(classes: Sequence[int]) -> tuple[int, ...]:
    """Distinct digits of ``0..9`` leaving at least two classes, sorted."""
    classes = tuple(classes) if isinstance(classes, (list, tuple)) else (classes,)
    bad = [c for c in classes if isinstance(c, bool) or c not in range(_NUM_DIGIT_CLASSES)]
    if bad or len(set(classes)) != len(classes) or len(classes) > _NUM_DIGIT_CLASSES - 2:
        raise ValueError(
            f"held_out_classes must be distinct digits in 0..9 leaving at least two classes, "
            f"got {list(classes)}."
        )
    return tuple(sorted(int(c) for c in classes))
