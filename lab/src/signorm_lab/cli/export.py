"""``python -m signorm_lab.cli.export``: checkpoint + recipe → export directory.

Export a trained σNorm-Ensemble as safetensors, and each member as a plain model
(:mod:`signorm_lab.export`, which never imports the command). The command reads
the recipe with the ``torch-uncertainty`` command's own parser
(:func:`~signorm_lab.cli.recipe_parsing.parse_recipe`), so it builds the model that
command trained.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

from torch_uncertainty_signorm.signorm.checkpoint_tau import checkpoint_tau

from ..export.spec import as_data, ensemble_from_spec, portable
from ..export.writing import export_ensemble, output_directory
from ..safety import allowlist
from ..safety.checkpoints import backbone_state, local_file, read_state_file
from ..safety.export_spec import check_ensemble_spec
from ..safety.files import read_once
from ..safety.parser_reads import checked_parser_reads
from .console import debugging
from .recipe_bases import recipe_chain
from .recipe_parsing import parse_recipe

__all__ = ["main"]

_DESCRIPTION = "Export a trained σNorm-Ensemble as safetensors, and each member as a plain model."


def _recipe_routine(
    recipe: Path, overrides: Sequence[str], allowed: Sequence[str]
) -> tuple[dict, Any]:
    """The recipe's model block as the command parses it, allow-listed before and after: the
    whole recipe (every file of its chain, every block, in either format) before the parser
    imports anything (:func:`~signorm_lab.safety.allowlist.check_recipe`), the model
    block again after; and the routine's ``target_diversity``.

    Each file is read once (:func:`~signorm_lab.safety.files.read_once`): the parser gets the
    bytes that were checked, even if a file is replaced in between."""
    with read_once():
        return _checked_routine(recipe, overrides, allowed)


def _checked_routine(
    recipe: Path, overrides: Sequence[str], allowed: Sequence[str]
) -> tuple[dict, Any]:
    if not recipe.is_file():
        if recipe.exists():
            raise ValueError(
                f"--config {str(recipe)!r} is not a regular file (a named pipe, a "
                f"device, a folder); expected a recipe (a YAML file)."
            )
        raise FileNotFoundError(f"--config {str(recipe)!r} does not exist.")
    recipe_allowed = allowlist.RECIPE_CLASS_PATHS | frozenset(allowed)
    for path, read in recipe_chain(recipe):  # the recipe and each of its base files, whole,
        raw = allowlist.current_class_paths(read)
        allowlist.check_recipe(raw, str(path), recipe_allowed, Path(path).parent)  # unparsed
        for key in ("routine", "init_args", "model"):
            raw = raw.get(key) if isinstance(raw, Mapping) else None
        if isinstance(raw, Mapping):  # refuse before the parser imports any class path
            try:
                check_ensemble_spec(raw, allowed)
            except ValueError as error:
                raise ValueError(f"{path}: {error}") from None
    # every file the parser opens (the recipe, its bases, the files its values name at any
    # depth, from the folder of the file naming them) is read here and checked as it is read
    with checked_parser_reads(recipe_allowed) as refusals:
        try:
            parsed = parse_recipe(recipe, overrides, raising=True)
        except (Exception, SystemExit) as error:
            if refusals:  # the parser may bury the refusal in a longer error of its own
                raise refusals[0] from None
            if type(error) is ValueError:  # the parser's own one line: say which recipe
                raise ValueError(
                    f"--config {str(recipe)!r} is not a valid recipe for the "
                    f"torch-uncertainty command: {error}"
                ) from None
            raise
    if refusals:
        raise refusals[0]
    routine = parsed.get("routine")
    block = routine.get("init_args", {}).get("model") if routine is not None else None
    if block is None or "class_path" not in block:
        raise ValueError(
            f"--config {str(recipe)!r} has no routine.init_args.model block with a class_path; "
            f"pass a recipe of experiments/ or the config.yaml saved next to the run's logs."
        )
    block = block.as_dict()
    check_ensemble_spec(block, allowed)
    return block, routine.get("init_args", {}).get("target_diversity")


def main(argv: Sequence[str] | None = None) -> Path | None:
    """``signorm-export`` (or ``python -m signorm_lab.cli.export``): checkpoint +
    recipe → export directory (``None`` with ``--print_config``, which exports nothing)."""
    parser = _OneLineParser(
        prog="signorm-export",
        description=_DESCRIPTION,
        epilog="Other arguments override the recipe as on the torch-uncertainty command, e.g. "
        "--routine.init_args.model.init_args.num_estimators=2.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        action=_GivenOnce,
        help="The recipe (or the run's saved config.yaml) that built the model; one only.",
    )
    parser.add_argument(
        "--ckpt_path",
        type=Path,
        required=True,
        help="The Lightning checkpoint of the trained routine.",
    )
    parser.add_argument("--output", type=Path, required=True, help="The export directory.")
    parser.add_argument(
        "--members", action="store_true", help="Also export each member as a plain model."
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="Replace the export in an --output directory that is not empty.",
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="CLASS_PATH",
        help="Trust this exact class path too (loading needs it as well).",
    )
    parser.add_argument(
        "--print_config",
        action="store_true",
        help="Print the resolved configuration (these arguments, and the recipe's model block "
        "with the overrides applied, as the export will hold it) and exit without reading the "
        "checkpoint or writing anything, as --print_config does on the torch-uncertainty "
        "command.",
    )
    args, overrides = parser.parse_known_args(argv)
    if more := [arg for arg in overrides if arg.startswith("-c") and arg != "--"]:
        parser.error(
            f"{more[0]!r}: signorm-export reads one recipe, given by --config (each of its "
            f"files checked before parsing); merge the others into it, or give their values "
            f"as --key=value overrides"
        )
    if args.print_config:
        _print_config(args, overrides)
        return None
    with _sigterm_as_exit():  # SIGTERM unwinds: a partial export folder is removed
        return _export(args, overrides)


def _print_config(args: argparse.Namespace, overrides: Sequence[str]) -> None:
    """``--print_config``: the export's arguments and the model block it would write, as YAML."""
    block, target_diversity = _recipe_routine(
        args.config, overrides, [*args.allow, *sorted(allowlist.ARGUMENT_CLASS_PATHS)]
    )
    resolved = {
        "config": str(args.config),
        "ckpt_path": str(args.ckpt_path),
        "output": str(args.output),
        "members": args.members,
        "overwrite": args.overwrite,
        "allow": list(args.allow),
        "target_diversity": target_diversity,
        "model": portable(as_data(block)),
    }
    print(yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True), end="")


class _GivenOnce(argparse.Action):
    """An option given at most once (argparse would keep the last silently)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(
                f"{option_string} is given twice ({getattr(namespace, self.dest)}, {values}); "
                f"signorm-export reads one recipe: merge them into one"
            )
        setattr(namespace, self.dest, values)


class _OneLineParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, as the command's other refusals."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the arguments)\n")


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM raises ``SystemExit(143)`` while the block runs (in the main thread), so that
    the export's temporary folder is removed and the previous export left as it was."""

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _export(args: argparse.Namespace, overrides: Sequence[str]) -> Path:
    output_directory(args.output, args.overwrite)  # before any work
    # A run's saved config.yaml spells out defaults such as
    # `activation_fn: torch.nn.functional.relu`; they are accepted here and dropped from the
    # export when they are the default (as_data).
    block, target_diversity = _recipe_routine(
        args.config, overrides, [*args.allow, *sorted(allowlist.ARGUMENT_CLASS_PATHS)]
    )
    spec = portable(as_data(block))
    saved = read_state_file(local_file(args.ckpt_path, "ckpt_path"))  # once, weights_only=True
    # The model's size is bounded before it is built: its layer counts
    # (check_ensemble_spec), then its tensors, allocated on the meta device (no memory, no
    # initialisation), which must be the checkpoint's, key for key and shape for shape.
    with torch.device("meta"):
        planned = ensemble_from_spec(spec, args.allow)
    try:
        state = backbone_state(planned, saved, args.ckpt_path)
    except ValueError as error:
        raise ValueError(
            f"{error} For export, --ckpt_path must come from a run of --config "
            f"{str(args.config)!r} (same backbone and num_estimators); nothing was built."
        ) from None
    del planned
    model = ensemble_from_spec(spec, args.allow)
    model.load_state_dict(state)
    where, controlled = f"--ckpt_path {args.ckpt_path}", target_diversity is not None
    if (tau := checkpoint_tau(saved, model.tau, where, controlled)) is not None:
        model.set_tau(tau)  # the export records the τ the run ended with
    directory = export_ensemble(
        model.eval(),
        spec,
        args.output,
        members=args.members,
        extra_class_paths=args.allow,
        overwrite=args.overwrite,
    )
    print(f"Exported {model.num_estimators} members to {directory}")
    return directory


def command(argv: Sequence[str] | None = None) -> int:
    """The ``signorm-export`` console script: :func:`main`, exit status 0. Installed as a
    script, it runs before anything in the working directory can be imported in the package's
    place (``python -m`` looks the package up there first).

    A refusal (an invalid or unsafe recipe, checkpoint or ``--output``) is one line on standard
    error, ``signorm-export: <what was given and what is valid>``, exit status 1; the whole
    traceback only with ``SIGNORM_DEBUG=1``
    (:data:`~signorm_lab.cli.console.DEBUG_VARIABLE`).
    """
    try:
        main(argv)
    except (ValueError, TypeError, OSError, shutil.Error, argparse.ArgumentError) as error:
        if debugging():
            raise
        print(f"signorm-export: {_one_line(error)}", file=sys.stderr)
        return 1
    return 0


def _one_line(error: BaseException) -> str:
    """``error``'s message on one line (an OS error's own words with the path it names)."""
    if isinstance(error, OSError) and error.strerror and error.filename is not None:
        text = f"'{error.filename}': {error.strerror}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(command())
