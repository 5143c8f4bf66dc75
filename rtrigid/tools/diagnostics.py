"""Run a scenario and measure what matters: cost per step and how well invariants hold.

Shared by ``rtrigid run`` and the benchmarks.  Stepping is timed on its own; the diagnostics
are sampled between timed chunks of steps.
"""
from __future__ import annotations

import time

import numpy as np

from rtrigid import scenarios
from rtrigid.validate import as_scalar


def _conserved_values(sim, conserved):
    linear, angular = sim.momentum()
    return np.array([(linear if kind == "linear" else angular)[axis] for kind, axis in conserved])


def run_measured(sim, t_end, samples=200):
    """Step ``sim`` to ``t_end`` in up to ``samples`` timed chunks; return a dict of figures.

    Drifts are relative: energy (less the actuators' work, so a driven arm's balance is
    measured) to max(|E0|, T0); a momentum component to the norm of its
    vector (linear or angular) at t = 0, so a component that starts at zero is measured
    against the size of the momentum rather than divided by zero.
    """
    t_end = as_scalar(t_end, "t_end", nonnegative=True)
    n_total = int(round(t_end / sim.dt))
    sim.step(0)  # load the compiled kernel (numba cache) before any timing
    conserved = scenarios.info(sim).get("conserved", [])
    reference = scenarios.info(sim).get("reference")
    e0 = sim.energy()
    e_scale = max(abs(e0), sim.kinetic_energy(), 1e-300)
    linear0, angular0 = sim.momentum()
    c0 = _conserved_values(sim, conserved)
    c_scale = np.array([max(np.linalg.norm(linear0 if k == "linear" else angular0), 1e-300)
                        for k, _ in conserved])
    worst = dict(energy=0.0, momentum=0.0, constraint=sim.constraint_error(), unit=0.0,
                 reference=0.0)
    chunks = max(1, min(samples, n_total))
    bounds = np.linspace(0, n_total, chunks + 1).round().astype(int)
    wall = 0.0
    for a, b in zip(bounds[:-1], bounds[1:]):
        start = time.perf_counter()
        sim.step(int(b - a))
        wall += time.perf_counter() - start
        balance = sim.energy() - float(sim.actuator_work().sum())
        worst["energy"] = max(worst["energy"], abs(balance - e0) / e_scale)
        if conserved:
            drift = np.abs(_conserved_values(sim, conserved) - c0) / c_scale
            worst["momentum"] = max(worst["momentum"], float(drift.max()))
        worst["constraint"] = max(worst["constraint"], sim.constraint_error())
        worst["unit"] = max(worst["unit"], float(np.abs(np.linalg.norm(sim.q, axis=1) - 1).max()))
        if reference is not None:
            ref = reference(sim.t)
            worst["reference"] = max(worst["reference"],
                                     float(np.linalg.norm(sim.x[0] - ref) / np.linalg.norm(ref)))
    out = {
        "scenario": scenarios.info(sim).get("scenario"),
        "integrator": sim.integrator,
        "dt": sim.dt,
        "t_end": sim.t,
        "steps": n_total,
        "wall_s": wall,
        "us_per_step": wall / max(n_total, 1) * 1e6,
        "max_rel_energy_drift": worst["energy"],
        "max_rel_momentum_drift": worst["momentum"] if conserved else None,
        "conserved_components": [f"{k}[{'xyz'[a]}]" for k, a in conserved],
        "max_constraint_error": worst["constraint"],
        "max_unit_quaternion_error": worst["unit"],
        "solver": sim.solver_stats(),
    }
    if reference is not None:
        ref = reference(sim.t)
        out["reference"] = scenarios.info(sim).get("reference_name")
        out["max_rel_reference_error"] = worst["reference"]
        out["final_rel_reference_error"] = float(np.linalg.norm(sim.x[0] - ref) / np.linalg.norm(ref))
    return out


def format_table(rows, align=None):
    """Rows of cells as text lines, each column padded to its widest cell.

    ``align``: one of "<" or ">" per column (default: the first left, the rest right).
    """
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    align = align or ["<"] + [">"] * (len(widths) - 1)
    return ["  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, align, widths)).rstrip()
            for r in rows]
