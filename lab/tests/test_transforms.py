"""vit_transform resizes CIFAR/ImageNet images to the ViT's resolution with its normalization."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from signorm_lab.datamodules.transforms import vit_transform


def test_cifar_images_are_resized_and_normalized_to_minus_one_one():
    image = Image.fromarray(torch.randint(0, 256, (32, 32, 3), dtype=torch.uint8).numpy())
    for train in (True, False):
        out = vit_transform(train, size=64)(image)
        assert out.shape == (3, 64, 64) and out.dtype == torch.float32
        assert out.min() >= -1.05 and out.max() <= 1.05  # (x - 0.5) / 0.5 of [0, 1] pixels
    white = Image.fromarray(torch.full((32, 32, 3), 255, dtype=torch.uint8).numpy())
    assert torch.allclose(vit_transform(False, size=64)(white), torch.ones(3, 64, 64), atol=1e-5)


def test_imagenet_evaluation_resizes_then_centre_crops():
    image = Image.fromarray(torch.randint(0, 256, (300, 400, 3), dtype=torch.uint8).numpy())
    transform = vit_transform(False, size=56, dataset="imagenet", crop_pct=0.875)
    assert transform(image).shape == (3, 56, 56)
    resize = transform.transforms[1]
    assert resize.size == [64]  # 56 / 0.875


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dataset": "svhn"}, "dataset must be 'cifar' or 'imagenet', got 'svhn'"),
        ({"size": 0}, "size must be an integer >= 1, got 0"),
        ({"crop_pct": 1.5}, r"crop_pct must be in \(0, 1\], got 1.5"),
    ],
)
def test_bad_arguments_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        vit_transform(True, **kwargs)
