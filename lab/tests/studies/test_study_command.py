"""The studies' shared runner: kept runs are not retrained, a failed run is reported and the
others go on, and a finished run is recorded with its time."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from studies._command import train_runs


@dataclass(frozen=True)
class _Run:
    name: str
    code: str  # Python run as the run's command

    def log_dir(self, runs_dir: Path) -> Path:
        return runs_dir / self.name

    def command(self, runs_dir: Path) -> list[str]:
        return [sys.executable, "-c", self.code]


def test_kept_runs_are_skipped_failures_reported_and_finished_runs_recorded(tmp_path, capsys):
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "done").write_text("")
    runs = [
        _Run("kept", "raise SystemExit(3)"),
        _Run("fails", "raise SystemExit(3)"),
        _Run("trains", "import os; print(os.environ['OMP_NUM_THREADS'])"),
    ]
    recorded = []
    train_runs(
        runs,
        tmp_path,
        jobs=2,
        kept=lambda log_dir: (log_dir / "done").is_file(),
        record=lambda run, log_dir, seconds: recorded.append((run.name, seconds)),
    )

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"kept {tmp_path / 'kept'}"
    assert lines[1] == f"FAILED {tmp_path / 'fails'} (exit 3, see its command.log)"
    assert lines[2].startswith(f"{tmp_path / 'trains'}: ")
    assert [name for name, _ in recorded] == ["trains"] and recorded[0][1] > 0
    assert (tmp_path / "trains" / "command.log").read_text().strip() == "1"  # one thread
    assert not (tmp_path / "kept" / "command.log").exists()
