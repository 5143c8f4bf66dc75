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

