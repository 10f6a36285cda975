"""The command line every study shares: train the runs (or keep them), then write the tables."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path


def study_command(
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
    out: str,
    parts: Sequence[str],
    run_study: Callable[[Path, int, Sequence[str]], None],
    write_artefacts: Callable[[Path, Path], str],
) -> str:
    """Parse ``argv``; train the chosen ``parts`` into ``<out>/runs`` (kept runs are kept) and
    write the study's artefacts from the runs; return (and print) the summary text."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", default=out, help="output folder")
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at a time")
    parser.add_argument("--parts", nargs="+", choices=list(parts), default=list(parts),
                        help="which runs to train")
    parser.add_argument("--figures-only", action="store_true",
                        help="only redraw the tables and figures from the kept runs")
    parser.add_argument("--runs-only", action="store_true",
                        help="only train the runs, without tables and figures")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    folder = Path(args.out)
    if not args.figures_only:
        run_study(folder / "runs", args.jobs, args.parts)
    if args.runs_only:
        return ""
    text = write_artefacts(folder / "runs", folder)
    print(text)
    return text
