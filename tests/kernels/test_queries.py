"""The façade's queries (energy, momentum) run their kernels' Python bodies until a budget
(rtrigid._jit.query): those must give the compiled kernels' numbers, bit for bit."""

import numpy as np

from rtrigid import _jit
from rtrigid.backends.bodies.forces import gravity_energy
from rtrigid.backends.bodies.layout import B_MASS, B_WIDTH
from rtrigid.maths.linalg import kinetic_energy, momenta


def test_a_query_runs_its_python_body_until_its_budget_then_the_same_bits_compiled(monkeypatch):
    """energy() and momentum() of a fresh process compile nothing for their first few hundred
    calls on a small model (query): the Python body must give the kernel's numbers, bit for bit."""

    rng = np.random.default_rng(7)
    nb = 5
    mass, inertia = rng.uniform(0.1, 3.0, nb), rng.uniform(0.01, 2.0, (nb, 3))
    x, v, w = rng.normal(size=(nb, 3)), rng.normal(size=(nb, 3)), rng.normal(size=(nb, 3)) * 9
    q = rng.normal(size=(nb, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    out_py, out_jit = np.empty((2, 3)), np.empty((2, 3))
    _jit.pure(momenta)(mass, inertia, x, q, v, w, out_py)
    momenta(mass, inertia, x, q, v, w, out_jit)
    assert np.array_equal(out_py, out_jit)
    e_py = _jit.pure(kinetic_energy)(mass, inertia, v, w)
    assert e_py == kinetic_energy(mass, inertia, v, w) and e_py > 0.0
    bodyf = np.zeros((nb, B_WIDTH))
    bodyf[:, B_MASS] = mass
    gravity = np.array([0.3, -0.2, -9.81])
    g_py = _jit.pure(gravity_energy)(gravity, bodyf, x)
    assert g_py == gravity_energy(gravity, bodyf, x) and g_py != 0.0

    # the switch: the Python body while the items asked about stay within the budget
    def fresh(a):
        return a * 2.0

    kernel = _jit.jit(fresh)
    monkeypatch.setattr(_jit, "QUERY_BUDGET", 10)
    assert _jit.query(kernel, 6) is _jit.pure(kernel)
    assert _jit.query(kernel, 6) is kernel  # 12 items > 10: compiled from here on
    assert kernel(1.5) == 3.0 and _jit.query(kernel, 1) is kernel
