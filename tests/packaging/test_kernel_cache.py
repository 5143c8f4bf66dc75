"""The numba cache's stamp: a kernel is recompiled when a source it can reach changes, and only then."""
import os

import rtrigid
from rtrigid._jit import kernel_sources, source_digest

ROOT = os.path.dirname(os.path.abspath(rtrigid.__file__))


def _rel(paths):
    return {os.path.relpath(p, ROOT).replace(os.sep, "/") for p in paths}


def test_a_kernel_is_stamped_by_what_it_imports_and_nothing_else():
    reached = _rel(kernel_sources(os.path.join(ROOT, "backends", "tree", "energy_momentum.py")))
    # what the tree energy-momentum step calls or freezes, directly or through other kernels
    assert {"backends/tree/energy_momentum.py", "backends/tree/em_newton.py",
            "backends/tree/kinematics.py", "maths/quat.py", "_jit.py"} <= reached
    # the façade, the loaders, the scenarios and the viewer are not kernel sources
    assert not reached & {"simulation.py", "model.py", "cli.py", "loaders/__init__.py",
                          "scenarios/registry.py"}
    assert not any(p.startswith(("viewer/", "demos/", "io/", "tools/")) for p in reached)


def test_each_kernel_module_has_its_own_digest():
    here = os.path.join(ROOT, "contact", "pgs.py")
    reached = _rel(kernel_sources(here))
    assert "contact/geometry.py" in reached and "contact/pgs.py" in reached
    assert len(source_digest(here)) == 64
    assert source_digest(here) != source_digest(os.path.join(ROOT, "maths", "quat.py"))


def test_a_query_runs_its_python_body_until_its_budget_then_the_same_bits_compiled(monkeypatch):
    """energy() and momentum() of a fresh process compile nothing for their first few hundred
    calls on a small model (query): the Python body must give the kernel's numbers, bit for bit."""
    import numpy as np

    from rtrigid import _jit
    from rtrigid.maths.linalg import kinetic_energy, momenta

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

    # the switch: the Python body while the items asked about stay within the budget
    def fresh(a):
        return a * 2.0

    kernel = _jit.jit(fresh)
    monkeypatch.setattr(_jit, "QUERY_BUDGET", 10)
    assert _jit.query(kernel, 6) is _jit.pure(kernel)
    assert _jit.query(kernel, 6) is kernel  # 12 items > 10: compiled from here on
    assert kernel(1.5) == 3.0 and _jit.query(kernel, 1) is kernel
