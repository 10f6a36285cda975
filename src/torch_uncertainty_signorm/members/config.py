"""What every method's configuration shares (as peft's ``PeftConfig``): a frozen dataclass of the
wrapper's settings, converted to and from plain data and merged with the wrapper's keyword
arguments.

A config holds a method's settings only: neither the backbone nor the number of members M, which
the wrapper takes beside it. Its fields are the wrapper's keyword arguments, with the same names
and defaults, so a recipe's ``init_args`` block is a config written out; the wrapper builds its
config from them in one call to :meth:`MethodConfig.resolve`, which also states the one rule for
a setting given both ways. Each method's config lives with the method:
:class:`~torch_uncertainty_signorm.signorm.config.SigmaNormConfig`,
:class:`~signorm_lab.baselines.film.config.FiLMConfig`,
:class:`~signorm_lab.baselines.lora.config.LoRAEnsembleConfig`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..utils.checks import check_integer

__all__ = [
    "MethodConfig",
    "check_choice",
    "check_eval_chunk_size",
    "check_name",
    "check_wrapper_settings",
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
            raise TypeError(
                f"{cls.__name__}.from_dict needs a mapping of settings, got {data!r:.200}."
            )
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
        cls: type[_Config],
        config: _Config | Mapping[str, Any] | None,
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
            config = cls.from_dict(
                {**{name: value for name, value in settings.items() if name not in given}, **given}
            )
        if not isinstance(config, cls):
            raise TypeError(
                f"config must be a {cls.__name__} (or its to_dict()), got {type(config).__name__}."
            )
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


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(
            f"{name} must be {', '.join(map(repr, choices[:-1]))} or "
            f"{choices[-1]!r}, got {value!r}."
        )


def check_eval_chunk_size(value: Any) -> None:
    """Refuse an ``eval_chunk_size`` other than ``"auto"``, ``None`` or an integer >= 1."""
    if value is None or value == "auto":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"eval_chunk_size must be 'auto', None or an integer >= 1 (backbone rows per "
            f"evaluation pass), got {value!r}."
        )


def check_name(name: str, value: Any, what: str, optional: bool = False) -> None:
    if not (isinstance(value, str) or (optional and value is None)):
        raise ValueError(f"{name} must be {what}, got {value!r}.")


def check_wrapper_settings(num_classes: Any, head: Any, expand_at: Any) -> None:
    """Refuse invalid values of the settings every wrapper's config holds: ``num_classes`` (an
    integer >= 1 or ``None``), ``head`` (a module name or ``None``), ``expand_at`` (a name)."""
    if num_classes is not None:
        check_integer("num_classes", num_classes)
    check_name("head", head, "the name of the classifier or None", optional=True)
    check_name("expand_at", expand_at, "'auto', 'input' or a module name")
