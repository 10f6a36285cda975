"""SST2DataModule on a few local sentences, a local OOD set and a local word-level tokenizer."""

from __future__ import annotations

import re

import pytest
import torch

from fixtures.text import NEWSGROUPS, write_newsgroups, write_sst2, write_tokenizer
from signorm_lab.datamodules import SST2DataModule


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("sst2")
    write_tokenizer(root / "tokenizer")
    return {
        "root": root,
        "tokenizer": root / "tokenizer",
        "local_path": write_sst2(root / "sst2"),
        "ood_local_path": write_newsgroups(root / "newsgroups"),
    }


def _datamodule(files, **kwargs) -> SST2DataModule:
    return SST2DataModule(**{**files, "batch_size": 4, **kwargs})


def test_batches_are_tokenised_and_padded_to_their_longest_sentence(files):
    datamodule = _datamodule(files)
    datamodule.setup("fit")
    tokenizer = datamodule.tokenizer
    sentences = datamodule.train["input_ids"]
    assert len(datamodule.train) == 12 and len(datamodule.val) == 4
    loader = datamodule._data_loader(datamodule.train, training=True, shuffle=False)
    for index, (inputs, labels) in enumerate(loader):
        lengths = [len(ids) for ids in sentences[4 * index : 4 * index + 4]]
        assert inputs["input_ids"].shape == (4, max(lengths))  # dynamic padding
        assert inputs["attention_mask"].sum(1).tolist() == lengths
        pad = inputs["input_ids"][inputs["attention_mask"] == 0]
        assert (pad == tokenizer.pad_token_id).all()
        assert labels.dtype == torch.int64
        assert labels.tolist() == datamodule.train["label"][4 * index : 4 * index + 4]
    first = sentences[0]
    assert first[0] == tokenizer.cls_token_id and first[-1] == tokenizer.sep_token_id
    assert tokenizer.unk_token_id not in first  # every word of the fixture is in the vocabulary


def test_test_split_is_the_official_validation_split_and_ood_follows(files):
    datamodule = _datamodule(files, eval_ood=True)
    datamodule.setup("test")
    test_loader, ood_loader = datamodule.test_dataloader()
    assert len(datamodule.test) == 4 and len(datamodule.ood) == len(NEWSGROUPS)
    ((inputs, _),) = list(test_loader)
    ood_batches = list(ood_loader)
    assert sum(len(labels) for _, labels in ood_batches) == len(NEWSGROUPS)
    decoded = datamodule.tokenizer.decode(
        ood_batches[0][0]["input_ids"][0], skip_special_tokens=True
    )
    assert decoded == NEWSGROUPS[0]
    assert set(inputs) == {"input_ids", "token_type_ids", "attention_mask"}


def test_val_split_holds_out_part_of_the_training_split(files):
    datamodule = _datamodule(files, val_split=0.25, seed=1)
    datamodule.setup("fit")
    train = {tuple(ids) for ids in datamodule.train["input_ids"]}
    val = {tuple(ids) for ids in datamodule.val["input_ids"]}
    assert len(datamodule.train) == 9 and len(datamodule.val) == 3 and not train & val


def test_truncation_to_max_length(files):
    datamodule = _datamodule(files, max_length=4)
    datamodule.setup("fit")
    assert max(len(ids) for ids in datamodule.train["input_ids"]) == 4


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"ood_dataset": "cifar10"}, ValueError, "ood_dataset='cifar10' is unknown.*20_newsgroups"),
        ({"val_split": 1.5}, ValueError, "val_split.*1.5"),
        ({"num_tta": 2}, ValueError, "num_tta must be 1"),
        ({"batch_size": 0}, ValueError, "batch_size.*got 0"),
        ({"max_length": 1}, ValueError, "max_length.*got 1"),
        ({"tokenizer": 3}, TypeError, "tokenizer must be.*int"),
    ],
)
def test_bad_arguments_name_the_value(files, kwargs, error, message):
    with pytest.raises(error, match=message):
        _datamodule(files, **kwargs)


def test_missing_local_directory_is_named(files, tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=f"local_path={re.escape(repr(missing))}"):
        _datamodule(files, local_path=missing)


def test_local_data_without_the_expected_splits_or_columns_is_rejected(files, tmp_path):
    from datasets import Dataset

    Dataset.from_dict({"sentence": ["fun"], "label": [1]}).save_to_disk(str(tmp_path / "flat"))
    with pytest.raises(ValueError, match=r"lacks the split\(s\) \['train', 'validation'\]"):
        _datamodule(files, local_path=tmp_path / "flat").setup("fit")
    Dataset.from_dict({"content": ["a film"]}).save_to_disk(str(tmp_path / "ood"))
    with pytest.raises(ValueError, match=r"20_newsgroups set has no column\(s\) \['text'\]"):
        _datamodule(files, eval_ood=True, ood_local_path=tmp_path / "ood").setup("test")
