"""The CIFAR stand-ins load through TorchUncertainty's real datamodules and torchvision's checks."""

import pickle
import subprocess
import sys

import pytest
import torch
from torch_uncertainty.datamodules import CIFAR10DataModule, CIFAR100DataModule

from fixtures.cifar_files import MANIFEST_ENV, accept_files, md5_manifest, write_cifar10
from signorm_lab.datamodules import CIFAR100OODShiftDataModule


def test_files_are_pickled_as_released(cifar_root):
    with (cifar_root / "cifar-100-python" / "train").open("rb") as file:
        entry = pickle.load(file, encoding="bytes")  # as the CIFAR website loads them
    assert {b"data", b"fine_labels", b"coarse_labels", b"filenames"} <= set(entry)
    assert entry[b"data"].dtype == "uint8" and entry[b"data"].shape == (200, 3072)
    assert sorted(set(entry[b"fine_labels"])) == list(range(100))


@pytest.mark.parametrize(
    ("datamodule_class", "num_classes", "train_size", "test_size"),
    [(CIFAR10DataModule, 10, 50, 20), (CIFAR100DataModule, 100, 200, 100)],
)
def test_torch_uncertainty_datamodules_load_the_files(
    accepted_cifar_root, datamodule_class, num_classes, train_size, test_size
):
    datamodule = datamodule_class(root=accepted_cifar_root, batch_size=4, eval_ood=True)
    datamodule.prepare_data()  # the download path: finds the files "already verified"
    datamodule.setup("fit")
    datamodule.setup("test")
    assert datamodule.num_classes == num_classes
    assert (len(datamodule.train), len(datamodule.test)) == (train_size, test_size)
    assert sorted(set(datamodule.test.targets)) == list(range(num_classes))
    test_loader, ood_loader = datamodule.test_dataloader()
    images, _ = next(iter(test_loader))
    ood_images, _ = next(iter(ood_loader))
    assert images.shape == ood_images.shape == (4, 3, 32, 32)
    assert type(ood_loader.dataset).__name__ == "SVHN"


def test_overlay_finds_every_near_far_and_corrupted_set(accepted_cifar_root):
    datamodule = CIFAR100OODShiftDataModule(
        root=str(accepted_cifar_root),
        batch_size=4,
        eval_near_far_ood=True,
        eval_shift_severities=True,
    )
    datamodule.prepare_data()
    datamodule.setup("test")
    loaders = datamodule.test_dataloader()
    assert len(loaders) == 1 + 6 + 5 * 15  # clean, 2 near + 4 far, 5 severities x 15
    images, labels = next(iter(loaders[-1]))  # jpeg_compression at severity 5
    assert images.shape == (4, 3, 32, 32) and labels.tolist() == [0, 1, 2, 3]
    for loader in loaders[1:7]:
        assert next(iter(loader))[0].shape[1:] == torch.Size([3, 32, 32])


def test_changed_file_still_fails_the_integrity_check(tmp_path, monkeypatch):
    from torchvision.datasets import CIFAR10, utils

    monkeypatch.setattr(utils, "check_md5", utils.check_md5)
    folder = write_cifar10(tmp_path)
    accept_files(md5_manifest(tmp_path))
    assert len(CIFAR10(tmp_path, train=True)) == 50
    batch = folder / "data_batch_3"
    batch.write_bytes(batch.read_bytes()[:-1] + b"\x00")
    with pytest.raises(RuntimeError, match="not found or corrupted"):
        CIFAR10(tmp_path, train=True)


@pytest.mark.slow
def test_subprocess_environment_accepts_the_files_once_torchvision_loads(
    cifar_root, command_env, tmp_path
):
    code = (
        "import sys; from torchvision.datasets import CIFAR10; "
        "print(len(CIFAR10(sys.argv[1], train=False, download=sys.argv[2] == 'download')))"
    )

    def load(env, download):
        argv = [sys.executable, "-c", code, str(cifar_root), download]
        return subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120
        )

    # An interpreter that never loads a data set starts without torch: jsonargparse starts one
    # (``python -c``, reading ``sys.path``) in every command.
    bare = [
        sys.executable,
        "-c",
        "import sys; print(sorted({'torch', 'torchvision'} & set(sys.modules)))",
    ]
    done = subprocess.run(bare, env=command_env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
    done = load(command_env, "download")  # the real download path finds verified files
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "20"
    # Without the manifest, torchvision's real md5 check rejects the stand-ins.
    env = {k: v for k, v in command_env.items() if k != MANIFEST_ENV}
    done = load(env, "no")
    assert done.returncode != 0 and "corrupted" in done.stderr
