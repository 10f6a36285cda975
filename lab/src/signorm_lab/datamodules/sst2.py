"""GLUE SST-2 sentiment classification with the backbone's tokenizer and dynamic padding.

Data:
    GLUE SST-2 through Hugging Face ``datasets`` (``nyu-mll/glue``, config ``sst2``;
    67,349 training and 872 validation sentences, labels 0 = negative, 1 = positive),
    downloaded into ``root`` on first use, or read with :func:`datasets.load_from_disk`
    from ``local_path`` (a ``DatasetDict`` with ``train`` and ``validation`` splits, columns
    ``sentence`` and ``label``) on machines without internet.

Splits (the Hydra Ensembles protocol):
    GLUE hides the labels of its test split, so the official validation split is the test
    set. With ``val_split=None`` (default) it is also the validation set, as in the SST-2
    datamodule of TorchUncertainty's out-of-distribution branch on which Hydra Ensembles
    runs (and as TorchUncertainty's CIFAR recipes do with ``val_split`` unset): checkpoint
    selection then sees the test sentences. ``val_split=p`` instead holds out a seeded
    random share ``p`` of the training split as validation set, keeping the test set unseen.

Tokenisation:
    Each sentence is tokenised once (truncated to ``max_length`` = 128 tokens, as that
    datamodule) without padding; batches are padded to their longest sentence by
    :class:`transformers.DataCollatorWithPadding` and returned as ``(inputs, labels)``,
    ``inputs`` being the tokenizer's mapping (``input_ids``, ``attention_mask``,
    ``token_type_ids``), which :class:`~torch_uncertainty_signorm.SigmaNormEnsemble` and
    :class:`~signorm_lab.models.backbones.SequenceClassifier` take as they are.

Out-of-distribution set (``eval_ood=True``):
    TorchUncertainty 0.13's routine scores one OOD loader (AUROC, AUPR, FPR95), chosen by
    ``ood_dataset`` among :data:`OOD_DATASETS`, the sets of the out-of-distribution branch's
    SST-2 datamodule (near: Yelp and Amazon polarity; far: AG News, 20 Newsgroups, TREC,
    MNLI mismatched, RTE) plus IMDB. The default is **20 Newsgroups** (test split, 7,532
    posts): the far-OOD set most used against SST-2 in the OOD literature for pretrained
    transformers (Hendrycks et al., 2020; Zhou et al., 2021), and one of that branch's far
    sets. It is semantic OOD: newsgroup posts on computing, science, politics or sport,
    which carry no movie-review sentiment. Yelp, Amazon and IMDB are reviews whose
    positive/negative labels still apply, a covariate shift rather than an unknown input,
    so they are available but not the default. Their labels are ignored by the routine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from torch_uncertainty_signorm.utils.checks import check_fraction, check_integer, check_stage

from ._arguments_for import arguments_for
from .text_loading import PadToLongest, TextDataModule, load_tokenizer

__all__ = ["OOD_DATASETS", "PadToLongest", "SST2DataModule", "TextSource", "load_tokenizer"]


@dataclass(frozen=True)
class TextSource:
    """Where a text set lives on the Hugging Face hub and which columns hold its text.

    Attributes:
        path: Dataset id on the hub.
        config: Its configuration name, if any.
        split: The split used.
        text_fields: One text column, or two for sentence pairs (tokenised as a pair).
    """

    path: str
    config: str | None
    split: str
    text_fields: tuple[str, ...]


_SST2 = TextSource("nyu-mll/glue", "sst2", "train", ("sentence",))

#: Out-of-distribution text sets by name.
OOD_DATASETS: dict[str, TextSource] = {
    "20_newsgroups": TextSource("SetFit/20_newsgroups", None, "test", ("text",)),
    "trec": TextSource("SetFit/TREC-QC", None, "test", ("text",)),
    "ag_news": TextSource("fancyzhx/ag_news", None, "test", ("text",)),
    "mnli_mismatched": TextSource(
        "nyu-mll/glue", "mnli", "validation_mismatched", ("premise", "hypothesis")
    ),
    "rte": TextSource("nyu-mll/glue", "rte", "validation", ("sentence1", "sentence2")),
    "yelp_polarity": TextSource("fancyzhx/yelp_polarity", None, "test", ("text",)),
    "amazon_polarity": TextSource("fancyzhx/amazon_polarity", None, "test", ("content",)),
    "imdb": TextSource("stanfordnlp/imdb", None, "test", ("text",)),
}


class SST2DataModule(TextDataModule):
    """DataModule for GLUE SST-2; see the module docstring for data, splits and OOD set."""

    num_classes = 2

    def __init__(
        self,
        root: str | Path = "./data",
        tokenizer: str | Path = "bert-base-uncased",
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        eval_ood: bool = False,
        ood_dataset: str = "20_newsgroups",
        val_split: float | None = None,
        max_length: int = 128,
        local_path: str | Path | None = None,
        ood_local_path: str | Path | None = None,
        seed: int = 0,
        num_tta: int = 1,
        postprocess_set: Literal["val", "test"] = "val",
        num_workers: int = 0,
        pin_memory: bool = False,
        persistent_workers: bool = False,
    ) -> None:
        """DataModule for GLUE SST-2.

        Args:
            root: Cache directory of the downloaded datasets. Defaults to ``"./data"``.
            tokenizer: The backbone's tokenizer: a Hugging Face model id, a local
                directory (``save_pretrained`` output), or a tokenizer object.
                Defaults to ``"bert-base-uncased"``.
            batch_size: Training batch size. Defaults to ``32``.
            eval_batch_size: Evaluation batch size; ``batch_size`` if ``None``.
            eval_ood: Also return the OOD test loader. Defaults to ``False``.
            ood_dataset: Name of the OOD set in :data:`OOD_DATASETS`. Defaults to
                ``"20_newsgroups"``.
            val_split: ``None``: validate on the official validation split (the test
                set, Hydra protocol); a share in ``(0, 1)``: validate on that share of
                the training split. Defaults to ``None``.
            max_length: Truncation length in tokens. Defaults to ``128``.
            local_path: Directory of a saved SST-2 ``DatasetDict`` (``train`` and
                ``validation``, columns ``sentence``/``label``) read instead of the hub.
            ood_local_path: Directory of the saved OOD ``Dataset`` (or ``DatasetDict``
                holding its split), with the text columns of ``ood_dataset``.
            seed: Seed of the ``val_split`` hold-out. Defaults to ``0``.
            num_tta: Must be ``1``: text has no test-time augmentation.
            postprocess_set: Split used to fit post-processing methods.
            num_workers: Dataloader workers. Defaults to ``0``.
            pin_memory: Whether to pin memory. Defaults to ``False``.
            persistent_workers: Whether to keep workers alive; needs ``num_workers > 0``.

        Raises:
            ValueError: If an argument is outside its valid range or ``ood_dataset`` is
                unknown.
            FileNotFoundError: If ``local_path`` or ``ood_local_path`` is not a directory.
        """
        check_integer("seed", seed, 0)
        if ood_dataset not in OOD_DATASETS:
            raise ValueError(
                f"ood_dataset={ood_dataset!r} is unknown; choose one of {', '.join(OOD_DATASETS)}."
            )
        if val_split is not None:
            check_fraction("val_split", val_split)
        for name, path in (("local_path", local_path), ("ood_local_path", ood_local_path)):
            if path is not None and not Path(path).is_dir():
                raise FileNotFoundError(
                    f"{name}='{path}' is not a directory; write one with "
                    f"Dataset(Dict).save_to_disk(path)."
                )
        super().__init__(**arguments_for(TextDataModule.__init__, locals()))
        self.ood_dataset = ood_dataset
        self.local_path = None if local_path is None else Path(local_path)
        self.ood_local_path = None if ood_local_path is None else Path(ood_local_path)
        self.seed = seed

    def prepare_data(self) -> None:
        """Download SST-2 (and the OOD set) into ``root`` unless they are read locally."""
        if self.local_path is None:
            self._from_hub(_SST2, split=None)
        if self.eval_ood and self.ood_local_path is None:
            self._from_hub(OOD_DATASETS[self.ood_dataset])

    def _from_hub(self, source: TextSource, split: str | None = "default") -> Any:
        from datasets import load_dataset

        split = source.split if split == "default" else split
        return load_dataset(source.path, source.config, split=split, cache_dir=str(self.root))

    def _sst2(self) -> Any:
        from datasets import load_from_disk

        dataset = (
            load_from_disk(str(self.local_path))
            if self.local_path is not None
            else self._from_hub(_SST2, split=None)
        )
        missing = {"train", "validation"} - set(getattr(dataset, "keys", dict)())
        if missing:
            raise ValueError(
                f"SST-2 at '{self.local_path}' lacks the split(s) {sorted(missing)}; expected a "
                f"DatasetDict with 'train' and 'validation' (columns 'sentence', 'label')."
            )
        return dataset

    def _ood(self) -> Any:
        from datasets import DatasetDict, load_from_disk

        source = OOD_DATASETS[self.ood_dataset]
        if self.ood_local_path is None:
            return self._from_hub(source)
        dataset = load_from_disk(str(self.ood_local_path))
        if isinstance(dataset, DatasetDict):
            if source.split not in dataset:
                raise ValueError(
                    f"ood_local_path='{self.ood_local_path}' holds the splits "
                    f"{sorted(dataset)}, not {source.split!r} of {self.ood_dataset!r}."
                )
            dataset = dataset[source.split]
        return dataset

    def _tokenize(self, dataset: Any, fields: tuple[str, ...], name: str) -> Any:
        """Tokenise ``fields`` (one text or a pair) without padding; keep ``label``."""
        missing = [field for field in fields if field not in dataset.column_names]
        if missing:
            raise ValueError(
                f"The {name} set has no column(s) {missing}; its columns are "
                f"{dataset.column_names}."
            )

        def tokenize(batch: dict[str, list]) -> Any:
            texts = [batch[field] for field in fields]
            return self.tokenizer(*texts, truncation=True, max_length=self.max_length)

        if "label" not in dataset.column_names:
            dataset = dataset.add_column("label", [0] * len(dataset))
        drop = [c for c in dataset.column_names if c != "label"]
        return dataset.map(tokenize, batched=True, remove_columns=drop)

    def setup(self, stage: Literal["fit", "validate", "test"] | None = None) -> None:
        """Tokenise the splits of ``stage`` (``fit``/``validate``: train and val;
        ``test``: test, and OOD if enabled; ``None``: all)."""
        check_stage(stage)
        sst2 = self._sst2()
        fields = _SST2.text_fields
        if stage in ("fit", "validate", None):
            train = sst2["train"]
            if self.val_split is None:
                self.val = self._tokenize(sst2["validation"], fields, "SST-2 validation")
            else:
                parts = train.train_test_split(test_size=self.val_split, seed=self.seed)
                train = parts["train"]
                self.val = self._tokenize(parts["test"], fields, "SST-2 held-out validation")
            self.train = self._tokenize(train, fields, "SST-2 train")
        if stage in ("test", None):
            self.test = self._tokenize(sst2["validation"], fields, "SST-2 validation")
            if self.eval_ood:
                source = OOD_DATASETS[self.ood_dataset]
                self.ood = self._tokenize(self._ood(), source.text_fields, self.ood_dataset)

    def _get_train_data(self) -> Any:
        """Training input ids, used by :meth:`make_cross_val_splits`."""
        return self.train["input_ids"]

    def _get_train_targets(self) -> Any:
        """Training labels, used by :meth:`make_cross_val_splits`."""
        return np.asarray(self.train["label"])
