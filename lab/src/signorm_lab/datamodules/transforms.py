"""Image transforms that feed pretrained ViTs from TorchUncertainty's CIFAR and ImageNet
datamodules.

TorchUncertainty's ``CIFAR100DataModule`` and ``ImageNetDataModule`` take ``train_transform`` /
``test_transform`` modules; :func:`vit_transform` builds them for a ViT pretrained at
``size`` pixels, usable from a recipe's ``data:`` block as a ``class_path``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torchvision.transforms import InterpolationMode, v2

from torch_uncertainty_signorm.utils.checks import check_integer

__all__ = ["IN21K_MEAN", "IN21K_STD", "vit_transform"]

#: Normalization of timm's ImageNet-21k ViT-B/16 checkpoints (orig_in21k, augreg_in21k).
IN21K_MEAN = (0.5, 0.5, 0.5)
IN21K_STD = (0.5, 0.5, 0.5)


def vit_transform(
    train: bool,
    size: int = 224,
    *,
    dataset: Literal["cifar", "imagenet"] = "cifar",
    mean: Sequence[float] = IN21K_MEAN,
    std: Sequence[float] = IN21K_STD,
    crop_pct: float = 0.9,
) -> v2.Compose:
    """Resize (and augment) images to the ViT's resolution and normalize them as it was trained.

    * ``cifar``: training keeps TorchUncertainty's CIFAR augmentation (random 32-px crop
      with 4-px padding, horizontal flip), then every split is resized to ``size`` (bicubic).
    * ``imagenet``: training uses a random resized crop at ``size`` and a horizontal flip;
      evaluation resizes to ``size / crop_pct`` and centre-crops ``size`` (timm's
      evaluation transform for these checkpoints, ``crop_pct = 0.9``).

    Args:
        train: Training (augmented) or evaluation transform.
        size: Input resolution of the backbone.
        dataset: ``"cifar"`` (32-px images) or ``"imagenet"``.
        mean: Per-channel normalization mean (the checkpoint's; 0.5 for in21k ViTs).
        std: Per-channel normalization standard deviation.
        crop_pct: Centre-crop fraction of the ImageNet evaluation transform.

    Raises:
        ValueError: If ``dataset``, ``size`` or ``crop_pct`` is invalid.
    """
    if dataset not in ("cifar", "imagenet"):
        raise ValueError(f"dataset must be 'cifar' or 'imagenet', got {dataset!r}.")
    check_integer("size", size)
    if not 0 < crop_pct <= 1:
        raise ValueError(f"crop_pct must be in (0, 1], got {crop_pct!r}.")
    bicubic = InterpolationMode.BICUBIC
    if dataset == "cifar":
        augment = [v2.RandomCrop(32, padding=4), v2.RandomHorizontalFlip()] if train else []
        geometry = [*augment, v2.Resize(size, interpolation=bicubic, antialias=True)]
    elif train:
        geometry = [
            v2.RandomResizedCrop(size, interpolation=bicubic, antialias=True),
            v2.RandomHorizontalFlip(),
        ]
    else:
        geometry = [
            v2.Resize(round(size / crop_pct), interpolation=bicubic, antialias=True),
            v2.CenterCrop(size),
        ]
    return v2.Compose(
        [
            v2.ToImage(),
            *geometry,
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=list(mean), std=list(std)),
        ]
    )
