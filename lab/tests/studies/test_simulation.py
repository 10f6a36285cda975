"""The synthetic equilibrium (paper Figure 1 centre): τ moves it monotonically, M barely."""

from itertools import pairwise

import pytest
import torch

from studies.simulation import equilibrium_grid, equilibrium_table, main

TAUS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)


@pytest.fixture(scope="module")
def grid():
    """28 simulated trainings on one thread, 900 steps each: the equilibrium is reached (at 1500
    steps every cosine moves by under 0.01)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return equilibrium_grid(members=(2, 4, 8, 16), taus=TAUS, num_features=256, steps=900)
    finally:
        torch.set_num_threads(threads)


def test_equilibrium_cosine_is_monotone_in_tau(grid):
    for m in (2, 4, 8, 16):
        row = [grid[m, t] for t in TAUS]
        assert all(b >= a - 1e-3 for a, b in pairwise(row)), (m, row)
        assert row[0] < 0.05 and row[-1] > 0.8, (m, row)  # single owners ... no push


def test_equilibrium_cosine_varies_little_with_m(grid):
    spread_over_tau = grid[4, TAUS[-1]] - grid[4, TAUS[0]]
    for tau in TAUS:
        values = [grid[m, tau] for m in (4, 8, 16)]
        assert max(values) - min(values) < 0.15 * spread_over_tau, (tau, values)


def test_main_prints_the_table(capsys):
    main(["--members", "2", "4", "--taus", "0.1", "10", "--steps", "50", "--features", "16"])
    out = capsys.readouterr().out
    assert "σNorm-cos at equilibrium" in out and out.count("\n") >= 4
    assert equilibrium_table({(2, 0.1): 0.5}).splitlines()[-1].split() == ["2", "0.500"]


def test_bad_simulation_arguments_are_rejected():
    with pytest.raises(SystemExit):
        main(["--taus", "0"])
    from studies.simulation import equilibrium_cosines

    with pytest.raises(ValueError, match=r"every tau must be > 0, got \[-1.0\]"):
        equilibrium_cosines(4, [-1.0])
