"""The digits study's design: its recipes, grids and settings (read by the runs and the
analysis)."""

from __future__ import annotations

from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
RECIPES = {
    "signorm": "digits_study_signorm.yaml",
    "single": "digits_study_single.yaml",
    "deep_ensembles": "digits_study_deep_ensembles.yaml",
    "packed": "digits_study_packed.yaml",
}
LABELS = {
    "signorm": "σN-Ens",
    "single": "Single",
    "deep_ensembles": "Deep Ensembles",
    "packed": "Packed",
}
#: The recipes' base learning rate and weight decay (SGD, momentum 0.9).
LR, WEIGHT_DECAY = 0.05, 5e-4
#: Half-decade τ grid from 0.01 to 3.16.
TAUS = (0.01, 0.0316, 0.1, 0.316, 1.0, 3.16)
#: λ × τ grid: λ/τ² is the same along its diagonals, e.g. (1e-3, 0.1), (1e-2, 0.316), (1e-1, 1).
LAMBDAS, LAMBDA_TAUS = (1e-3, 1e-2, 1e-1), (0.1, 0.316, 1.0)
MEMBERS = (2, 4, 8, 16)
#: The paper's settings: from scratch (τ = 0.1, λ = 1e-2, M = 4); member scaling at τ = 0.5.
TAU, LAMBDA, NUM_ESTIMATORS, MEMBERS_TAU = 0.1, 1e-2, 4, 0.5
SEEDS, FEW_SEEDS = (0, 1, 2, 3, 4), (0, 1, 2)
PARTS = ("tau", "lambda", "members", "methods")
PREDICTIONS = "test_predictions.safetensors"
TRAJECTORY = "trajectory.csv"
#: Columns of Lightning's metrics.csv kept in trajectory.csv.
TRAJECTORY_COLUMNS = (
    "step",
    "epoch",
    "train_loss",
    "train/signorm_cos",
    "train/signorm_cos_regularized",
    "train/diversity_loss",
    "val/cls/NLL",
    "val/cls/Acc",
    "val/cal/ECE",
    "val/div/signorm_cos",
    "val/div/signorm_cos_regularized",
    "val/div/jensen_gap",
)
