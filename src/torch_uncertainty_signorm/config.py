"""One configuration object per method (as peft's ``LoraConfig``): the settings of a wrapper, read
and written by the wrapper (also under its lowercase name), a recipe's ``config:`` block and an
export's ``config.json``.

:class:`SigmaNormConfig` for σN-Ens, :class:`FiLMConfig` and :class:`LoRAEnsembleConfig` for the
baselines. A config holds the method's settings only: neither the backbone nor the number of members M,
which the wrapper takes beside it. Its fields are the wrapper's keyword arguments, with the
same names and defaults (:func:`settings_of` reads them from a call's arguments), so a recipe's
``init_args`` block is a config written out.

Example:
    >>> config = SigmaNormConfig(tau=0.5, regularized_layers="resnet18")
    >>> SigmaNormConfig.from_dict(config.to_dict()) == config
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from ._arguments import arguments_for
from .checks import check_integer, check_positive_number
from .layer_selection import check_selection
from .regularization import DEFAULT_DIVERSITY_STRENGTH, DEFAULT_TAU, check_penalty_settings

__all__ = [
    "FiLMConfig", "LoRAEnsembleConfig", "MethodConfig", "SigmaNormConfig", "check_init_center",
    "settings_of",
]


def _plain(value: Any) -> Any:
    """``value`` as JSON data: tuples as lists, paths as strings."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return str(value) if isinstance(value, Path) else value


_Config = TypeVar("_Config", bound="MethodConfig")


class MethodConfig:
    """What every method's config shares: conversion to and from plain data, and merging with
    a wrapper's keyword arguments. Subclasses are frozen dataclasses."""

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The settings, in the order of the dataclass fields."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every setting's default value."""
        return {field.name: field.default for field in dataclasses.fields(cls)}

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON data (lists, strings, numbers, booleans, ``None``)."""
        return {name: _plain(getattr(self, name)) for name in self.field_names()}

    @classmethod
    def from_dict(cls: type[_Config], data: Mapping[str, Any]) -> _Config:
        """The config holding ``data``'s settings (missing ones at their defaults).

        Raises:
            ValueError: If ``data`` names a setting the config does not have (naming it and the
                valid ones), or holds an invalid value.
            TypeError: If ``data`` is no mapping.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}.from_dict needs a mapping of settings, got "
                             f"{data!r:.200}.")
        cls._refuse_unknown(data)
        return cls(**data)

    @classmethod
    def _refuse_unknown(cls, names: Iterable[Any]) -> None:
        unknown = sorted(set(names) - set(cls.field_names()), key=str)
        if unknown:
            raise ValueError(
                f"{cls.__name__} has no setting {', '.join(map(repr, unknown))}; valid settings: "
                f"{', '.join(cls.field_names())}."
            )

    @classmethod
    def resolve(
        cls: type[_Config], config: _Config | Mapping[str, Any] | None,
        settings: Mapping[str, Any],
    ) -> _Config:
        """The config of a wrapper given ``config`` and its keyword arguments ``settings``.

        Without ``config``, the keyword arguments make it. With one (a config or its
        :meth:`to_dict`), a keyword argument left at its default takes the config's value, one
        equal to the config's value agrees, and any other is a conflict. A mapping (a recipe's
        ``config:`` block) sets only the settings it holds: a keyword argument for any other is
        used as given. The one rule everywhere (the model, the export, the results table): a
        setting the ``config:`` block holds is the config's.

        Raises:
            ValueError: If a keyword argument conflicts with ``config``, naming both values.
            TypeError: If ``config`` is neither a ``cls`` nor a mapping.
        """
        if config is None:
            return cls.from_dict(settings)
        cls._refuse_unknown(settings)
        if isinstance(config, Mapping):  # only the settings it holds are set by it
            given = dict(config)
            config = cls.from_dict({**{name: value for name, value in settings.items()
                                       if name not in given}, **given})
        if not isinstance(config, cls):
            raise TypeError(f"config must be a {cls.__name__} (or its to_dict()), got "
                            f"{type(config).__name__}.")
        defaults = cls.defaults()
        conflicts = [
            f"{name}={value!r} (config: {getattr(config, name)!r})"
            for name, value in settings.items()
            if _plain(value) != _plain(defaults[name])
            and _plain(value) != _plain(getattr(config, name))
        ]
        if conflicts:
            raise ValueError(
                f"Both config and keyword arguments set {', '.join(conflicts)}: give each setting "
                f"once, in the config or as a keyword argument (dataclasses.replace(config, ...) "
                f"changes a config)."
            )
        return config


def settings_of(config_class: type[MethodConfig], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The config's settings among a call's ``arguments`` (e.g. a function's ``locals()``)."""
    return arguments_for(config_class, arguments)


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be {', '.join(map(repr, choices[:-1]))} or "
                         f"{choices[-1]!r}, got {value!r}.")


def check_eval_chunk_size(value: Any) -> None:
    """Refuse an ``eval_chunk_size`` other than ``"auto"``, ``None`` or an integer >= 1."""
    if value is None or value == "auto":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"eval_chunk_size must be 'auto', None or an integer >= 1 (backbone rows per "
            f"evaluation pass), got {value!r}."
        )


def _check_name(name: str, value: Any, what: str, optional: bool = False) -> None:
    if not (isinstance(value, str) or (optional and value is None)):
        raise ValueError(f"{name} must be {what}, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class SigmaNormConfig(MethodConfig):
    """The settings of a σNorm-Ensemble
    (:class:`~torch_uncertainty_signorm.SigmaNormEnsemble`, whose arguments document each).

    Every value is checked when the config is made; ``checkpoint`` is kept as a string and
    ``regularized_layers`` as a string or a tuple of names.

    Raises:
        ValueError: Naming the field and its valid values.
    """

    num_classes: int | None = None
    pretrained: bool = False
    checkpoint: str | None = None
    regularized_layers: str | tuple[str, ...] = "all"
    tau: float = DEFAULT_TAU
    diversity_strength: float = DEFAULT_DIVERSITY_STRENGTH
    scale_init_std: float = 1.0
    member_spread: float = 0.0
    head: str | None = None
    head_norm: Literal["auto", "batch", "layer"] = "auto"
    head_scale_init: Literal["auto", "unit", "features"] = "auto"
    expand_at: str = "auto"
    eval_chunk_size: int | Literal["auto"] | None = "auto"

    def __post_init__(self) -> None:
        check_eval_chunk_size(self.eval_chunk_size)
        _check_choice("head_norm", self.head_norm, ("auto", "batch", "layer"))
        _check_choice("head_scale_init", self.head_scale_init, ("auto", "unit", "features"))
        tau, strength = check_penalty_settings(self.tau, self.diversity_strength)
        check_selection("regularized_layers", self.regularized_layers)
        _check_name("head", self.head, "the name of the classifier or None", optional=True)
        _check_name("expand_at", self.expand_at, "'auto', 'input' or a module name")
        if self.num_classes is not None:
            check_integer("num_classes", self.num_classes)
        if not isinstance(self.pretrained, bool):
            raise ValueError(f"pretrained must be True or False, got {self.pretrained!r}.")
        if self.checkpoint is not None and not isinstance(self.checkpoint, (str, Path)):
            raise ValueError(f"checkpoint must be a path or None, got {self.checkpoint!r}.")
        if self.checkpoint is not None and not self.pretrained:
            raise ValueError(
                f"checkpoint={str(self.checkpoint)!r} needs pretrained=True: from-scratch σNorm "
                f"would discard the checkpoint's normalisation layers."
            )
        normalised = {
            "tau": tau,
            "diversity_strength": strength,
            "scale_init_std": check_positive_number("scale_init_std", self.scale_init_std, True),
            "member_spread": check_positive_number("member_spread", self.member_spread, True),
            "checkpoint": None if self.checkpoint is None else str(self.checkpoint),
            "regularized_layers": self.regularized_layers if isinstance(
                self.regularized_layers, str) else tuple(self.regularized_layers),
        }
        for name, value in normalised.items():
            object.__setattr__(self, name, value)


#: Centre of FiLM-Ensemble's member initialisation.
InitCenter = Literal["affine", "zero"]


def check_init_center(init_center: Any) -> None:
    """Refuse an ``init_center`` other than ``"affine"`` or ``"zero"``."""
    _check_choice("init_center", init_center, ("affine", "zero"))


@dataclasses.dataclass(frozen=True)
class FiLMConfig(MethodConfig):
    """The settings of a FiLM-Ensemble
    (:class:`~torch_uncertainty_signorm.baselines.FiLMEnsemble`, whose arguments document each).

    Raises:
        ValueError: Naming the field and its valid values.
    """

    num_classes: int | None = None
    gain: float = 1.0
    init_center: InitCenter = "affine"
    head: str | None = None
    expand_at: str = "auto"

    def __post_init__(self) -> None:
        if self.num_classes is not None:
            check_integer("num_classes", self.num_classes)
        gain = check_positive_number("gain", self.gain, allow_zero=True)
        check_init_center(self.init_center)
        _check_name("head", self.head, "the name of the classifier or None", optional=True)
        _check_name("expand_at", self.expand_at, "'auto', 'input' or a module name")
        object.__setattr__(self, "gain", gain)


@dataclasses.dataclass(frozen=True)
class LoRAEnsembleConfig(MethodConfig):
    """The settings of a LoRA-Ensemble
    (:class:`~torch_uncertainty_signorm.baselines.LoRAEnsemble`, whose arguments document each);
    ``target_modules`` is kept as a string, a tuple of names or ``None``.

    Raises:
        ValueError: Naming the field and its valid values.
    """

    num_classes: int | None = None
    rank: int = 8
    alpha: float = 8.0
    target_modules: str | tuple[str, ...] | None = None
    init_gain: float = 10.0
    head: str | None = None
    expand_at: str = "auto"

    def __post_init__(self) -> None:
        rank = check_integer("rank", self.rank)
        alpha = check_positive_number("alpha", self.alpha)
        init_gain = check_positive_number("init_gain", self.init_gain, allow_zero=True)
        if self.num_classes is not None:
            check_integer("num_classes", self.num_classes)
        targets = self.target_modules
        if targets is not None:
            check_selection("target_modules", targets)
            targets = targets if isinstance(targets, str) else tuple(targets)
        _check_name("head", self.head, "the name of the classifier or None", optional=True)
        _check_name("expand_at", self.expand_at, "'auto', 'input' or a module name")
        for name, value in (("rank", rank), ("alpha", alpha), ("init_gain", init_gain),
                            ("target_modules", targets)):
            object.__setattr__(self, name, value)
