"""Why σN-Ens on the converted MiniLM relapses to one class: controlled runs, one change each.

The tweets study's schedule (120 SGD steps of 8 tweets, lr 0.01, momentum 0.9, 10 warm-up
steps then cosine; scale logits at 100× the rate; validation on the 256 validation tweets every
20 steps; the last weights tested on the 1,500 test tweets) in a plain training loop, so that
one part of the model can be swapped at a time. The loop is the routine's: cross-entropy of the
member-major logits against the repeated labels, plus ``model.diversity_loss()``.

A validation check "relapses" when one class takes at least 95 % of the predictions (the
validation labels are not: 48 % negative). Usage::

    OMP_NUM_THREADS=1 python -m studies.tweets_reliability --variants legacy paper_head \
        --seeds 0 2 --out studies/results/reliability/ablation.csv
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch
from lightning.pytorch import seed_everything
from torch import nn

from signorm_lab.datamodules import TweetsDataModule
from signorm_lab.models.packaged import minilm_classifier
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.optim_recipes import WarmupCosineLR
from torch_uncertainty_signorm.signorm.layers import SigmaNorm
from torch_uncertainty_signorm.signorm.optim import signorm_param_groups

from ._command import append_rows

STEPS, CHECK_EVERY, ONE_CLASS_SHARE = 120, 20, 0.95


def _datamodule(seed: int) -> TweetsDataModule:
    dm = TweetsDataModule(
        root="./data",
        batch_size=8,
        eval_batch_size=64,
        max_length=32,
        held_out_topic="coachella",
        train_size=960,
        val_size=256,
        test_size=1500,
        subset_seed=seed,
    )
    dm.setup("fit")
    dm.setup("test")
    return dm


def _unfreeze_shifts(model: nn.Module) -> None:
    """The converted layers' frozen β become trainable parameters."""
    for layer in model.modules():
        if isinstance(layer, SigmaNorm) and layer.shift is not None:
            shift = layer.shift
            del layer._buffers["shift"]
            layer.shift = nn.Parameter(shift.clone())


def _single_member_plain_backbone(model: nn.Module) -> None:
    """M = 1 only: every backbone σLN folded back into the plain LayerNorm it was."""
    names = [n for n, m in model.backbone.named_modules() if isinstance(m, SigmaNorm)]
    for name in names:
        model.backbone.set_submodule(name, model.backbone.get_submodule(name).to_plain(0))


def _head_norm(kind: str) -> Callable[[nn.Module], None]:
    def change(model: nn.Module) -> None:
        dim = model.heads.weight.shape[-1]
        if kind == "identity":
            model.heads.norm = nn.Identity()
        elif kind == "plain_ln":  # M = 1: the member's rows are all rows
            model.heads.norm = nn.LayerNorm(dim, eps=1e-12)
        elif kind == "ln_feature_scale":  # LN whose scale starts at the features' own scale
            model.heads.norm = _FeatureScaleLayerNorm(dim)

    return change


class _FeatureScaleLayerNorm(nn.LayerNorm):
    """M = 1: a LayerNorm whose weight is set, on its first training batch, to the mean
    per-row standard deviation of its input (its output then has the input's scale)."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim, eps=1e-12)
        self.register_buffer("calibrated", torch.tensor(False))

    def forward(self, x):
        if self.training and not bool(self.calibrated):
            with torch.no_grad():
                self.weight.fill_(float(x.std(dim=-1, unbiased=False).mean()))
                self.calibrated.fill_(True)
        return super().forward(x)


def _head_linear_bert_init(model: nn.Module) -> None:
    """The member heads' linear layers drawn as transformers' BERT classifier (std 0.02)."""
    with torch.no_grad():
        model.heads.weight.normal_(0.0, 0.02)
        model.heads.bias.zero_()


def _unit_head_scale(model: nn.Module) -> None:
    """The paper's head norm as it is built (scale 1), not scaled to the features."""
    model.heads.norm.scale_initialised.fill_(True)
    model.heads.norm._scale_pending = False  # the forward pass reads this copy of the buffer


#: One change each, on the model the package builds (``legacy``: the package before the head
#: fix, when these runs were made at that commit; see docs/reliability.md).
VARIANTS: dict[str, list[Callable[[nn.Module], None]]] = {
    "package": [],
    "unit_head_scale": [_unit_head_scale],
    "head_identity": [_head_norm("identity")],
    "head_plain_ln": [_head_norm("plain_ln")],
    "head_bert_init": [_head_linear_bert_init],
    "head_ln_feature_scale": [_head_norm("ln_feature_scale")],
    "head_identity_bert_init": [_head_norm("identity"), _head_linear_bert_init],
    "trainable_shift": [_unfreeze_shifts],
    "plain_backbone": [_single_member_plain_backbone],
}


def _evaluate(model: nn.Module, loader, members: int) -> tuple[float, float, float]:
    """Ensemble accuracy, NLL and the largest share of one predicted class."""
    model.eval()
    correct = nll = count = 0.0
    counts = None
    with torch.no_grad():
        for inputs, labels in loader:
            probs = model(inputs).softmax(-1).unflatten(0, (members, -1)).mean(0)
            pred = probs.argmax(-1)
            correct += float((pred == labels).sum())
            nll += float(-probs.gather(1, labels[:, None]).clamp_min(1e-12).log().sum())
            count += len(labels)
            binc = torch.bincount(pred, minlength=probs.shape[-1])
            counts = binc if counts is None else counts + binc
    model.train()
    return correct / count, nll / count, float(counts.max()) / count


def run(
    variant: str,
    seed: int,
    members: int,
    scale_lr: float = 100.0,
    test: bool = True,
    steps: int = STEPS,
) -> dict:
    seed_everything(seed, verbose=False)
    dm = _datamodule(seed)
    model = signorm_ensemble(
        minilm_classifier(3),
        num_estimators=members,
        pretrained=True,
        regularized_layers="transformer",
        tau=0.08,
        diversity_strength=1e-3,
    )
    for change in VARIANTS[variant]:
        change(model)
    groups = signorm_param_groups(model, 0.01, scale_lr, float(members))
    optimizer = torch.optim.SGD(groups, lr=0.01, momentum=0.9, weight_decay=0.0)
    schedule = WarmupCosineLR(optimizer, total_steps=STEPS, warmup_steps=10)  # the study's
    loader = dm.train_dataloader()
    model.train()
    relapses, checks, start = 0, [], time.perf_counter()
    step = 0
    while step < steps:
        for inputs, labels in loader:
            logits = model(inputs)
            loss = nn.functional.cross_entropy(logits, labels.repeat(members))
            if variant == "plain_backbone":  # no σNorm layer left to regularize
                model._diversity_loss_seen = True
            else:
                loss = loss + model.diversity_loss()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if step % CHECK_EVERY == 0 or step == steps:
                acc, _, share = _evaluate(model, dm.val_dataloader(), members)
                checks.append(f"{acc:.3f}")
                relapses += share >= ONE_CLASS_SHARE and step > CHECK_EVERY
                last_share = share
            if step >= steps:
                break
    row = {
        "variant": variant,
        "seed": seed,
        "M": members,
        "scale_lr": scale_lr,
        "val_checks": " ".join(checks),
        "one_class_checks": relapses,
        "last_top_class_share": round(last_share, 3),
    }
    if test:
        acc, nll, share = _evaluate(model, dm.test_dataloader()[0], members)
        row.update(test_acc=round(acc, 4), test_nll=round(nll, 4), one_class=share >= 0.95)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[2])
    parser.add_argument("--members", nargs="+", type=int, default=[1])
    parser.add_argument("--scale-lr", type=float, default=100.0)
    parser.add_argument("--no-test", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    append_rows(
        args.out,
        (
            run(variant, seed, members, args.scale_lr, not args.no_test)
            for members in args.members
            for seed in args.seeds
            for variant in args.variants
        ),
    )


if __name__ == "__main__":
    main()
