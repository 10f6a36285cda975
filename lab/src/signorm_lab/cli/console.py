"""The console of the ``torch-uncertainty`` command: libraries' messages that say nothing to do.

:func:`silence_library_noise` (called by :func:`~signorm_lab.cli.main`, the console
script, not by :func:`~signorm_lab.cli.cli_main`, which leaves a caller's warning
filters alone) drops, at their source, the messages every run printed that neither describe the
run nor ask anything of the user:

* torchmetrics' ``Metric `FPR95` will save all targets and predictions in buffer`` (every routine
  evaluating OOD builds FPR95; the buffer holds one score per test image);
* Lightning's ``💡 Tip:`` advertisements for litlogger and litmodels;
* torch's ``isinstance(treespec, LeafSpec)`` deprecation, raised inside Lightning's own code;
* jsonargparse's ``Dump of a value that does not round-trip: a ResNetStyle`` when the run's
  ``config.yaml`` is saved (TorchUncertainty's backbones read the string back);
* torch's ``'pin_memory' argument is set as true but no accelerator is found`` (TorchUncertainty's
  datamodules pin memory; on a CPU it is a no-op);
* Lightning's ``The number of training batches (N) is smaller than the logging interval`` of a
  short run (the epoch-level values are logged anyway).
* Lightning's ``You called self.log(...) but have no logger configured`` (once per metric) of a
  trainer built with ``logger=False``: the metrics still reach the printed tables;
* Lightning's ModelCheckpoint ``The dirpath has changed from ...`` when ``test --ckpt_path``
  restores a checkpoint into another run folder (only ``best_model_path`` is restored, as the
  test needs).

Every other warning prints as one line (``file:line: Category: message``), without the source
line that raised it (``rank_zero_warn(message)``, ``warnings.warn(*args, **kwargs)``).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import os
import re
import sys
import warnings

__all__ = [
    "DEBUG_VARIABLE",
    "NOISE_MESSAGES",
    "debugging",
    "one_line_parser_class",
    "silence_library_noise",
    "summarise_parse_error",
]

#: Regular expressions (``warnings.filterwarnings``' ``message``) of the warnings dropped.
NOISE_MESSAGES = (
    r"Metric `FPR95` will save all targets and predictions in buffer",
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    r"\s*Dump of a value that does not round-trip: a ResNetStyle",
    r"'pin_memory' argument is set as true but no accelerator is found",
    r"The number of training batches \(\d+\) is smaller than the logging interval",
    r"The dirpath has changed from",
    r".*but have no logger configured",
)


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("💡 Tip:")


def _one_line(message, category, filename, lineno, line=None) -> str:
    return _format_warning(message, category, filename, lineno, line="")


_format_warning = warnings.formatwarning


def silence_library_noise() -> None:
    """Install the filters and the one-line warning format described above (idempotent)."""
    warnings.formatwarning = _one_line
    for message in NOISE_MESSAGES:
        warnings.filterwarnings("ignore", message=message)
    for name in (
        "lightning.pytorch.utilities.rank_zero",
        "lightning.fabric.utilities.rank_zero",
        "lightning.pytorch",
        "lightning",
    ):
        log = logging.getLogger(name)
        if not any(isinstance(f, _DropTips) for f in log.filters):
            log.addFilter(_DropTips())


# ---------------------------------------------------------------- configuration errors
_NOT_ACCEPTED = re.compile(r"Option '([^']+)' is not accepted")
_CLASS_PATH = re.compile(r"Problem with given class_path '([^']+)'")
_PARSER_KEY = re.compile(r'Parser key "([^"]+)"')
_UNRECOGNIZED = re.compile(r"Unrecognized arguments: (.+)")
_NOISE_LINES = re.compile(
    r"^\s*(- )?(Does not validate against any of the Union subtypes|"
    r"Subtypes:|Errors:|Given value type:|Given value:|"
    r"Expected a <class 'NoneType'>)"
)


def _parameters(class_path: str) -> list[str]:
    """The keyword parameters of the class or function ``class_path`` (empty if unknown)."""
    module, _, name = class_path.rpartition(".")
    try:
        target = getattr(importlib.import_module(module), name)
        return [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
    except (ImportError, AttributeError, TypeError, ValueError):
        return []


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def summarise_parse_error(message: str, options: list[str] | None = None) -> str:
    """One line for jsonargparse's error ``message`` (a nested Union report ending in the whole
    given value): the innermost reason, where it is, and, for a misspelt option of a class or a
    misspelt command-line option (``options``, the parser's), the closest valid name."""
    lines = message.splitlines()
    for index, line in enumerate(lines):
        if (found := _NOT_ACCEPTED.search(line)) is not None:
            keys = [m.group(1) for text in lines[:index] if (m := _PARSER_KEY.search(text))]
            classes = [m.group(1) for text in lines[:index] if (m := _CLASS_PATH.search(text))]
            where = ".init_args.".join(keys) if keys else ""
            owner = classes[-1] if classes else ""
            text = (
                (f"{where}: " if where else "") + found.group(0) + (f" by {owner}" if owner else "")
            )
            parameters = _parameters(owner) if owner else []
            hint = _did_you_mean(found.group(1), parameters)
            if not hint and "model" in parameters and where:
                # A wrapper (σN-Ens, FiLM, LoRA): the option is likely the wrapped model's.
                hint = (
                    f"; {owner.rpartition('.')[2]} wraps a model: its options are spelt "
                    f"--{where}.init_args.model.init_args.{found.group(1)}"
                )
            return text + hint
    for line in lines:
        if (found := _UNRECOGNIZED.search(line)) is not None:
            first = found.group(1).split()[0]
            name = first.split("=", 1)[0]
            return found.group(0) + _did_you_mean(
                name, [o for o in options or () if o.startswith("--")]
            )
    kept = [
        " ".join(line.split()) for line in lines if line.strip() and not _NOISE_LINES.match(line)
    ]
    return " ".join(kept)


#: Set to ``1`` to have the commands print the whole traceback of a refusal, not its one line.
DEBUG_VARIABLE = "SIGNORM_DEBUG"


def debugging() -> bool:
    """Whether :data:`DEBUG_VARIABLE` asks for whole tracebacks (any value but ``""``/``0``)."""
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def one_line_parser_class(raising: bool = False) -> type:
    """Lightning's argument parser whose errors are one line (:func:`summarise_parse_error`)
    under the ``torch-uncertainty: invalid configuration:`` prefix, instead of the usage block,
    the nested report and the whole given value; with ``exit_on_error=False`` (or jsonargparse's
    debug mode) it raises as Lightning's does. ``raising``: the one line is raised as a
    ``ValueError`` instead (for a command reporting it with its own name)."""
    from jsonargparse._common import debug_mode_active
    from lightning.pytorch.cli import LightningArgumentParser

    class OneLineErrorParser(LightningArgumentParser):
        def error(self, message: str, ex: Exception | None = None):
            if not self.exit_on_error or debug_mode_active():
                return super().error(message, ex)
            parser = getattr(ex, "subcommand_parser", None) or self
            options = [s for action in parser._actions for s in action.option_strings]
            if raising:
                raise ValueError(summarise_parse_error(message, options))
            sys.stderr.write(
                "torch-uncertainty: invalid configuration: "
                f"{summarise_parse_error(message, options)} "
                f"({parser.prog.replace(' [options]', '')} --help lists the "
                "options)\n"
            )
            self.exit(2)

    return OneLineErrorParser
