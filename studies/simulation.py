r"""Synthetic simulation of the diversity equilibrium (paper §3.2, Figure 1 centre).

Member importance logits :math:`\gamma` start from :math:`\mathcal{N}(0, 1)` and descend

.. math::
    J(\gamma) = \lambda \sum_i \sum_m \log[\mathrm{softmax}_\tau(\sigma(\gamma_{\cdot,i}))]_m
    + \frac{w}{2} \sum_{m,i} \big(\sigma(\gamma_{m,i}) - \sigma(\gamma^{(0)}_{m,i})\big)^2 .

The first term is the paper's regularizer. The second stands in for the task loss, which
resists moving importances away from the features each member found useful (Appendix
"Temperature limits": equilibria arise where the penalty's force balances the task loss).
The mean pairwise cosine between members at convergence (σNorm-cos) is the diversity
equilibrium that τ sets: it rises smoothly from near 0 (single owners) at low τ to the
initial cosine (no push) at high τ, nearly independently of M for M ≥ 4. With M = 2 the
softmax has exactly one above-average member per feature, so features end single-owned up
to higher τ than with more members.

Run ``python -m studies.simulation`` to print the M × τ table.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch

from signorm_lab.reproduction.tables import format_table
from torch_uncertainty_signorm.evaluation.diversity import pairwise_cosine
from torch_uncertainty_signorm.signorm.regularization import sharing_penalty

__all__ = ["equilibrium_cosines", "equilibrium_grid", "equilibrium_table", "main"]

DEFAULT_MEMBERS = (2, 4, 8, 16)
DEFAULT_TAUS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)


def equilibrium_cosines(
    num_estimators: int,
    taus: Sequence[float],
    *,
    num_features: int = 512,
    strength: float = 1.0,
    task_weight: float = 1.0,
    steps: int = 2000,
    lr: float = 0.05,
    seed: int = 0,
) -> list[float]:
    """σNorm-cos after descending the objective from one N(0, 1) draw, for each τ.

    All temperatures run as one batched problem (they share the initial logits).

    Args:
        num_estimators: Number of members M.
        taus: Temperatures τ > 0.
        num_features: Features per member.
        strength: Penalty strength λ.
        task_weight: Weight w of the task-loss stand-in.
        steps: Adam steps on the logits.
        lr: Adam learning rate.
        seed: Seed of the N(0, 1) initial logits.
    """
    if num_estimators < 2:
        raise ValueError(f"the simulation needs num_estimators >= 2, got {num_estimators!r}.")
    if not taus or min(taus) <= 0:
        raise ValueError(f"every tau must be > 0, got {list(taus)!r}.")
    generator = torch.Generator().manual_seed(seed)
    init = torch.randn(num_estimators, num_features, generator=generator, dtype=torch.float64)
    tau = torch.tensor(taus, dtype=torch.float64).view(-1, 1, 1)
    logits = init.expand(len(taus), -1, -1).clone().requires_grad_(True)
    anchor = torch.sigmoid(init)
    optimizer = torch.optim.Adam([logits], lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        importance = torch.sigmoid(logits)
        task = 0.5 * task_weight * (importance - anchor).square().sum()
        (strength * sharing_penalty(importance, tau) + task).backward()
        optimizer.step()
    return pairwise_cosine(torch.sigmoid(logits.detach())).tolist()


def equilibrium_grid(
    members: Sequence[int] = DEFAULT_MEMBERS,
    taus: Sequence[float] = DEFAULT_TAUS,
    **kwargs,
) -> dict[tuple[int, float], float]:
    """:func:`equilibrium_cosines` over a grid of M and τ, keyed by ``(M, tau)``."""
    grid = {}
    for m in members:
        cosines = equilibrium_cosines(m, taus, **kwargs)
        grid.update(zip([(m, t) for t in taus], cosines, strict=True))
    return grid


def equilibrium_table(grid: dict[tuple[int, float], float]) -> str:
    """The grid as a plain-text table under a title: one row per M, one column per τ."""
    members = sorted({m for m, _ in grid})
    taus = sorted({t for _, t in grid})
    body = [[str(m), *(f"{grid[m, t]:.3f}" for t in taus)] for m in members]
    return "σNorm-cos at equilibrium (rows: M, columns: τ)\n" + format_table(
        ["M \\ τ", *(f"{t:g}" for t in taus)], body
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Print the simulated σNorm-cos table over M and τ."""
    parser = argparse.ArgumentParser(
        prog="python -m studies.simulation",
        description="Simulated σNorm-cos equilibrium over ensemble sizes M and temperatures τ.",
    )
    parser.add_argument("--members", type=int, nargs="+", default=list(DEFAULT_MEMBERS))
    parser.add_argument("--taus", type=float, nargs="+", default=list(DEFAULT_TAUS))
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.members) < 2:
        parser.error(f"--members must all be >= 2, got {args.members}")
    if min(args.taus) <= 0:
        parser.error(f"--taus must all be > 0, got {args.taus}")
    start = time.perf_counter()
    grid = equilibrium_grid(
        args.members, args.taus, steps=args.steps, num_features=args.features, seed=args.seed
    )
    print(equilibrium_table(grid), end="")
    print(f"({len(grid)} simulations in {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
