"""Measure the three diversity controls (τ, member_spread, target_diversity) through the command.

    python tools/controlled_diversity.py step0   --out studies/results/controlled_diversity
    python tools/controlled_diversity.py spread  --out studies/results/controlled_diversity \
        [--seeds 0 1 2]
    python tools/controlled_diversity.py targets --out studies/results/controlled_diversity \
        [--seeds 0 1 2]

``step0``: the change ``member_spread`` makes before any training, to the members' features and
logits and to their means, on the packaged MiniLM converted to σN-Ens and on a ResNet-18 trained
on digits and converted (in-process, no training of σN-Ens). ``spread``: the tweets quickstart
and the CIFAR-10 FineTune recipe (reduced width, on CIFAR stand-in files) run at several spreads;
where σNorm-cos ends. ``targets``: ``target_diversity`` 0.3, 0.6 and 0.9 on the digits quickstart
(from scratch), the tweets quickstart (converted MiniLM) and the CIFAR-10 FineTune recipe; τ and
σNorm-cos per step, whether each target is reached and held over the last 20 % of steps. Runs go
through ``torch-uncertainty fit`` (one thread each) and are skipped when their ``metrics.csv``
exists, so an interrupted measurement resumes. The CIFAR stand-ins are the test suite's
(``tests/fixtures/cifar_files.py``: random pixels in torchvision's on-disk format).
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
SPREADS = (0.0, 0.1, 0.3, 0.5, 1.0)
TARGETS = (0.3, 0.6, 0.9)
TOLERANCE = 0.05
SPREAD_ARG = "--routine.init_args.model.init_args.member_spread"
#: Converted models start identical, where the controller has nothing to measure but the heads'
#: tiny asymmetry: the target runs give them the transformer recipes' spread.
TARGET_SPREAD = 0.3
#: Reduced-width CIFAR FineTune: the single model and its conversion at 1/8 width on 500
#: stand-in images (batch 32): 16 steps an epoch, the recipe's 25 epochs = 400 steps.
CIFAR_WIDTH = "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"
SINGLE_WIDTH = "--routine.init_args.model.init_args.width_multiplier=0.125"


def _command_env(site_dir: Path | None = None, manifest: Path | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
    }
    if site_dir is not None:
        sys.path.insert(0, str(REPO / "tests"))
        from fixtures.cifar_files import make_command_env

        env = make_command_env(site_dir, manifest)
    return env


def _cifar(work: Path) -> tuple[Path, dict[str, str]]:
    """CIFAR-10 stand-in files (50 train and 10 test images per class, SVHN for OOD) and the
    environment in which torchvision accepts them."""
    sys.path.insert(0, str(REPO / "tests"))
    from fixtures.cifar_files import (
        md5_manifest,
        write_cifar10,
        write_sitecustomize,
        write_svhn_test,
    )

    root = work / "cifar"
    if not (root / "cifar-10-batches-py").is_dir():
        write_cifar10(root, train_per_class=50, test_per_class=10)
        write_svhn_test(root)
    manifest = work / "md5.json"
    manifest.write_text(json.dumps(md5_manifest(root)))
    site = write_sitecustomize(work / "site")
    return root, _command_env(site, manifest)


def _fit(args: list[str], log_dir: Path, env: dict[str, str]) -> Path:
    """``torch-uncertainty fit`` logging per step to a CSVLogger under ``log_dir``; returns the
    run folder (skipped when it already holds a complete run)."""
    done = log_dir / "version_0" / "results.csv"
    if done.is_file():
        return done.parent
    command = [
        str(Path(sys.executable).parent / "torch-uncertainty"),
        "fit",
        *map(str, args),
        "--trainer.log_every_n_steps=1",
        "--trainer.enable_progress_bar=false",
        "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
        f"--trainer.logger.init_args.save_dir={log_dir.parent}",
        f"--trainer.logger.init_args.name={log_dir.name}",
    ]
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "command.log").open("w") as log:
        subprocess.run(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    return done.parent


def _per_step(run: Path) -> list[dict[str, float]]:
    """τ, σNorm-cos (all and regularized layers) per training step of a CSVLogger run."""
    rows = []
    with (run / "metrics.csv").open() as file:
        for row in csv.DictReader(file):
            if row.get("train/tau"):
                rows.append(
                    {
                        "step": int(row["step"]),
                        "tau": float(row["train/tau"]),
                        "cos_regularized": float(row["train/signorm_cos_regularized"]),
                        "cos": float(row["train/signorm_cos"]),
                    }
                )
    return rows


def _results(run: Path) -> dict[str, float]:
    with (run / "results.csv").open() as file:
        row = list(csv.DictReader(file))[-1]
    return {
        "Acc": 100 * float(row["test/cls/Acc"]),
        "NLL": float(row["test/cls/NLL"]),
        "test_cos_regularized": float(row["test/div/signorm_cos_regularized"]),
        "MI": float(row["test/ens_MI"]),
    }


def _write(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _markdown(rows: list[dict], path: Path) -> None:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values())
            + " |"
        )
    path.write_text("\n".join(lines) + "\n")


def _aggregate(rows: list[dict], keys: list[str], values: list[str]) -> list[dict]:
    """Mean ± sample std of ``values`` over the seeds of each ``keys`` group, in row order."""
    import statistics

    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    summary = []
    for key, members in groups.items():
        entry = dict(zip(keys, key, strict=True)) | {"seeds": len(members)}
        for value in values:
            numbers = [float(m[value]) for m in members]
            spread = statistics.stdev(numbers) if len(numbers) > 1 else 0.0
            entry[value] = f"{statistics.fmean(numbers):.4f} ± {spread:.4f}"
        summary.append(entry)
    return summary


# -- step 0 -----------------------------------------------------------------------------------


def _step0_rows(name: str, base, inputs) -> list[dict]:
    import torch

    M = base.num_estimators
    base.eval()
    with torch.no_grad():
        features = base.forward_features(inputs).unflatten(0, (M, -1))
        logits = base(inputs).unflatten(0, (M, -1))
    rows = []
    for spread in SPREADS[1:]:
        model = copy.deepcopy(base)
        torch.manual_seed(0)
        for layer in model.signorm_layers(regularized_only=True).values():
            layer.spread_members(spread)
        with torch.no_grad():
            new_features = model.forward_features(inputs).unflatten(0, (M, -1))
            new_logits = model(inputs).unflatten(0, (M, -1))
            cos = float(
                __import__("torch_uncertainty_signorm").signorm_cosine(
                    model.importances(regularized_only=True)
                )
            )

        def rel(a, b):
            return float((a - b).norm() / b.norm())

        rows.append(
            {
                "model": name,
                "member_spread": spread,
                "signorm_cos_regularized": cos,
                "member_features": max(rel(new_features[m], features[m]) for m in range(M)),
                "mean_features": rel(new_features.mean(0), features.mean(0)),
                "member_logits": max(rel(new_logits[m], logits[m]) for m in range(M)),
                "mean_logits": rel(new_logits.mean(0), logits.mean(0)),
            }
        )
    return rows


def step0(out: Path) -> None:
    """Relative step-0 changes (largest over members, and of the members' mean) per spread."""
    import torch
    from torch_uncertainty.models.classification import resnet

    from signorm_lab.datamodules import DigitsDataModule, TweetsDataModule
    from signorm_lab.models.packaged import minilm_classifier
    from torch_uncertainty_signorm import signorm_ensemble

    torch.manual_seed(0)
    tweets = TweetsDataModule(
        batch_size=32, max_length=32, train_size=192, val_size=64, test_size=192
    )
    tweets.setup("test")
    batch = next(iter(tweets.test_dataloader()[0]))[0]
    minilm = signorm_ensemble(
        minilm_classifier(num_classes=3), 4, pretrained=True, regularized_layers="transformer"
    )
    rows = _step0_rows("MiniLM (tweets)", minilm, batch)

    digits = DigitsDataModule(batch_size=64)
    digits.setup("fit")
    single = resnet(1, 10, 18, style="cifar", width_multiplier=0.25)
    optimizer = torch.optim.SGD(single.parameters(), lr=0.05, momentum=0.9)
    for _ in range(5):  # a trained single model to convert (5 epochs, as the quickstart)
        for inputs, targets in digits.train_dataloader():
            loss = torch.nn.functional.cross_entropy(single(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    single.eval()
    converted = signorm_ensemble(single, 4, pretrained=True, regularized_layers="resnet18")
    digits.setup("test")
    inputs = next(iter(digits.test_dataloader()[0]))[0]
    rows += _step0_rows("ResNet-18 (digits, trained)", converted, inputs)
    _write(rows, out / "spread_step0.csv")
    _markdown(rows, out / "spread_step0.md")


# -- spread over a recipe's budget ------------------------------------------------------------


def _cifar_single(root: Path, env: dict[str, str], work: Path, seed: int) -> Path:
    run = _fit(
        [
            "--config",
            EXPERIMENTS / "resnet18_c10_single.yaml",
            SINGLE_WIDTH,
            *_cifar_args(root, seed),
            "--trainer.max_epochs=5",
        ],
        work / "runs" / "cifar_single" / f"seed{seed}",
        env,
    )
    return max((run / "checkpoints").glob("epoch=*val_acc*.ckpt"))


def _cifar_args(root: Path, seed: int) -> list[str]:
    return [
        f"--seed_everything={seed}",
        f"--data.init_args.root={root}",
        "--data.init_args.batch_size=32",
        "--data.init_args.num_workers=0",
        "--data.init_args.persistent_workers=false",
        "--data.init_args.eval_ood=false",
        "--trainer.accelerator=cpu",
        "--trainer.devices=1",
        "--trainer.precision=32",
    ]


#: The tweets quickstart these measurements used (tweets_minilm_signorm.yaml before it took the
#: tweets study's 120-step budget and settings): 24 steps of 8 tweets, tau 0.5, spread 0.3,
#: target 0.9.
TWEETS_24_STEPS = [
    "--trainer.max_steps=24",
    "--trainer.enable_progress_bar=false",
    "--lr_scheduler.init_args.total_steps=24",
    "--lr_scheduler.init_args.warmup_steps=0",
    "--data.init_args.train_size=192",
    "--data.init_args.val_size=64",
    "--data.init_args.test_size=192",
    "--data.init_args.ood_size=192",
    "--routine.init_args.member_lr_multiplier=1.0",
    "--routine.init_args.target_diversity=0.9",
    "--routine.init_args.model.init_args.tau=0.5",
    "--routine.init_args.model.init_args.member_spread=0.3",
]


def _setups(work: Path, seed: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    root, cifar_env = _cifar(work)
    single = _cifar_single(root, cifar_env, work, seed)
    return {
        "tweets": (
            [
                "--config",
                EXPERIMENTS / "tweets_minilm_signorm.yaml",
                *TWEETS_24_STEPS,
                f"--seed_everything={seed}",
            ],
            _command_env(),
        ),
        "cifar_finetune": (
            [
                "--config",
                EXPERIMENTS / "resnet18_c10_signorm_finetune.yaml",
                CIFAR_WIDTH,
                f"--routine.init_args.model.init_args.checkpoint={single}",
                *_cifar_args(root, seed),
            ],
            cifar_env,
        ),
        "digits": (
            ["--config", EXPERIMENTS / "digits_signorm.yaml", f"--seed_everything={seed}"],
            _command_env(),
        ),
    }


def _summary(setup: str, run: Path, **settings) -> dict:
    steps = _per_step(run)
    last = steps[int(0.8 * len(steps)) :]
    return {
        "setup": setup,
        **settings,
        "steps": len(steps),
        "cos_regularized_start": steps[0]["cos_regularized"],
        "cos_regularized_end": steps[-1]["cos_regularized"],
        "last20_min": min(s["cos_regularized"] for s in last),
        "last20_max": max(s["cos_regularized"] for s in last),
        "tau_end": steps[-1]["tau"],
        **_results(run),
    }


def spread(out: Path, seeds: list[int], work: Path) -> None:
    """Where σNorm-cos ends at each spread on the converted recipes' own budgets."""
    rows = []
    for seed in seeds:
        setups = _setups(work, seed)
        for setup, values in (("tweets", SPREADS), ("cifar_finetune", (0.0, 0.3))):
            args, env = setups[setup]
            for value in values:
                run = _fit(
                    [*args, f"{SPREAD_ARG}={value}", "--routine.init_args.target_diversity=null"],
                    work / "runs" / f"spread_{setup}" / f"s{value:g}_seed{seed}",
                    env,
                )
                rows.append(_summary(setup, run, member_spread=value, seed=seed))
    _write(rows, out / "spread_budget.csv")
    _markdown(
        _aggregate(
            rows,
            ["setup", "member_spread", "steps"],
            ["cos_regularized_start", "cos_regularized_end", "Acc", "NLL", "MI"],
        ),
        out / "spread_budget.md",
    )


def targets(out: Path, seeds: list[int], work: Path) -> None:
    """target_diversity 0.3/0.6/0.9 on the three setups: reached, held, τ trajectories."""
    rows, trajectories = [], []
    for seed in seeds:
        setups = _setups(work, seed)
        for setup, (args, env) in setups.items():
            spread = [] if setup == "digits" else [f"{SPREAD_ARG}={TARGET_SPREAD}"]
            for target in TARGETS:
                run = _fit(
                    [*args, *spread, f"--routine.init_args.target_diversity={target}"],
                    work / "runs" / f"target_{setup}" / f"t{target:g}_seed{seed}",
                    env,
                )
                row = _summary(setup, run, target=target, seed=seed)
                row["reached"] = abs(row["cos_regularized_end"] - target) <= TOLERANCE
                row["held"] = (
                    max(abs(row["last20_min"] - target), abs(row["last20_max"] - target))
                    <= TOLERANCE
                )
                rows.append(row)
                trajectories += [
                    {"setup": setup, "target": target, "seed": seed, **s} for s in _per_step(run)
                ]
    _write(rows, out / "targets.csv")
    summary = _aggregate(
        rows,
        ["setup", "target", "steps"],
        ["cos_regularized_start", "cos_regularized_end", "tau_end", "Acc", "NLL"],
    )
    for entry in summary:
        runs = [r for r in rows if (r["setup"], r["target"]) == (entry["setup"], entry["target"])]
        entry["reached"] = f"{sum(r['reached'] for r in runs)}/{len(runs)}"
        entry["held (last 20 %)"] = f"{sum(r['held'] for r in runs)}/{len(runs)}"
    _markdown(summary, out / "targets.md")
    _write(trajectories, out / "target_trajectories.csv")
    _figure(trajectories, out / "target_trajectories.png")


def _figure(trajectories: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setups = sorted({t["setup"] for t in trajectories})
    fig, axes = plt.subplots(2, len(setups), figsize=(4.2 * len(setups), 6), squeeze=False)
    colours = dict(zip(TARGETS, ("tab:red", "tab:green", "tab:blue"), strict=True))
    for column, setup in enumerate(setups):
        for target, seed in sorted(
            {(t["target"], t["seed"]) for t in trajectories if t["setup"] == setup}
        ):
            points = [
                t
                for t in trajectories
                if t["setup"] == setup and t["target"] == target and t["seed"] == seed
            ]
            steps = [p["step"] for p in points]
            label = f"target {target:g}" if seed == min(t["seed"] for t in trajectories) else None
            axes[0][column].plot(
                steps,
                [p["cos_regularized"] for p in points],
                color=colours[target],
                alpha=0.7,
                label=label,
            )
            axes[1][column].plot(
                steps, [p["tau"] for p in points], color=colours[target], alpha=0.7
            )
        for target in TARGETS:
            axes[0][column].axhline(target, color=colours[target], ls=":", lw=0.8)
        axes[0][column].set_title(setup)
        axes[0][column].set_ylabel("σNorm-cos (regularized)")
        axes[1][column].set_yscale("log")
        axes[1][column].set_ylabel("τ")
        axes[1][column].set_xlabel("step")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("step0", "spread", "targets"))
    parser.add_argument(
        "--out", type=Path, default=REPO / "studies" / "results" / "controlled_diversity"
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=REPO / "logs" / "controlled_diversity",
        help="runs and CIFAR stand-ins (re-used: finished runs are skipped)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "step0":
        step0(args.out)
    elif args.what == "spread":
        spread(args.out, args.seeds, args.work)
    else:
        targets(args.out, args.seeds, args.work)


if __name__ == "__main__":
    main()
