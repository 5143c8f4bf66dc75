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
  without its sub-step fallback (000 §5.2: QUAT.VI needed dt = 0.007);
* ``em4_error_vs_cost.png`` -- ``energy_momentum4`` (both compositions) against
  ``nullspace_rk4`` and ``energy_momentum``: error against the step and against the measured
  cost on the free body, the heavy top, the gyro top and a jointed chain, and the choice of
  the composition's weights within the symmetric 5-stage family.

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
from rtrigid.tools.timing import median_step_cost
from rtrigid.simulation import Simulation, SimulationError

# (label, integrator, its options or None)
SCHEMES = [
    ("nullspace_rk4", "nullspace_rk4", None),
    ("semi_implicit_euler", "semi_implicit_euler", None),
    ("energy_momentum", "energy_momentum", None),
    ("energy_momentum4", "energy_momentum4", None),
    ("energy_momentum4 (triple jump)", "energy_momentum4", {"composition": "triple_jump"}),
    ("midpoint_em", "midpoint_em", None),
    ("midpoint_em (iv)", "midpoint_em", {"update": "momentum"}),
    ("variational", "variational", None),
    ("index1", "index1", None),
    ("director", "director", None),
    ("director_nullspace", "director_nullspace", None),
]
EXPLICIT = [n for n in integrators.names() if not integrators.get(n).implicit]
IMPLICIT = ["energy_momentum", "energy_momentum4", "midpoint_em", "variational"]  # the appd solver is the same scheme
STYLE = {"nullspace_rk4": "o-", "semi_implicit_euler": "o:", "energy_momentum": "s-", "energy_momentum4": "*-",
         "energy_momentum4 (triple jump)": "*--", "midpoint_em": "^-",
         "midpoint_em (iv)": "^--", "variational": "v-", "index1": "D-", "director": "x-",
         "director_nullspace": "+-"}


def _build(scenario, label, dt, **params):
    integ, options = next((i, o) for lab, i, o in SCHEMES if lab == label)
    if scenario == "lively_chain":
        return _lively_chain(integ, dt, options)
    return scenarios.build(scenario, integrator=integ, dt=dt, options=options, **params)


def _lively_chain(integrator, dt, options=None, n=3):
    """A 3-link spherical chain, links tilted ~0.5 rad and turning ~1 rad/s (seeded)."""
    rng = np.random.default_rng(0)
    q0 = [quat.from_rotvec(rng.normal(scale=0.5, size=3)) for _ in range(n)]
    return scenarios.build("chain", integrator=integrator, dt=dt, options=options, n=n, q0=q0,
                           omega0=rng.normal(size=(n, 3)))


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
    from rtrigid.references.scipy_ref import rigid_body_reference

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


EM4_LABELS = ["nullspace_rk4", "energy_momentum", "energy_momentum4",
              "energy_momentum4 (triple jump)"]
# (scenario, t_end, step sizes, title); errors: free body and heavy top ||R_ref R^T - I||_F
# against scipy, gyro top the relative centre-of-mass error against the analytic precession,
# the chain the largest position or rotation-matrix entry error against nullspace_rk4 at
# 1/15360 s (which agrees with itself at twice that step to ~1e-14)
EM4_CASES = [
    ("free_body", 1.0, [0.04, 0.02, 0.01, 0.005, 0.0025, 0.00125], "free body (000 §5.1)"),
    ("heavy_top", 1.0, [0.04, 0.02, 0.01, 0.005, 0.0025, 0.00125], "heavy top (002 Ex. A)"),
    ("gyro_top", 1.0, [0.004, 0.002, 0.001, 0.0005, 0.00025], "gyro top (000 §5.2)"),
    ("lively_chain", 0.5, [1 / 30, 1 / 60, 1 / 120, 1 / 240, 1 / 480],
     "3-link spherical chain, 0.5 s"),
]
EM4_TARGET = 1e-6  # the error at which the costs are compared


def _pose_error(sim, ref):
    err = float(np.abs(sim.x - ref.x).max())
    for a, b in zip(sim.q, ref.q):
        err = max(err, float(np.abs(quat.to_matrix(a) - quat.to_matrix(b)).max()))
    return err


def _case_error(scenario, label, dt, t_end, ref):
    sim = _build(scenario, label, dt)
    if not _advance(sim, t_end):
        return np.nan
    if scenario == "gyro_top":
        r = scenarios.info(sim)["reference"](sim.t)
        return float(np.linalg.norm(sim.x[0] - r) / np.linalg.norm(r))
    if scenario == "lively_chain":
        return _pose_error(sim, ref)
    return _config_error(sim, ref)


def _cost_at_error(cost, errs, target):
    """Cost interpolated (log-log) at an error target; nan outside the measured range."""
    ok = np.isfinite(errs) & (errs > 0)
    if ok.sum() < 2:
        return np.nan
    e, c = np.log(errs[ok]), np.log(cost[ok])
    if not e.min() <= np.log(target) <= e.max():
        return np.nan
    order = np.argsort(e)
    return float(np.exp(np.interp(np.log(target), e[order], c[order])))


def em4_error_vs_cost(labels=EM4_LABELS, cases=EM4_CASES, timing_steps=20000, repeats=7):
    """Per case (title, dts, {label: (us per step, cost [us] per dt, errors)})."""
    out = []
    for scenario, t_end, dts, title in cases:
        if scenario == "lively_chain":
            ref = _lively_chain("nullspace_rk4", 1 / 15360)
            ref.step(int(round(t_end * 15360)))
        else:
            ref = _reference(scenarios.build(scenario), t_end)[1][-1]
        rows = {}
        for label in labels:
            timed = _build(scenario, label, dts[len(dts) // 2])
            n = timing_steps if timed.nb == 1 else max(timing_steps // 40, 100)
            us = median_step_cost(timed, n, repeats) * 1e6
            errs = np.array([_case_error(scenario, label, dt, t_end, ref) for dt in dts])
            steps = np.array([round(t_end / dt) for dt in dts], float)
            rows[label] = (us, us * steps, errs)
        out.append((title, dts, rows))
    return out


def composition_family(g1s=(0.15, 0.2, 0.25, 0.28, 0.3, 0.35, 0.45, 0.5)):
    """The symmetric 5-stage order-4 family (g1, g2, 1 - 2 g1 - 2 g2, g2, g1): errors of the
    single-body energy-momentum step composed with each, and with Suzuki's and the triple
    jump's weights.  Rows (name, weights, free body at dt 0.02, heavy top at 0.01, gyro top
    at 0.002), the same error measures as :func:`em4_error_vs_cost`."""
    from scipy.optimize import brentq

    from rtrigid.backends.bodies.energy_momentum import step_loop
    from rtrigid.backends.compositions import COMPOSITIONS

    def g2_roots(g1):
        f = lambda g2: 2 * g1 ** 3 + 2 * g2 ** 3 + (1 - 2 * g1 - 2 * g2) ** 3  # noqa: E731
        grid = np.linspace(-2.0, 2.0, 4001)
        v = [f(x) for x in grid]
        return [brentq(f, grid[i], grid[i + 1]) for i in range(len(grid) - 1)
                if v[i] * v[i + 1] < 0]

    weights = {name: tuple(g) for name, g in COMPOSITIONS.items()}
    for g1 in g1s:
        for g2 in g2_roots(g1):
            weights[f"g1 = {g1:.2f}"] = (g1, g2, 1 - 2 * g1 - 2 * g2, g2, g1)
    refs = {name: _reference(scenarios.build(name), 1.0)[1][-1]
            for name in ("free_body", "heavy_top")}
    rows = []
    for name, stages in weights.items():
        errs = []
        for scenario, dt in (("free_body", 0.02), ("heavy_top", 0.01), ("gyro_top", 0.002)):
            sim = scenarios.build(scenario, integrator="energy_momentum", dt=dt)
            step_loop(int(round(1.0 / dt)), dt, sim.backend.F, sim.backend.I, None,
                      tuple(float(g) for g in stages))
            if scenario == "gyro_top":
                r = scenarios.info(sim)["reference"](1.0)
                errs.append(float(np.linalg.norm(sim.x[0] - r) / np.linalg.norm(r)))
            else:
                errs.append(_config_error(sim, refs[scenario]))
        rows.append((name, stages, errs))
    return rows


def _em4_section(plt, out, quick):
    from matplotlib.ticker import NullFormatter

    cases = EM4_CASES if not quick else [(s, t, d[1:4], title) for s, t, d, title in EM4_CASES]
    study = em4_error_vs_cost(cases=cases, timing_steps=2000 if quick else 20000,
                              repeats=3 if quick else 7)
    fig, axes = plt.subplots(2, len(study), figsize=(4.2 * len(study), 7.5), squeeze=False)
    md = ["## energy_momentum4: error against step and cost", "",
          "Errors: free body and heavy top ||R_ref R^T - I||_F at T = 1 s against scipy; gyro "
          "top relative centre-of-mass error at t = 1 s against the analytic precession; the "
          "3-link lively chain's largest position [m] or rotation-matrix entry error at 0.5 s "
          "against nullspace_rk4 at 1/15360 s.  Cost = measured median us/step x steps.  "
          f"'cost for {EM4_TARGET:g}': the cost (us of compute per simulated run) at which the "
          "scheme's error is that, interpolated log-log.", ""]
    for col, (title, dts, rows) in enumerate(study):
        for label, (us, cost, errs) in rows.items():
            axes[0, col].loglog(dts, errs, STYLE[label], label=label, ms=4)
            axes[1, col].loglog(cost, errs, STYLE[label], label=label, ms=4)
        for ax, xl in zip(axes[:, col], ("dt [s]", "cost [us]")):
            ax.set_xlabel(xl)
            ax.set_ylabel("error")
            ax.set_title(title, fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            ax.xaxis.set_minor_formatter(NullFormatter())  # labels at decades only
        budget = _common_budget({k: (None, v[1], v[2], None) for k, v in rows.items()})
        md += [f"### {title}", "",
               _table(["scheme", "us/step"] + [f"dt={d:.3g}" for d in dts]
                      + ["fitted order", f"error at equal cost ({budget:.0f} us)",
                         f"cost for {EM4_TARGET:g} [us]"],
                      [[lab, f"{us:.2f}"] + [_fmt(e) for e in errs]
                       + [f"{_fitted(dts, errs):.2f}",
                          _fmt_range(_equal_cost_error(cost, errs, budget)),
                          _fmt_range(_cost_at_error(cost, errs, EM4_TARGET))]
                       for lab, (us, cost, errs) in rows.items()]), ""]
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "em4_error_vs_cost.png"), dpi=110)
    plt.close(fig)
    family = composition_family()
    md += ["### the composition's weights", "",
           "Symmetric 5-stage order-4 compositions (g1, g2, 1 - 2 g1 - 2 g2, g2, g1) of the "
           "single-body step (every real root g2 for each g1), Suzuki's (g1 = g2) and the triple "
           "jump; errors as above, free body at dt = 0.02, heavy top at 0.01, gyro top at "
           "0.002.", "",
           _table(["weights", "g", "free body", "heavy top", "gyro top"],
                  [[name, ", ".join(f"{g:.4f}" for g in stages)] + [_fmt(e) for e in errs]
                   for name, stages, errs in family]), ""]
    return md


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


def _fmt_range(x):
    """An interpolated figure, or 'out of range' where the measured points do not reach it."""
    return "out of range" if not np.isfinite(x) else f"{x:.2e}"


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

    md += _em4_section(plt, out, quick)

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
