"""Integrators: one module per scheme, all with the kernel convention of :mod:`.common`.

``INTEGRATORS`` maps the public ``integrator=`` names to their modules; each module exposes
``work_size(nb)`` and the compiled ``step(n, dt, mf, mi, S, S_prev, A, solver, stats,
work)``.  Implicit schemes are marked so the Simulation can report their solver statistics.
"""
from types import SimpleNamespace

from rtrigid.integrators import energy_momentum, nullspace_rk4
from rtrigid.integrators import director, index1, midpoint_em, variational

INTEGRATORS = {
    "nullspace_rk4": nullspace_rk4,
    "energy_momentum": energy_momentum,
    # The same scheme solved with the 7/10 unknowns of 000 App. D: the reference solver.
    "energy_momentum_appd": SimpleNamespace(step=energy_momentum.step_appendix_d,
                                            work_size=energy_momentum.work_size),
    # Conserving and comparison schemes (issue 3), one module each.
    "midpoint_em": midpoint_em,
    "variational": variational,
    "index1": index1,
    "director": director,
    "director_nullspace": SimpleNamespace(step=director.step_nullspace,
                                          work_size=director.work_size),
}

IMPLICIT = frozenset({"energy_momentum", "energy_momentum_appd", "midpoint_em",
                      "variational"})


def names():
    """Public integrator names, in a stable order."""
    return list(INTEGRATORS)
