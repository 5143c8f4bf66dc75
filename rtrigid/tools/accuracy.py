"""``rtrigid bench --accuracy``: the papers' accuracy comparisons, re-measured in rtrigid.

Writes PNG figures and a markdown table (``accuracy.md``) into ``--out`` (default
``assets/figures``):

* ``fig1_free_body_config_error.png`` -- 000 Fig. 1: configuration error ||R_ref R^T - I||_F
  at T = 1 against the step size on ``free_body``, every scheme;
* ``fig3_gyro_top_com_error.png`` -- 000 Fig. 3: relative error of the gyro top's centre of
  mass at t = 1 against the analytic steady precession;
* ``fig13_15_error_vs_cost.png`` -- 002 Figs 13-15: error at T against cost (right-hand-side
  evaluations and measured microseconds) for the explicit forms on ``heavy_top`` and
  ``tennis_racket`` (disturbances 1e-3 and the tiny 1e-5 of 002 Fig. 15 b);
* ``geradin_top_drift.png`` -- 003 Figs 6-7: energy, vertical angular momentum and attachment
  drift against time for every scheme on ``geradin_top`` cases 1 and 2;
* the largest step at which each implicit scheme's Newton solve converges on the gyro top
  without its sub-step fallback (000 §5.2: QUAT.VI needed dt = 0.007).

References are scipy DOP853 at rtol = atol = 1e-13 (:mod:`rtrigid.reference`) or analytic.
Costs are medians of timed ``sim.step(n)`` calls in this process (as ``rtrigid bench``);
RK4 takes 4 right-hand-side evaluations per step.  matplotlib and scipy are imported lazily.
"""
from __future__ import annotations

import os
import time
import warnings

import numpy as np

from rtrigid import integrators, quat, scenarios
from rtrigid.tools.bench import median_step_cost
from rtrigid.simulation import Simulation, SimulationError

# (label, integrator, its options or None)
SCHEMES = [
    ("nullspace_rk4", "nullspace_rk4", None),
    ("energy_momentum", "energy_momentum", None),
    ("midpoint_em", "midpoint_em", None),
    ("midpoint_em (iv)", "midpoint_em", {"update": "momentum"}),
    ("variational", "variational", None),
    ("index1", "index1", None),
    ("director", "director", None),
    ("director_nullspace", "director_nullspace", None),
]
EXPLICIT = [n for n in integrators.names() if not integrators.get(n).implicit]
IMPLICIT = ["energy_momentum", "midpoint_em", "variational"]  # the appd solver is the same scheme
STYLE = {"nullspace_rk4": "o-", "energy_momentum": "s-", "midpoint_em": "^-",
         "midpoint_em (iv)": "^--", "variational": "v-", "index1": "D-", "director": "x-",
         "director_nullspace": "+-"}


def _build(scenario, label, dt, **params):
    integ, options = next((i, o) for lab, i, o in SCHEMES if lab == label)
    return scenarios.build(scenario, integrator=integ, dt=dt, options=options, **params)


def _advance(sim, t_end):
    """Step to t_end; False if a step fails (the point is then left out of the figure)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            sim.step(int(round(t_end / sim.dt)))
        except SimulationError:
            return False
    return bool(np.all(np.isfinite(sim.q)))


def _reference(sim, t_end, t_eval=None):
    from rtrigid.tools.reference import rigid_body_reference

    body = sim.model.bodies[0]
    com = np.zeros(3) if body.pivot_body is None else -body.pivot_body
    j_ref = np.diag(body.inertia) + body.mass * (com @ com * np.eye(3) - np.outer(com, com))
    return rigid_body_reference(quat.to_matrix(sim.q[0]), sim.w[0], j_ref, t_end,
                                com=com, mass=body.mass, gravity=sim.gravity, t_eval=t_eval)


def _config_error(sim, R_ref):
    """000 §5.1.2: ||R_ref R^T - I||_F."""
    return float(np.linalg.norm(R_ref @ quat.to_matrix(sim.q[0]).T - np.eye(3)))


def _state_error(sim, R_ref, w_ref):
    """max(configuration error, relative error of the body angular velocity)."""
    return max(_config_error(sim, R_ref),
               float(np.linalg.norm(sim.w[0] - w_ref) / np.linalg.norm(w_ref)))


# -- measurements -------------------------------------------------------------------------

def free_body_config_error(dts, labels):
    """000 Fig. 1: {label: [error at T = 1 or nan]}."""
    _, R, _ = _reference(scenarios.build("free_body"), 1.0)
    out = {}
    for label in labels:
        errs = []
        for dt in dts:
            sim = _build("free_body", label, dt)
            errs.append(_config_error(sim, R[-1]) if _advance(sim, 1.0) else np.nan)
        out[label] = errs
    return out


def gyro_top_com_error(dts, labels):
    """000 Fig. 3: {label: [relative centre-of-mass error at t = 1 or nan]}."""
    out = {}
    for label in labels:
        errs = []
        for dt in dts:
            sim = _build("gyro_top", label, dt)
            if _advance(sim, 1.0):
                ref = scenarios.info(sim)["reference"](sim.t)
                errs.append(float(np.linalg.norm(sim.x[0] - ref) / np.linalg.norm(ref)))
            else:
                errs.append(np.nan)
        out[label] = errs
    return out


COST_CASES = [
    ("heavy_top", {}, 2.0, "heavy top (002 Ex. A)"),
    ("tennis_racket", {"omega0": (50.0, 0.1, 0.1)}, 2.0, "tennis racket, 0.1 (002 Fig. 15 a)"),
    ("tennis_racket", {"omega0": (50.0, 1e-3, 1e-3)}, 2.0, "tennis racket, 1e-3"),
    ("tennis_racket", {"omega0": (50.0, 1e-5, 1e-5)}, 2.0,
     "tennis racket, 1e-5 (002 Fig. 15 b)"),
]


def error_vs_cost(dts, labels, timing_steps=20000, repeats=5):
    """002 Figs 13-15: per case {label: (rhs evaluations, microseconds, errors)}.

    The error is max(configuration error, relative angular-velocity error) at T, 002's
    "absolute accuracy in positions and velocities".
    """
    out = []
    for scenario, params, t_end, title in COST_CASES:
        base = scenarios.build(scenario, **params)
        _, R, W = _reference(base, t_end)
        rows = {}
        for label in labels:
            us = median_step_cost(_build(scenario, label, dts[len(dts) // 2], **params),
                                   timing_steps, repeats) * 1e6
            steps, errs = [], []
            for dt in dts:
                sim = _build(scenario, label, dt, **params)
                ok = _advance(sim, t_end)
                steps.append(int(round(t_end / dt)))
                errs.append(_state_error(sim, R[-1], W[-1]) if ok else np.nan)
            steps = np.array(steps, float)
            rows[label] = (4 * steps, us * steps, np.array(errs), us)
        out.append((title, rows))
    return out


def geradin_drift(labels, t_end=10.0, dt=0.002, samples=200):
    """003 Figs 6-7: per case {label: (t, |E/E0 - 1|, |h_z - h_z0| / |h_0|, attachment)}."""
    out = {}
    for case in (1, 2):
        rows = {}
        for label in labels:
            sim = _build("geradin_top", label, dt, case=case)
            e0 = sim.energy()
            l0 = sim.momentum()[1]
            t, de, dh, da = [], [], [], []
            chunk = max(1, int(round(t_end / dt)) // samples)
            while sim.t < t_end - 0.5 * dt:
                if not _advance(sim, chunk * dt):
                    break
                t.append(sim.t)
                de.append(abs(sim.energy() / e0 - 1.0))
                dh.append(abs(sim.momentum()[1][2] - l0[2]) / np.linalg.norm(l0))
                da.append(sim.constraint_error())
            rows[label] = tuple(np.array(a) for a in (t, de, dh, da))
        out[case] = rows
    return out


def largest_converging_dt(integrators, grid, t_end=1.0):
    """Largest dt of ``grid`` up to which every step of the gyro top (to t_end) converges
    with the default Newton cap and no sub-step fallback (max_halvings = 0)."""
    out = {}
    base = scenarios.build("gyro_top")
    for integ in integrators:
        best = None
        for dt in sorted(grid):
            sim = Simulation(base.model, integ, dt, max_halvings=0)
            sim.set_orientation(0, base.q[0])  # the steady precession does not depend on dt
            sim.set_angular_velocity(0, base.w[0], frame="body")
            if not _advance(sim, t_end):
                break
            best = dt
        out[integ] = best
    return out


# -- figures and table ----------------------------------------------------------------------

def _loglog(ax, x, series, xlabel, ylabel, title):
    for label, ys in series.items():
        ax.loglog(x, ys, STYLE.get(label, "o-"), label=label, ms=4)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)


def _slope_guides(ax, x, y0, orders):
    x = np.asarray(x)
    for p in orders:
        ax.loglog(x, y0 * (x / x[0]) ** p, "k:", lw=0.8)
        ax.annotate(f"dt^{p}", (x[-1], y0 * (x[-1] / x[0]) ** p), fontsize=7)


def _fmt(x):
    return "fail" if not np.isfinite(x) else f"{x:.2e}"


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _common_budget(rows):
    """A cost inside every scheme's measured range (geometric middle of the overlap), or nan."""
    lo, hi = 0.0, np.inf
    for _, us, errs, _ in rows.values():
        ok = np.isfinite(errs)
        if ok.sum() < 2:
            continue
        lo, hi = max(lo, us[ok].min()), min(hi, us[ok].max())
    return float(np.sqrt(lo * hi)) if 0.0 < lo <= hi < np.inf else np.nan


def _equal_cost_error(cost, errs, budget):
    """Error interpolated (log-log) at a cost budget; nan outside the measured range."""
    ok = np.isfinite(errs)
    c, e = np.log(cost[ok]), np.log(errs[ok])
    if ok.sum() < 2 or not np.isfinite(budget) or not c.min() <= np.log(budget) <= c.max():
        return np.nan
    order = np.argsort(c)
    return float(np.exp(np.interp(np.log(budget), c[order], e[order])))


def _fitted(dts, errs, lo=1e-12):
    errs = np.asarray(errs)
    ok = np.isfinite(errs) & (errs > lo) & (errs < 0.5)
    if ok.sum() < 2:
        return np.nan
    return float(np.polyfit(np.log(np.asarray(dts)[ok]), np.log(errs[ok]), 1)[0])


def _order_figure(plt, out, filename, dts, errors, ylabel, title, guide, heading):
    """A log-log error-vs-dt figure with slope guides, and its markdown table (lines)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    _loglog(ax, dts, errors, "dt [s]", ylabel, title)
    _slope_guides(ax, dts, guide, (1, 2, 4))
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, filename), dpi=110)
    plt.close(fig)
    return [f"## {heading}", "",
            _table(["scheme"] + [f"dt={d:g}" for d in dts] + ["fitted order"],
                   [[lab] + [_fmt(e) for e in errs] + [f"{_fitted(dts, errs):.2f}"]
                    for lab, errs in errors.items()]), ""]


def main(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = args.out or os.path.join("assets", "figures")
    os.makedirs(out, exist_ok=True)
    quick = getattr(args, "quick", False)
    labels = [s[0] for s in SCHEMES]
    md = ["# Accuracy comparison (`rtrigid bench --accuracy`)", "",
          "Generated by `rtrigid bench --accuracy`; see `rtrigid/accuracy.py` for the set-up.",
          ""]
    started = time.perf_counter()

    # 000 Fig. 1 and Fig. 3
    dts1 = [0.02, 0.01, 0.005] if quick else [0.04, 0.02, 0.01, 0.005, 0.0025, 0.00125,
                                               0.000625]
    md += _order_figure(plt, out, "fig1_free_body_config_error.png", dts1,
                        free_body_config_error(dts1, labels), "||R_ref R^T - I||_F at T = 1",
                        "free body (000 §5.1): configuration error at T = 1", 1e-2,
                        "000 Fig. 1: free body, configuration error at T = 1")
    dts3 = [0.01, 0.005, 0.0025] if quick else [0.01, 0.007, 0.005, 0.0025, 0.00125, 0.000625,
                                                 0.0003125]
    md += _order_figure(plt, out, "fig3_gyro_top_com_error.png", dts3,
                        gyro_top_com_error(dts3, labels), "|phi_ref - phi| / |phi_ref| at t = 1",
                        "gyro top (000 §5.2): centre of mass vs analytic", 1e-1,
                        "000 Fig. 3: gyro top, relative centre-of-mass error at t = 1")

    # 002 Figs 13-15
    # down to 62.5 us: the cheapest scheme needs the small steps to reach the others' costs
    dtsc = [0.004, 0.002, 0.001] if quick else [0.008, 0.004, 0.002, 0.001, 0.0005, 0.00025,
                                                 0.000125, 0.0000625]
    cost = error_vs_cost(dtsc, EXPLICIT, timing_steps=2000 if quick else 20000,
                         repeats=3 if quick else 7)
    fig, axes = plt.subplots(len(cost), 2, figsize=(10, 3.6 * len(cost)), squeeze=False)
    md += ["## 002 Figs 13-15: error at T = 2 s against cost, explicit forms (RK4)", "",
           "Error = max(||R_ref R^T - I||_F, |Omega - Omega_ref| / |Omega_ref|) at T; cost = "
           "4 right-hand sides per step, and the measured median us/step times the steps.", ""]
    for row, (title, rows) in zip(axes, cost):
        for label, (rhs, us, errs, _) in rows.items():
            row[0].loglog(rhs, errs, STYLE[label], label=label, ms=4)
            row[1].loglog(us, errs, STYLE[label], label=label, ms=4)
        for ax, xl in zip(row, ("right-hand-side evaluations", "cost [us]")):
            ax.set_xlabel(xl)
            ax.set_ylabel("error at T")
            ax.set_title(title, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        row[0].legend(fontsize=7)
        budget = _common_budget(rows)
        md += [f"### {title}", "",
               _table(["scheme", "us/step"] + [f"dt={d:g}" for d in dtsc]
                      + [f"error at equal cost ({budget:.0f} us)"],
                      [[lab, f"{rows[lab][3]:.2f}"] + [_fmt(e) for e in rows[lab][2]]
                       + [_fmt(_equal_cost_error(rows[lab][1], rows[lab][2], budget))]
                       for lab in rows]), ""]
    fig.tight_layout()
    fig.savefig(os.path.join(out, "fig13_15_error_vs_cost.png"), dpi=110)
    plt.close(fig)

    # 003 Figs 6-7
    drift = geradin_drift(labels, t_end=1.0 if quick else 10.0)
    fig, axes = plt.subplots(2, 3, figsize=(14, 7), squeeze=False)
    md += ["## 003 Figs 6-7: Geradin-Rixen top, drifts over 10 s at dt = 2 ms", "",
           "Maxima over the run: relative energy error, vertical angular momentum error "
           "relative to the angular momentum, attachment drift [m].", "",
           _table(["scheme", "case 1 energy", "case 1 h_z", "case 1 attachment",
                   "case 2 energy", "case 2 h_z", "case 2 attachment"],
                  [[lab] + [_fmt(np.max(drift[c][lab][k])) if len(drift[c][lab][0])
                            else "fail" for c in (1, 2) for k in (1, 2, 3)]
                   for lab in labels]), ""]
    for row, case in zip(axes, (1, 2)):
        for label, (t, de, dh, da) in drift[case].items():
            for ax, y in zip(row, (de, dh, da)):
                ax.semilogy(t, np.maximum(y, 1e-17), STYLE[label].replace("-", ""), ms=2,
                            label=label)
        for ax, yl in zip(row, ("|E/E0 - 1|", "|h_z - h_z0| / |h_0|", "attachment drift [m]")):
            ax.set_xlabel("t [s]")
            ax.set_ylabel(yl)
            ax.set_title(f"case {case}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        row[0].legend(fontsize=7, markerscale=3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "geradin_top_drift.png"), dpi=110)
    plt.close(fig)

    # convergence limit of the implicit schemes
    grid = ([0.005, 0.01] if quick else
            [0.002, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.012, 0.015, 0.02, 0.03,
             0.05])
    limits = largest_converging_dt(IMPLICIT, grid)
    md += ["## Largest converging step on the gyro top", "",
           f"Grid {grid}; every step to t = 1 s must converge with max_iter = 25 and no "
           "sub-step fallback.", "",
           _table(["scheme", "largest dt [s]"],
                  [[k, "none" if v is None else f"{v:g}"] for k, v in limits.items()]), ""]
    md += [f"Total time: {time.perf_counter() - started:.0f} s.", ""]
    with open(os.path.join(out, "accuracy.md"), "w") as fh:
        fh.write("\n".join(md))
    print("\n".join(md))
    return 0
