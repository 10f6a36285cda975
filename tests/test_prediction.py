"""predict / EnsemblePrediction: mean probabilities and U_mod per input, with and without
Lightning."""

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from fixtures.backbones import tiny_resnet
from fixtures.synthetic_datamodule import SyntheticDataModule
from fixtures.training import cpu_trainer
from torch_uncertainty_signorm import (
    EnsemblePrediction,
    ensemble_prediction,
    mutual_information,
    predict,
    signorm_ensemble,
)
from torch_uncertainty_signorm.evaluation.prediction import member_probabilities
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

M = 4


@pytest.fixture
def model():
    ensemble = signorm_ensemble(tiny_resnet(), M)
    ensemble.train()(torch.randn(8, 3, 32, 32))  # non-trivial running statistics
    return ensemble


def test_predict_returns_mean_probabilities_and_their_mutual_information(model):
    x = torch.randn(5, 3, 32, 32)
    prediction = predict(model, x)
    assert model.training  # the caller's mode is restored
    with torch.no_grad():
        member_probs = model.eval()(x).softmax(-1).unflatten(0, (M, -1))
    assert prediction.probs.shape == (5, 10)
    torch.testing.assert_close(prediction.probs.sum(-1), torch.ones(5))
    torch.testing.assert_close(prediction.probs, member_probs.mean(0))
    torch.testing.assert_close(prediction.modulation_uncertainty, mutual_information(member_probs))
    assert (prediction.modulation_uncertainty > 0).all()  # from-scratch members disagree
    assert (prediction.modulation_uncertainty <= math.log(M) + 1e-6).all()


def test_predict_over_a_loader_equals_one_batch_and_matches_trainer_predict(model):
    x, y = torch.randn(10, 3, 32, 32), torch.randint(0, 10, (10,))
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    whole = predict(model, x)
    batched = predict(model, loader)
    torch.testing.assert_close(batched.probs, whole.probs, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        batched.modulation_uncertainty, whole.modulation_uncertainty, rtol=1e-5, atol=1e-6
    )
    routine = SigmaNormClassificationRoutine(model, num_classes=10)
    outputs = cpu_trainer().predict(routine, loader)
    assert all(isinstance(out, EnsemblePrediction) for out in outputs)
    torch.testing.assert_close(
        torch.cat([out.probs for out in outputs]), whole.probs, rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(
        torch.cat([out.modulation_uncertainty for out in outputs]),
        whole.modulation_uncertainty,
        rtol=1e-5,
        atol=1e-6,
    )


def test_predict_accepts_what_a_torch_uncertainty_datamodule_returns(model):
    datamodule = SyntheticDataModule(batch_size=8, num_samples=12, eval_ood=True, eval_shift=True)
    datamodule.setup("test")
    loaders = datamodule.test_dataloader()  # [test, OOD, shifted]: a list of loaders
    predictions = predict(model, loaders)
    assert [p.probs.shape[0] for p in predictions] == [len(loader.dataset) for loader in loaders]
    test_set = predict(model, loaders[0])
    torch.testing.assert_close(predictions[0].probs, test_set.probs)
    with pytest.raises(TypeError, match="a batch that is a DataLoader"):
        predict(model, [loaders[0], torch.randn(2, 3, 32, 32)])


def test_identical_members_have_zero_modulation_uncertainty_and_binary_logits_get_two_columns():
    logits = torch.randn(3, 5).repeat(M, 1)  # every member predicts the same
    prediction = ensemble_prediction(logits.half(), M)
    assert prediction.probs.dtype == torch.float32
    torch.testing.assert_close(prediction.modulation_uncertainty, torch.zeros(3), atol=1e-5, rtol=0)
    binary = member_probabilities(torch.randn(M * 3, 1), M, binary=True)
    assert binary.shape == (M, 3, 2)
    torch.testing.assert_close(binary.sum(-1), torch.ones(M, 3))


def test_bad_prediction_inputs_name_the_value():
    with pytest.raises(ValueError, match=r"member-major logits .* M = 4, got shape \(6, 3\)"):
        ensemble_prediction(torch.randn(6, 3), 4)
    with pytest.raises(ValueError, match="num_estimators must be an integer >= 1, got 0"):
        member_probabilities(torch.randn(4, 3), 0)
    with pytest.raises(ValueError, match="Linear has no num_estimators attribute"):
        predict(torch.nn.Linear(3, 2), torch.randn(2, 3))
    with pytest.raises(ValueError, match="the data iterable is empty"):
        predict(torch.nn.Linear(3, 2), [], num_estimators=1)
