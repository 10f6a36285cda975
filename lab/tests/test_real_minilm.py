"""The real pretrained MiniLM-L6 (packaged, offline) converts exactly into a σNorm-Ensemble.

Its last LayerNorm holds scales from 0.79 down to 4.8e-33, three of them negative: every
member's pooled features must still equal the pretrained model's on real tweets.
"""

import copy

import pytest
import torch

from signorm_lab.datamodules import TweetsDataModule
from signorm_lab.models.packaged import minilm_classifier
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.signorm.layers import (
    MAX_CONVERTED_IMPORTANCE,
    MIN_CONVERTED_IMPORTANCE,
    SigmaNorm,
)

M = 4


@pytest.fixture(scope="module")
def minilm_and_tweets():
    datamodule = TweetsDataModule(test_size=12, max_length=64)
    datamodule.setup("test")
    inputs = datamodule.collate([datamodule.test[i] for i in range(len(datamodule.test))])[0]
    return minilm_classifier(num_classes=3), inputs


def test_the_real_checkpoint_has_tiny_and_negative_layer_norm_scales(minilm_and_tweets):
    model, _ = minilm_and_tweets
    weight = model.model.bert.encoder.layer[5].output.LayerNorm.weight
    assert weight.abs().min() < 1e-30 and (weight < 0).sum() == 3


@pytest.mark.slow
@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-6), (torch.float32, 1e-5)])
def test_converted_members_reproduce_the_pretrained_features(minilm_and_tweets, dtype, tolerance):
    model, inputs = minilm_and_tweets
    pretrained = copy.deepcopy(model).to(dtype).eval()
    with torch.no_grad():
        reference = pretrained.model.bert(**inputs).pooler_output
        ensemble = signorm_ensemble(
            copy.deepcopy(pretrained), M, pretrained=True, regularized_layers="transformer"
        ).eval()
        features = ensemble.forward_features(inputs).unflatten(0, (M, -1))
    error = (features - reference).norm(dim=-1) / reference.norm(dim=-1)
    assert error.max() <= tolerance, f"relative error {error.max():.2e} > {tolerance:.0e}"
    # Fine-tuning starts inside sigma's responsive range.
    logits = torch.cat(
        [
            m.scale_logits.flatten()
            for m in ensemble.modules()
            if isinstance(m, SigmaNorm) and m.magnitude is not None
        ]
    )
    low, high = (
        torch.logit(torch.tensor(p, dtype=torch.float64)).item()
        for p in (MIN_CONVERTED_IMPORTANCE, MAX_CONVERTED_IMPORTANCE)
    )
    assert low - 1e-5 <= logits.min() and logits.max() <= high + 1e-5
