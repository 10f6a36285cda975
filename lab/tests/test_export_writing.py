"""Writing an export where the disk or the folder refuses it (one line naming the folder given,
the earlier export left whole), and ``--overwrite`` keeping what the folder was: its mode, owner
and group, and every file the export did not write."""

from __future__ import annotations

import errno
import os
import re
import stat

import pytest
from safetensors import SafetensorError

from fixtures.backbones import tiny_signorm_spec
from signorm_lab.export import build_model, export_ensemble, load_ensemble, writing

SPEC = tiny_signorm_spec(2, style="cifar")
FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space" })'


@pytest.fixture(scope="module")
def model():
    return build_model(SPEC).eval()


def _failing(error: BaseException, after: int = 0):
    """A ``_save`` failing with ``error`` once ``after`` files were saved."""
    saved, save = [], writing._save

    def save_or_fail(module, path, metadata=None):
        if len(saved) >= after:
            if isinstance(error, OSError):
                error.filename = str(path)  # the temporary folder's file, as the OS names it
            raise error
        saved.append(path)
        save(module, path, metadata)

    return save_or_fail


@pytest.mark.parametrize(
    ("error", "after", "said"),
    [
        (SafetensorError(FULL), 0, r"No space left on device\); .* free space on its disk"),
        (OSError(errno.EFBIG, "File too large"), 1, r"File too large\); .* file size limit"),
        (OSError(errno.ENOSPC, "No space left on device"), 2, r"No space left on device"),
        (PermissionError(errno.EACCES, "Permission denied"), 0, r"give a folder you may write to"),
        (OSError(errno.EROFS, "Read-only file system"), 0, r"give a folder you may write to"),
    ],
    ids=["safetensors full", "EFBIG on a member", "ENOSPC", "not writable", "read-only fs"],
)
def test_a_write_that_fails_is_one_line_naming_the_folder_given(
    error, after, said, model, tmp_path, monkeypatch
):
    out = tmp_path / "export"
    export_ensemble(model, SPEC, out)
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    monkeypatch.setattr(writing, "_save", _failing(error, after))
    with pytest.raises(OSError, match=rf"^'{out}': the export could not be written \(") as caught:
        export_ensemble(model, SPEC, out, members=True, overwrite=True)
    message = str(caught.value)
    assert re.search(said, message), message
    assert ".partial" not in message and "\n" not in message
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["export"]  # nothing left beside


def test_the_command_says_it_in_one_line(model, tmp_path, monkeypatch, capsys):
    from signorm_lab.cli import export as export_command

    def fail(args, overrides):
        export_ensemble(model, SPEC, args.output)

    monkeypatch.setattr(writing, "_save", _failing(SafetensorError(FULL)))
    monkeypatch.setattr(export_command, "_export", fail)
    argv = ["--config", "r.yaml", "--ckpt_path", "c.ckpt", "--output", str(tmp_path / "out")]
    assert export_command.command(argv) == 1
    assert capsys.readouterr().err == (
        f"signorm-export: '{tmp_path / 'out'}': the export could not be written (No space left "
        f"on device); nothing was written there and an earlier export in it is left as it was: "
        f"free space on its disk (or raise the file size limit), or give another folder.\n"
    )


def _other_group() -> int:
    """A group other than this process's that it may give a folder (root: any)."""
    if os.geteuid() == 0:
        return 65534  # nogroup
    others = [group for group in os.getgroups() if group != os.getegid()]
    if not others:
        pytest.skip("this user belongs to one group only")
    return others[0]


@pytest.mark.parametrize("mode", [0o2750, 0o555, 0o700])
def test_overwrite_keeps_the_folders_mode_owner_and_group(mode, model, tmp_path):
    out = tmp_path / "export"
    export_ensemble(model, SPEC, out)
    group = _other_group()
    owner = 65534 if os.geteuid() == 0 else os.geteuid()
    os.chown(out, owner, group)
    os.chmod(out, mode)
    export_ensemble(model, SPEC, out, members=True, overwrite=True)
    status = out.stat()
    assert (stat.S_IMODE(status.st_mode), status.st_uid, status.st_gid) == (mode, owner, group)
    if mode & stat.S_ISGID:  # files written into a setgid folder take its group
        assert {path.stat().st_gid for path in out.iterdir()} == {group}
    assert load_ensemble(out).num_estimators == 2


def test_overwrite_removes_only_the_names_an_export_writes(model, tmp_path):
    """``member_٣`` (an Arabic-Indic digit) or ``member_3.safetensors.bak`` are a user's files;
    ``member_7.safetensors`` is a name exports write, so an earlier export's."""
    out = tmp_path / "export"
    export_ensemble(model, SPEC, out, members=True)
    users = ["member_٣.safetensors", "member_３.safetensors", "member_3.safetensors.bak"]
    for name in [*users, "member_7.safetensors"]:
        (out / name).write_text("the user's")
    export_ensemble(model, SPEC, out, overwrite=True)
    assert sorted(path.name for path in out.iterdir()) == sorted(
        ["config.json", "ensemble.safetensors", *users]
    )
    assert all((out / name).read_text() == "the user's" for name in users)
