"""A user tests a checkpoint someone sent them: ``torch-uncertainty test --ckpt_path`` runs no code
from it, whether the code hides in a hyper-parameter string or in a pickle behind a URL.

Each attack is live: its payload would leave a marker file (imported module, built class,
unpickled ``__reduce__``). Checked: the command fails naming the value, no marker appears, nothing
is fetched or cached, and no file of the working folder changes. (``file://`` URLs are refused
alike: ``tests/test_bad_inputs.py``.)
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import threading
from pathlib import Path

import pytest
import torch
from journey_commands import EXPERIMENTS

from fixtures.cifar_files import run_command

DIGITS = EXPERIMENTS / "digits_signorm.yaml"
ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"


class _Payload:
    """Unpickling it runs ``code`` (what a load with ``weights_only=False`` does)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


def _digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _string_attack(work: Path, marker: Path) -> str:
    """A checkpoint whose ``format_batch_fn`` is a YAML class block naming a module on the path."""
    (work / "site" / "evil_module.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\n"
        "import torch\nclass Evil(torch.nn.Module):\n    pass\n"
    )
    torch.save(
        {
            "state_dict": {},
            "pytorch-lightning_version": "2.6.0",
            "hyper_parameters": {
                "_class_path": ROUTINE,
                "format_batch_fn": "{class_path: evil_module.Evil}",
            },
        },
        work / "sent.ckpt",
    )
    return "sent.ckpt"


def _pickle_attack(work: Path, marker: Path) -> None:
    torch.save(_Payload(f"open({str(marker)!r}, 'w').close()"), work / "served" / "sent.ckpt")


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["yaml string", "http url"])
def test_a_sent_checkpoint_runs_no_code(attack, command_env, tmp_path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    for folder in (work / "site", work / "served", outside / "home"):
        folder.mkdir(parents=True)
    marker = outside / "payload.ran"
    env = {
        **command_env,
        "HOME": str(outside / "home"),
        "TORCH_HOME": str(outside / "torch"),
        "XDG_CACHE_HOME": str(outside / "cache"),
        "PYTHONPATH": os.pathsep.join([str(work / "site"), command_env["PYTHONPATH"]]),
    }
    requests = []
    if attack == "yaml string":
        ckpt_path, refusal = _string_attack(work, marker), "is a string where a class is expected"
    else:
        _pickle_attack(work, marker)
        refusal = "is a URL: checkpoints are read from local files only"
    server = None
    if attack == "http url":

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                requests.append(args)

        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(work / "served"))
        )
        threading.Thread(target=server.serve_forever, daemon=True).start()
        ckpt_path = f"http://127.0.0.1:{server.server_address[1]}/sent.ckpt"
    before = _digest(work)
    try:
        done = run_command(
            [
                "test",
                "--config",
                DIGITS,
                "--ckpt_path",
                ckpt_path,
                "--trainer.enable_progress_bar=false",
            ],
            cwd=work,
            env=env,
        )
    finally:
        if server is not None:
            server.shutdown()
    assert done.returncode != 0
    assert refusal in done.stderr, done.stderr[-3000:]
    assert not marker.exists()
    assert not requests  # nothing fetched
    assert not (outside / "torch").exists()  # torch.hub cached nothing
    assert not list(outside.rglob("*.ckpt"))
    assert _digest(work) == before
