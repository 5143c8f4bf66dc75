"""Integrators: one module per scheme, all with the kernel convention of :mod:`.common`.

``INTEGRATORS`` maps the public ``integrator=`` names to their modules; each module exposes
``make_work(nb)`` and the compiled ``step(n, dt, model, state, prev, applied, solver, stats,
work)``.  Implicit schemes are marked so the Simulation can report their solver statistics.
"""
from rtrigid.integrators import energy_momentum, nullspace_rk4

INTEGRATORS = {
    "nullspace_rk4": nullspace_rk4,
    "energy_momentum": energy_momentum,
}

IMPLICIT = frozenset({"energy_momentum"})


def names():
    """Public integrator names, in a stable order."""
    return list(INTEGRATORS)
