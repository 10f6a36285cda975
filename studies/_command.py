"""What every study shares: its command line, and training its runs (or keeping them)."""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


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
    parser.add_argument(
        "--parts", nargs="+", choices=list(parts), default=list(parts), help="which runs to train"
    )
    parser.add_argument(
        "--figures-only",
        action="store_true",
        help="only redraw the tables and figures from the kept runs",
    )
    parser.add_argument(
        "--runs-only", action="store_true", help="only train the runs, without tables and figures"
    )
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


def train_runs(
    runs: Sequence[Any],
    runs_dir: Path,
    jobs: int,
    *,
    kept: Callable[[Path], bool],
    record: Callable[[Any, Path, float], None],
) -> None:
    """Train every run not ``kept`` (its ``log_dir(runs_dir)`` already holds a finished run),
    ``jobs`` one-thread ``run.command(runs_dir)`` at a time, its output in ``command.log``;
    ``record(run, log_dir, seconds)`` writes what a finished run keeps. A failed run is reported
    and the others go on; the next call retries it."""

    def train(run: Any) -> str:
        log_dir = run.log_dir(runs_dir)
        if kept(log_dir):
            return f"kept {log_dir}"
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        log_dir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with open(log_dir / "command.log", "w") as log:
            done = subprocess.run(
                run.command(runs_dir), env=env, stdout=log, stderr=subprocess.STDOUT, check=False
            )
        seconds = time.perf_counter() - start
        if done.returncode:
            return f"FAILED {log_dir} (exit {done.returncode}, see its command.log)"
        record(run, log_dir, seconds)
        return f"{log_dir}: {seconds:.0f} s"

    with ThreadPoolExecutor(jobs) as pool:
        for line in pool.map(train, runs):
            print(line, flush=True)


def append_rows(path: Path, rows: Iterable[dict]) -> None:
    """Append each row to the CSV file ``path`` as soon as it is made (printed too), so that an
    interrupted sweep keeps what it ran; the header is written when the file is new, and a
    header that differs from the rows' fields is an error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = path.read_text().splitlines()[:1] if path.is_file() else []
    with path.open("a", newline="") as handle:
        writer = None
        for row in rows:
            print(row, flush=True)
            if writer is None:
                writer = csv.DictWriter(handle, fieldnames=list(row))
                if not header:
                    writer.writeheader()
                elif header[0] != ",".join(row):
                    raise ValueError(f"{path} has the columns {header[0]}, not {list(row)}.")
            writer.writerow(row)
            handle.flush()
