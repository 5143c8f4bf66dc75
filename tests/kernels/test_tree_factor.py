"""The joint-space inertia's tree factor (rtrigid.maths.dense.tree_factor, M = L^T L with no
fill-in) against numpy's dense solve: on a real robot's inertia, walked as
rtrigid.backends.tree.contact.rate_tree says, and on random inertias of branched trees whose
rates are numbered out of topological order."""

import numpy as np
import pytest

from rtrigid.backends.tree.contact import rate_tree
from rtrigid.backends.tree.dynamics import Queries
from rtrigid.demos import robots
from rtrigid.maths.dense import tree_factor, tree_solve, tree_solve3


def _check(M, rates, rng):
    n = len(M)
    L = np.full((n, n), np.nan)  # entries off the tree's pattern must never be read
    assert tree_factor(M, L, rates, n)
    B = rng.normal(size=(3, n))
    ref = np.linalg.solve(M, B.T).T
    out = np.empty(n)
    tree_solve(L, rates, B[0], out, n)
    scale = np.abs(ref).max()
    assert np.abs(out - ref[0]).max() < 1e-11 * scale
    out3 = np.empty((3, n))
    tree_solve3(L, rates, B, out3, n)
    assert np.abs(out3 - ref).max() < 1e-11 * scale
    tree_solve3(L, rates, B, B, n)  # in place
    assert np.array_equal(B, out3)


def test_the_factor_of_a_robots_inertia_solves_as_numpy_does():
    sim = robots.a1_standing("semi_implicit_euler")  # (its legs bent in its stance)
    sim.step(20)
    queries = Queries(sim.model)  # the inertia in the tree's rates, as the contact solve's
    M = queries.mass_matrix(sim.backend.positions())
    rates = np.array(rate_tree(queries.tree.ti)).reshape(2, -1)
    assert rates.shape == (2, len(M)) and sorted(rates[1]) == list(range(len(M)))
    rng = np.random.default_rng(3)
    _check(M, rates, rng)


@pytest.mark.parametrize("seed", range(5))
def test_the_factor_of_a_branched_tree_with_shuffled_rates_solves_as_numpy_does(seed):
    rng = np.random.default_rng(seed)
    n = 20
    topo_parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    label = rng.permutation(n)  # rate label of the i-th rate in topological order
    parent = np.full(n, -1)
    for i in range(n):
        if topo_parent[i] >= 0:
            parent[label[i]] = label[topo_parent[i]]
    L0 = np.zeros((n, n))  # a factor with the tree's pattern: L0^T L0 has it too
    for i in range(n):
        L0[i, i] = rng.uniform(0.5, 2.0)
        j = topo_parent[i]
        while j >= 0:
            L0[i, j] = rng.normal()
            j = topo_parent[j]
    M = np.empty((n, n))
    M[np.ix_(label, label)] = L0.T @ L0
    _check(M, np.array([parent, label]), rng)
