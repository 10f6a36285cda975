"""Parameter counts in the paper's convention, hand-computed on a tiny backbone."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fixtures.backbones import tiny_bert
from signorm_lab.baselines import film_ensemble, lora_ensemble
from signorm_lab.evaluation.parameter_counts import parameter_counts
from torch_uncertainty_signorm import signorm_ensemble


class TinyCNN(nn.Module):
    """conv 3→4 (3×3, no bias): 108, BatchNorm 4: 8, classifier 4→2: 10; 126 in all."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.bn1(self.conv1(x))).mean((2, 3)))


def test_single_model_counts_parameters_once_and_no_buffers():
    assert parameter_counts(TinyCNN()) == {"trainable": 126, "total": 126}
    shared = nn.Linear(3, 4)  # 16 parameters registered twice
    model = nn.Sequential(shared, nn.ReLU(), shared, nn.BatchNorm1d(4))
    model[3].requires_grad_(False)
    assert parameter_counts(model) == {"trainable": 16, "total": 24}


def test_film_ensemble_counts_per_member_affines():
    # conv 108 + M·(γ, β) = 3·8 + shared classifier 10
    assert parameter_counts(film_ensemble(TinyCNN(), 3)) == {"trainable": 142, "total": 142}


def test_signorm_ensemble_counts_scales_and_member_heads():
    # conv 108 + M·4 scale logits + heads: M·(4 + 4) BN affine + M·(2·4 + 2) linear
    counts = parameter_counts(signorm_ensemble(TinyCNN(), 3))
    assert counts == {"trainable": 108 + 12 + 24 + 30, "total": 174}


def test_lora_ensemble_counts_frozen_backbone_adapters_and_heads():
    backbone = parameter_counts(tiny_bert())["total"] - (32 * 2 + 2)  # without its classifier
    # 2 layers × 3 projections × M = 3 members × (A: 8×32 + B: 32×8), heads M·(32·2 + 2)
    trainable = 2 * 3 * 3 * (8 * 32 + 32 * 8) + 3 * (32 * 2 + 2)
    counts = parameter_counts(lora_ensemble(tiny_bert(), 3, rank=8))
    assert counts == {"trainable": trainable, "total": backbone + trainable}


def test_bad_input():
    with pytest.raises(TypeError, match=r"parameter_counts takes an nn.Module, got dict"):
        parameter_counts({})
