"""signorm-compare owns the runs it starts: a signal that stops it stops its run, which leaves
what resumes it; a SIGKILL of the comparison stops its run too (Linux); a run folder stays locked
while its run lives.

The run is a stand-in for the command (a script logging the signals it gets, then exiting as the
command does on SIGTERM or Ctrl-C): what is tested is the comparison's side of the process tree.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from signorm_lab.safety.run_lock import RunFolderBusyError, run_folder_lock

#: signorm-compare with its command replaced by the stand-in run given as the first argument.
COMPARE = """
import sys
from signorm_lab.reproduction import comparison
comparison._command = lambda: [sys.executable, sys.argv[1]]
sys.exit(comparison.main(sys.argv[2:]))
"""
#: A run: logs its process group and each signal it gets, exits 128 + the signal a second later.
RUN = """
import os, signal, sys, time
def stop(signum, frame):
    with open(os.environ["RUN_LOG"], "a") as file:
        file.write(f"got {signum}\\n")
    time.sleep(1)
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
with open(os.environ["RUN_LOG"], "a") as file:
    file.write(f"started {os.getpid()} in group {os.getpgid(0)}\\n")
while True:
    time.sleep(0.05)
"""


def _until(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (ended, not yet reaped by its parent, which is not this
    process) counts as ended. Its state is read from Linux's process table, ``/proc``: the
    tests using it are Linux's alone (``PR_SET_PDEATHSIG``)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize(
    ("sent", "run_gets", "code"),
    [
        (signal.SIGTERM, signal.SIGTERM, 143),
        (signal.SIGINT, signal.SIGINT, 130),
        (signal.SIGHUP, signal.SIGTERM, 129),
        (signal.SIGKILL, signal.SIGTERM, -9),
    ],
    ids=["SIGTERM", "SIGINT", "SIGHUP", "SIGKILL"],
)
def test_a_signal_to_the_comparison_stops_its_run_once_and_the_run_holds_its_lock(
    tmp_path, sent, run_gets, code
):
    (tmp_path / "r.yaml").write_text("trainer: {}\n")
    (tmp_path / "c.yaml").write_text("reference: a\nseeds: [0]\nmethods: {a: r.yaml, b: r.yaml}\n")
    (tmp_path / "run.py").write_text(RUN)
    log, out = tmp_path / "run.log", tmp_path / "out"
    args = ["--config", str(tmp_path / "c.yaml"), "--out", str(out)]
    compare = subprocess.Popen(
        [sys.executable, "-c", COMPARE, str(tmp_path / "run.py"), *args],
        env={**os.environ, "RUN_LOG": str(log)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _until(lambda: log.exists() and "started" in log.read_text())
        pid, group = map(int, log.read_text().split()[1::3])
        assert group == pid != compare.pid  # a group of its own: a Ctrl-C reaches it once
        compare.send_signal(sent)
        _until(lambda: "got" in log.read_text())
        if sent == signal.SIGKILL:  # the run stops, and holds the folder while it does
            with pytest.raises(RunFolderBusyError), run_folder_lock(out / "a" / "seed_0"):
                pass
        assert compare.wait(timeout=30) == code
        _until(lambda: not _alive(pid))
        assert log.read_text().splitlines()[1:] == [f"got {run_gets}"]  # once
        if sent != signal.SIGKILL:
            assert "running the same command again resumes the rest" in compare.stderr.read()
        with run_folder_lock(out / "a" / "seed_0"):
            pass  # released with the run
    finally:
        compare.kill()
        compare.wait()
