"""``rtrigid bench``: per-step cost of each integrator on each scenario, MuJoCo beside it.

Every figure is a median over ``--repeats`` timed calls of ``sim.step(--steps)`` (one
compiled call each), measured in one process, one after another, so ratios compare like with
like.  MuJoCo runs the same physical model (mass, inertia, pivot, gravity, initial state)
through ``mj_step(m, d, nstep)`` with its RK4 integrator.  Also measured: the cost of a
single Python ``sim.step()`` call, and the wall time of ``rtrigid run gyro_top --t-end 0.01``
as a fresh process with a warm numba cache.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from rtrigid import integrators, scenarios
from rtrigid.simulation import STEP_BUDGET, Simulation, SimulationError
from rtrigid.references import mujoco_ref, pybullet_ref
from rtrigid.tools.diagnostics import format_table
from rtrigid.tools.timing import median_step_cost, scheme_step_cost, single_call_cost

HEADLINE = ("gyro_top", 1e-3)


def _mujoco_cost(sim, steps, repeats):
    """MuJoCo RK4 on the model of a single-body ``sim``; None if not applicable/installed.

    Not applicable either where MuJoCo refuses the inertia (the Geradin-Rixen top's
    centroidal inertia breaks the triangle inequality, as the paper's data does).
    """
    if not mujoco_ref.available() or sim.nb != 1 or sim.model.grounds:
        return None  # (a ground: the contact section compares those)
    body = sim.model.bodies[0]
    j = body.inertia
    if np.any(j > np.sum(j) - j):
        return None
    pivoted = body.pivot_body is not None
    model, data = mujoco_ref.build_single_body(
        body.mass, body.inertia, pivot_world=body.pivot_world, pivot_body=body.pivot_body,
        gravity=sim.gravity, dt=sim.dt, integrator="RK4")
    mujoco_ref.set_state(model, data, x=None if pivoted else sim.x[0], p=sim.q[0],
                         v=None if pivoted else sim.v[0], omega_body=sim.w[0])
    return _mujoco_time(model, data, steps, repeats)


def _mujoco_time(model, data, steps, repeats):
    """mujoco_ref.time_per_step in a scratch directory (MuJoCo writes MUJOCO_LOG.TXT into
    the working directory on warnings)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            return mujoco_ref.time_per_step(model, data, n=steps, repeats=repeats)
        finally:
            os.chdir(cwd)


def _cold_run_seconds():
    """Wall time of `rtrigid run gyro_top --t-end 0.01` in a new process (warm cache)."""
    cmd = [sys.executable, "-m", "rtrigid.cli", "run", "gyro_top", "--t-end", "0.01"]
    subprocess.run(cmd, check=True, capture_output=True)  # warms the cache if needed
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def collect(steps=20000, repeats=7, with_mujoco=True):
    rows = []
    for name in scenarios.names():
        if name in LOOP_SCENARIOS:  # timed in their own section, over fewer steps
            continue
        dts = [scenarios.defaults(name)[0]]
        if name == HEADLINE[0] and HEADLINE[1] not in dts:
            dts.append(HEADLINE[1])
        for dt in dts:
            row = {"scenario": name, "dt": dt, "us_per_step": {}, "window": {}}
            for integ in scenarios.integrators_for(name):
                sim = scenarios.build(name, integrator=integ, dt=dt)
                n = steps if sim.nb == 1 else max(steps // 10, 100)
                cost, window = scheme_step_cost(sim, n, repeats)
                if cost is not None:
                    row["us_per_step"][integ] = cost * 1e6
                if window is not None:  # the scheme's state would not stay finite for n steps
                    row["window"][integ] = window
            if with_mujoco:
                cost = _mujoco_cost(scenarios.build(name, dt=dt), steps, repeats)
                if cost is not None:
                    row["us_per_step"]["mujoco_rk4"] = cost * 1e6
            rows.append(row)
    name, dt = HEADLINE
    calls = {integ: single_call_cost(scenarios.build(name, integrator=integ, dt=dt)) * 1e6
             for integ in ("nullspace_rk4", "energy_momentum")}
    headline = next(r for r in rows if r["scenario"] == name and r["dt"] == dt)["us_per_step"]
    summary = {"single_call_us": calls,
               "single_call_overhead_us": {k: v - headline[k] for k, v in calls.items()},
               "cold_run_gyro_top_t_end_0.01_s": _cold_run_seconds()}
    if "mujoco_rk4" in headline:
        summary["ratio_to_mujoco_rk4_gyro_top_dt_1ms"] = {
            k: headline[k] / headline["mujoco_rk4"] for k in integrators.names()}
    out = {"steps_per_call": steps, "repeats": repeats, "rows": rows, "summary": summary}
    out["chain"] = chain_section(repeats, with_mujoco)
    out["solver"] = solver_section()
    out["contact"] = contact_section(repeats, with_mujoco)
    out["loops"] = loop_section(repeats, with_mujoco)
    out["control_ticks"] = control_ticks(repeats, with_mujoco=with_mujoco)
    return out


def _lively_chain(n, integrator, dt, seed=0):
    """A chain swinging hard: links tilted ~0.5 rad, random world angular velocities ~1 rad/s."""
    from rtrigid.maths import quat

    rng = np.random.default_rng(seed)
    q0 = [quat.from_rotvec(rng.normal(scale=0.5, size=3)) for _ in range(n)]
    return scenarios.build("chain", integrator=integrator, dt=dt, n=n, q0=q0,
                           omega0=rng.normal(size=(n, 3)))


def _mujoco_chain(sim, n):
    model, data = mujoco_ref.build_chain(n, 0.5, 1.0, scenarios.rod_inertia(1.0, 0.5, 0.05),
                                         dt=sim.dt)
    for i in range(n):
        data.qpos[4 * i:4 * i + 4] = sim.joint_position(i)
        data.qvel[3 * i:3 * i + 3] = sim.joint_velocity(i)
    return model, data


def chain_section(repeats=7, with_mujoco=True, dt=1.0 / 240.0, sizes=(1, 2, 5, 10, 20, 50)):
    """Spherical chains at dt = 1/240: cost against n, and energy over 10 s for n = 10.

    The cost is timed over the first half second (120 steps, restored between repeats): a
    lively chain of 50 links whips its tip so hard within a second that no explicit scheme
    at this dt survives (ours and MuJoCo's RK4 alike); a scheme that fails is reported as None.
    """
    use_mujoco = with_mujoco and mujoco_ref.available()
    scaling = []
    for n in sizes:
        row = {"n": n}
        for integ in ("nullspace_rk4", "energy_momentum"):
            sim = _lively_chain(n, integ, dt)
            try:
                row[integ] = median_step_cost(sim, 120, repeats) * 1e6
            except SimulationError:
                row[integ] = None
            if integ == "energy_momentum" and row[integ] is not None:
                fresh = _lively_chain(n, integ, dt)  # the timed run restores its counters
                fresh.step(120)
                row["energy_momentum_mean_iterations"] = fresh.solver_stats()["mean_iterations"]
        if use_mujoco:
            model, data = _mujoco_chain(_lively_chain(n, "nullspace_rk4", dt), n)
            row["mujoco_rk4"] = _mujoco_time(model, data, 120, repeats) * 1e6
        scaling.append(row)
    steps = int(round(10.0 / dt))
    drift = {}
    for integ in ("nullspace_rk4", "energy_momentum"):
        sim = _lively_chain(10, integ, dt)
        e0 = sim.energy()
        sim.step(steps)
        drift[integ] = abs(sim.energy() - e0)
        if integ == "energy_momentum":
            drift["energy_momentum_mean_iterations"] = sim.solver_stats()["mean_iterations"]
    if use_mujoco:
        model, data = _mujoco_chain(_lively_chain(10, "nullspace_rk4", dt), 10)
        e0 = mujoco_ref.chain_energy(model, data)
        mujoco_ref.step(model, data, steps)
        drift["mujoco_rk4"] = abs(mujoco_ref.chain_energy(model, data) - e0)
    return {"dt": dt, "scaling_us_per_step": scaling, "energy_drift_10s_n10": drift}


def _step_costs(sim, steps, repeats, skip=5):
    """Per-step wall time (s) of ``steps`` single ``sim.step()`` calls after ``skip`` untimed
    ones, each step's minimum over ``repeats`` runs from the same snapshot (the runs are bit
    for bit the same, so the minimum takes out the machine's interruptions, not the solver's
    work); the solver statistics of one run, and its energy change relative to |energy|."""
    sim.step(skip)
    snap = sim.snapshot()
    stats0 = sim.solver_stats()
    e0 = sim.energy()
    best = np.full(steps, np.inf)
    step, clock = sim.step, time.perf_counter
    for _ in range(repeats):
        sim.restore(snap)
        for k in range(steps):
            start = clock()
            step()
            best[k] = min(best[k], clock() - start)
    stats = sim.solver_stats()
    keys = ("steps", "newton_iterations", "fallback_steps", "charged_iterations", "budget_steps",
            "path_steps")
    stats = {k: stats[k] - stats0[k] for k in keys if k in stats} | {
        "max_iterations": stats["max_iterations"], "drift": (sim.energy() - e0) / abs(e0)}
    return best, stats


def _with_budget(sim, step_budget):
    """``sim`` with another ``step_budget``: the same model and scheme, its state copied bit for
    bit (a snapshot would be refused: the solver settings are part of its fingerprint)."""
    twin = Simulation(sim.model, sim.integrator, sim.dt, options=sim.options,
                      step_budget=step_budget)
    twin.backend.S[:] = sim.backend.S
    twin.backend.S_prev[:] = sim.backend.S_prev
    return twin


def solver_section(repeats=3, steps=600, sizes=(10, 20, 50), dts=(1.0 / 60.0, 1.0 / 120.0),
                   step_budget=STEP_BUDGET):
    """The energy-momentum solver at game-sized steps on spherical chains: fallbacks, budget
    outcomes and the worst step against the median (the real-time contract), ``steps`` steps after 5
    untimed ones, with Simulation's ``step_budget`` (default: its default).

    Two states: the scenario's default (links slightly off the vertical, at rest) and the
    lively chain of :func:`_lively_chain`.  The worst step is the slowest per-step minimum
    over ``repeats`` identical runs (:func:`_step_costs`).
    """
    import warnings

    rows = []
    for state in ("default", "lively"):
        for n in sizes:
            for dt in dts:
                sim = (scenarios.build("chain", integrator="energy_momentum", dt=dt, n=n)
                       if state == "default" else _lively_chain(n, "energy_momentum", dt))
                if step_budget != sim.step_budget:
                    sim = _with_budget(sim, step_budget)
                with warnings.catch_warnings():
                    # sub-steps and budget outcomes are counted
                    warnings.simplefilter("ignore", RuntimeWarning)
                    try:
                        costs, stats = _step_costs(sim, steps, repeats)
                    except SimulationError:
                        rows.append({"state": state, "n": n, "dt": dt, "failed": True})
                        continue
                median = float(np.median(costs))
                rows.append({
                    "state": state, "n": n, "dt": dt, "failed": False,
                    "median_us": median * 1e6, "worst_us": float(costs.max()) * 1e6,
                    "worst_over_median": float(costs.max()) / median,
                    "fallback_fraction": stats["fallback_steps"] / stats["steps"],
                    "path_fraction": stats.get("path_steps", 0) / stats["steps"],
                    "budget_fraction": stats["budget_steps"] / stats["steps"],
                    "energy_drift": stats["drift"],
                    "mean_iterations": stats["newton_iterations"] / stats["steps"],
                    "mean_charged": stats["charged_iterations"] / stats["steps"],
                    "max_iterations": stats["max_iterations"]})
    return {"steps": steps, "repeats": repeats, "step_budget": step_budget, "rows": rows}


def print_solver_section(result):
    print(f"energy_momentum on spherical chains, {result['steps']} steps, step_budget "
          f"{result.get('step_budget')} (worst: the slowest step's minimum over "
          f"{result['repeats']} identical runs; path: steps taken whole along the path of their "
          "solution in h; iterations count sub-steps; charged: every solve's, failed ones at "
          "their cap; drift: energy change / |energy|)")
    rows = [["state", "links", "1/dt", "fallbacks", "path", "budget", "median us", "worst us",
             "worst/median", "mean iter", "charged", "max iter", "drift"]]
    for r in result["rows"]:
        head = [r["state"], r["n"], f"{1.0 / r['dt']:.0f}"]
        if r["failed"]:
            rows.append([*head, "fails", "", "", "", "", "", "", "", "", ""])
            continue
        rows.append([*head, f"{100 * r['fallback_fraction']:.1f} %",
                     f"{100 * r.get('path_fraction', 0.0):.1f} %",
                     f"{100 * r['budget_fraction']:.1f} %", f"{r['median_us']:.1f}",
                     f"{r['worst_us']:.1f}", f"{r['worst_over_median']:.1f}",
                     f"{r['mean_iterations']:.1f}", f"{r['mean_charged']:.1f}",
                     r["max_iterations"], f"{r['energy_drift']:.1e}"])
    print("\n".join("  " + line for line in format_table(rows)))


def _mujoco_stack(n, dt, size=0.1, mass=1.0, friction=0.5):
    """The ``box_stack`` scenario in MuJoCo (its default soft contacts and solver)."""
    import mujoco

    bodies = "".join(
        f'<body pos="0 0 {size * (2 * k + 1)!r}"><freejoint/><geom type="box" '
        f'size="{size} {size} {size}" mass="{mass}" friction="{friction} 0.005 0.0001"/></body>'
        for k in range(n))
    xml = (f'<mujoco><option timestep="{dt!r}" gravity="0 0 -9.81"/><worldbody>'
           f'<geom type="plane" size="5 5 0.1" friction="{friction} 0.005 0.0001"/>'
           f"{bodies}</worldbody></mujoco>")
    model = mujoco.MjModel.from_xml_string(xml)
    return model, mujoco.MjData(model)


def _stack_errors(positions, x0, size):
    """(largest drift of a box centre from where it started, largest penetration: of the
    bottom box into the ground or of a box into the one below), over (steps, n, 3) positions."""
    drift = float(np.abs(positions - x0).max())
    ground = size - positions[:, 0, 2]
    pairs = 2 * size - np.diff(positions[:, :, 2], axis=1)
    return drift, float(max(ground.max(), pairs.max() if pairs.size else 0.0, 0.0))


def _trace(step, where, steps):
    """(steps, n, 3): ``where()`` after each of ``steps`` calls of ``step()``."""
    first = where()
    out = np.empty((steps, *first.shape))
    for k in range(steps):
        step()
        out[k] = where()
    return out


def _sliding_box(integrator, dt, speed=2.0, friction=0.5):
    """rtrigid's sliding box (a 0.2 m cube of 1 kg on the ground, both of ``friction``)."""
    from rtrigid.model import Model
    from rtrigid.simulation import Simulation

    half = (0.1, 0.1, 0.1)
    m = Model()
    m.add_ground(friction=friction)
    m.add_body("box", 1.0, (1.0 / 150.0,) * 3, shape=("box", {"half_extents": half}),
               friction=friction)
    sim = Simulation(m, integrator, dt)
    sim.set_position("box", (0.0, 0.0, 0.1))
    sim.set_velocity("box", (speed, 0.0, 0.0))
    return sim


# the schemes the contact section times (every registry scheme that steps contacts, but the
# 4th-order composition: five EM stages a step)
CONTACT_SCHEMES = ("semi_implicit_euler", "nullspace_rk4", "energy_momentum")


def contact_section(repeats=7, with_mujoco=True, dt=1.0 / 240.0, sizes=(5, 10), seconds=10.0,
                    with_pybullet=True):
    """The ``box_stack`` scenario of 5 and 10 boxes at dt = 1/240: median us/step (240 steps
    from rest, restored between repeats) per contact integrator, MuJoCo (default Euler, soft
    contacts) and PyBullet (its defaults) side by side, and over ``seconds`` the largest drift
    and penetration; then a box sliding from 2 m/s at mu = 0.5: us/step over its first 240
    steps and where it stops after 1 s (v^2 / (2 mu g) = 0.4077 m)."""
    use_mujoco = with_mujoco and mujoco_ref.available()
    use_pybullet = with_pybullet and pybullet_ref.available()
    rows = []
    steps = int(round(seconds / dt))
    schemes = CONTACT_SCHEMES
    for n in sizes:
        row = {"n": n}
        for integ in schemes:
            sim = scenarios.build("box_stack", integrator=integ, dt=dt, n=n)
            row[integ] = median_step_cost(sim, 240, repeats) * 1e6
            x0 = sim.x.copy()
            trace = _trace(lambda: sim.step(1), lambda: sim.x, steps)
            row[f"{integ}_drift_m"], row[f"{integ}_penetration_m"] = _stack_errors(trace, x0,
                                                                                  0.1)
        if use_mujoco:
            import mujoco

            model, data = _mujoco_stack(n, dt)
            row["mujoco"] = _mujoco_time(model, data, 240, repeats) * 1e6
            model, data = _mujoco_stack(n, dt)
            mujoco.mj_forward(model, data)
            x0 = data.xpos[1:].copy()
            trace = _trace(lambda: mujoco.mj_step(model, data), lambda: data.xpos[1:], steps)
            row["mujoco_drift_m"], row["mujoco_penetration_m"] = _stack_errors(trace, x0, 0.1)
        if use_pybullet:
            cid, bodies = pybullet_ref.box_stack(n, dt)
            row["pybullet"] = pybullet_ref.time_per_step(cid, 240, repeats) * 1e6
            pybullet_ref.close(cid)
            cid, bodies = pybullet_ref.box_stack(n, dt)
            x0 = pybullet_ref.positions(cid, bodies)
            trace = _trace(lambda: pybullet_ref.step(cid), lambda: pybullet_ref.positions(
                cid, bodies), steps)
            pybullet_ref.close(cid)
            row["pybullet_drift_m"], row["pybullet_penetration_m"] = _stack_errors(trace, x0,
                                                                                  0.1)
        for ref in ("mujoco", "pybullet"):
            if ref in row:
                for integ in schemes:
                    row[f"{integ}/{ref}"] = row[integ] / row[ref]
        rows.append(row)
    slide = {}
    for integ in schemes:
        sim = _sliding_box(integ, dt)
        slide[integ] = median_step_cost(sim, 240, repeats) * 1e6
        sim.step(int(round(1.0 / dt)))
        slide[f"{integ}_stop_m"] = float(sim.pose("box")[0][0])
    if use_mujoco:
        import mujoco

        model, data = _mujoco_stack(1, dt)
        data.qvel[0] = 2.0
        slide["mujoco"] = _mujoco_time(model, data, 240, repeats) * 1e6
        mujoco.mj_step(model, data, int(round(1.0 / dt)))
        slide["mujoco_stop_m"] = float(data.xpos[1, 0])
    if use_pybullet:
        cid, body = pybullet_ref.sliding_box(dt)
        slide["pybullet"] = pybullet_ref.time_per_step(cid, 240, repeats) * 1e6
        pybullet_ref.step(cid, int(round(1.0 / dt)))
        slide["pybullet_stop_m"] = float(pybullet_ref.positions(cid, [body])[0, 0])
        pybullet_ref.close(cid)
    return {"dt": dt, "seconds": seconds, "stacks": rows, "sliding_box": slide,
            "quadruped": quadruped_case(repeats, use_mujoco, dt)}


def quadruped_case(repeats=7, with_mujoco=True, dt=1.0 / 240.0, settle=2.0):
    """Contacts through joints: the ``quadruped_on_ground`` scenario (a box on four servo
    legs, 5 bodies, 4 hinges) standing after ``settle`` s: median us/step over 240 steps per
    contact integrator and MuJoCo's twin (:func:`mujoco_ref.build_tree` with contacts; Euler,
    soft contacts), the torso's height (m; 0.27 by the geometry) and the feet's total normal
    force over the weight."""
    weight = float(np.linalg.norm(scenarios.quadruped_model().gravity)) * 5.2
    out = {}
    n = int(round(settle / dt))
    for integ in CONTACT_SCHEMES:
        sim = scenarios.build("quadruped_on_ground", integrator=integ, dt=dt)
        sim.step(n)
        out[integ] = median_step_cost(sim, 240, repeats) * 1e6
        out[f"{integ}_height_m"] = float(sim.x[0, 2])
        out[f"{integ}_force/mg"] = sum(c["impulse"][2] for c in sim.contacts()) / dt / weight
    if with_mujoco and mujoco_ref.available():
        import mujoco

        sim = scenarios.build("quadruped_on_ground", integrator="nullspace_rk4", dt=dt)
        model, data, qadr, _ = mujoco_ref.build_tree(sim.model, dt=dt, integrator="Euler",
                                                     contacts=True)
        data.qpos[qadr] = sim.qpos()
        mujoco.mj_step(model, data, n)
        out["mujoco"] = _mujoco_time(model, data, 240, repeats) * 1e6
        force, total = np.zeros(6), 0.0
        for i in range(data.ncon):
            mujoco.mj_contactForce(model, data, i, force)
            total += force[0]
        out["mujoco_height_m"] = float(data.xpos[1, 2])
        out["mujoco_force/mg"] = total / weight
        for integ in CONTACT_SCHEMES:
            out[f"{integ}/mujoco"] = out[integ] / out["mujoco"]
    return out


def print_contact(result):
    print(f"box_stack, dt = {result['dt']:.6g}: median us/step (240 steps from rest), and the "
          f"largest drift and penetration (mm) over {result['seconds']:g} s")
    keys = [k for k in result["stacks"][0] if k != "n"]
    rows = [["boxes", *keys]]
    for row in result["stacks"]:
        rows.append([row["n"], *(f"{row[k] * 1e3:.3f}" if k.endswith("_m") else f"{row[k]:.2f}"
                                 for k in keys)])
    print("\n".join("  " + line for line in format_table(rows)))
    slide = result.get("sliding_box")
    if slide:
        print("sliding box, 2 m/s at mu = 0.5, same dt: median us/step (its first 240 steps) and "
              "where it stops (m; v^2 / (2 mu g) = 0.4077)")
        rows = [list(slide), [f"{v:.4f}" if k.endswith("_m") else f"{v:.2f}"
                              for k, v in slide.items()]]
        print("\n".join("  " + line for line in format_table(rows)))
    quad = result.get("quadruped")
    if quad:
        print("quadruped_on_ground standing (contacts through joints), same dt: median us/step "
              "(240 steps), torso height (m; 0.27 by the geometry), feet's normal force / m g")
        rows = [list(quad), [f"{v:.4f}" if k.endswith("_m") or k.endswith("/mg") else
                             f"{v:.2f}" for k, v in quad.items()]]
        print("\n".join("  " + line for line in format_table(rows)))


LOOP_SCENARIOS = ("four_bar", "slider_crank", "bennett", "delta_robot")


def loop_section(repeats=7, with_mujoco=True, dt=1e-3, steps=50, t_closure=1.0):
    """Closed loops at dt = 1 ms: median us/step of each integrator that steps the scenario
    (timed calls of ``steps`` steps from the scenario's start; ``steps // 10`` for the
    implicit schemes, whose loop step is still mostly Python), MuJoCo RK4 on the same
    mechanism with its loops as equality constraints (:func:`mujoco_ref.build_tree`), and the
    largest loop-closure violation over the first ``t_closure`` s: ours
    (``constraint_error``) under nullspace_rk4, MuJoCo's (its soft constraints' |efc_pos|)."""
    use_mujoco = with_mujoco and mujoco_ref.available()
    rows = []
    for name in LOOP_SCENARIOS:
        row = {"scenario": name, "dt": dt, "us_per_step": {}, "closure_m": {}}
        for integ in scenarios.integrators_for(name):
            sim = scenarios.build(name, integrator=integ, dt=dt)
            n_call = steps if integ == "nullspace_rk4" else max(1, steps // 10)
            row["us_per_step"][integ] = median_step_cost(sim, n_call, repeats) * 1e6
        sim = scenarios.build(name, integrator="nullspace_rk4", dt=dt)
        n = int(round(t_closure / dt))
        worst = 0.0
        for _ in range(n):
            sim.step()
            worst = max(worst, sim.constraint_error())
        row["closure_m"]["nullspace_rk4"] = worst
        if use_mujoco:
            import mujoco

            sim = scenarios.build(name, integrator="nullspace_rk4", dt=dt)
            model, data, qadr, vadr = mujoco_ref.build_tree(sim.model, dt=dt)
            data.qpos[qadr], data.qvel[vadr] = sim.qpos(), sim.qvel()
            mujoco.mj_forward(model, data)
            row["us_per_step"]["mujoco_rk4"] = _mujoco_time(model, data, 10 * steps,
                                                            repeats) * 1e6
            worst = 0.0  # time_per_step left the state where it started
            for _ in range(n):
                mujoco.mj_step(model, data)
                worst = max(worst, float(np.max(np.abs(data.efc_pos))) if data.nefc else 0.0)
            row["closure_m"]["mujoco_rk4"] = worst
        rows.append(row)
    return {"dt": dt, "steps_per_call": steps, "t_closure": t_closure, "rows": rows}


def print_loops(result):
    print(f"closed loops, dt = {result['dt']:g}: median us/step (calls of "
          f"{result['steps_per_call']} steps; MuJoCo RK4 with equality constraints), and the "
          f"largest loop-closure violation over {result['t_closure']:g} s (m)")
    integs = ["nullspace_rk4", "energy_momentum", "energy_momentum4", "mujoco_rk4"]
    rows = [["scenario", *integs, "closure ours", "closure MuJoCo"]]
    for row in result["rows"]:
        cost, closure = row["us_per_step"], row["closure_m"]
        rows.append([row["scenario"], *(f"{cost[i]:.1f}" if i in cost else "-" for i in integs),
                     f"{closure['nullspace_rk4']:.2g}",
                     f"{closure['mujoco_rk4']:.2g}" if "mujoco_rk4" in closure else "-"])
    print("\n".join("  " + line for line in format_table(rows)))


def seven_link_arm():
    """A 7-link arm of 0.3 m rods (2.2 .. 1.0 kg), revolute joints alternating about the link
    axis (roll) and across it (pitch), hanging from the world origin under gravity."""
    from rtrigid.model import Model

    m = Model()
    length = 0.3
    for i in range(7):
        mass = 2.2 - 0.2 * i
        m.add_body(f"link{i}", mass, scenarios.rod_inertia(mass, length, 0.04))
        m.add_joint("revolute", None if i == 0 else i - 1, i,
                    axis_parent=(0.0, 0.0, 1.0) if i % 2 == 0 else (0.0, 1.0, 0.0),
                    anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.0, 0.0, length / 2),
                    anchor_child=(0.0, 0.0, -length / 2))
    return m


def servo_arm(n):
    """The arms of the control-tick figures: the ``arm`` scenario's 2-link arm, or
    :func:`seven_link_arm` with a position servo on every joint (kp 50, kv 1: inside
    nullspace_rk4's stable range at dt = 1 ms)."""
    if n == 2:
        return scenarios.build("arm", integrator="nullspace_rk4").model
    m = seven_link_arm()
    for j in range(7):
        m.add_actuator(j, "position", kp=50.0, kv=1.0, name=f"servo{j}")
    return m


def _median_us(f, repeats, calls, timer=time.perf_counter):
    import statistics
    import timeit

    f()
    return statistics.median(timeit.repeat(f, number=calls, repeat=repeats,
                                           timer=timer)) / calls * 1e6


TICK_SCHEMES = ("nullspace_rk4", "semi_implicit_euler", "energy_momentum")


def _alternated_medians(funcs, repeats, calls, timer):
    """{key: median us per call} of ``funcs`` (key -> callable), timed in rounds that take
    each in turn, so a change of the machine's load falls on all of them alike."""
    import statistics

    for f in funcs.values():
        f()
    runs = {k: [] for k in funcs}
    for _ in range(repeats):
        for k, f in funcs.items():
            t0 = timer()
            for _ in range(calls):
                f()
            runs[k].append((timer() - t0) / calls * 1e6)
    return {k: statistics.median(v) for k, v in runs.items()}


def control_ticks(repeats=7, calls=2000, with_mujoco=True, cpu_time=False):
    """Median microseconds of one control tick on the 2- and 7-link servo arms at dt = 1 ms,
    side by side: rtrigid's ``set_controls(u); step(1); qpos(); qvel()`` per tree integrator
    (:data:`TICK_SCHEMES`) and MuJoCo's ``d.ctrl[:] = u; mj_step(m, d); d.qpos.copy();
    d.qvel.copy()`` with its default (Euler) and its RK4 integrator on the same arm
    (``mujoco_ref.build_tree``), and the ratios; then the per-call cost of the calls a
    control loop makes.  The ticks of one arm are timed in alternating rounds.

    ``cpu_time``: time with the thread's CPU clock (``time.thread_time``) instead of the wall
    clock, both sides alike: on a shared machine under load the wall clock also counts the
    time other jobs hold the core, several times a 3 us tick (measured here at load 6)."""
    from rtrigid.simulation import Simulation

    timer = time.thread_time if cpu_time else time.perf_counter

    out = {"calls": calls, "repeats": repeats, "cpu_time": cpu_time, "arms": {}}
    for n in (2, 7):
        model = servo_arm(n)
        ticks = {}
        for integ in TICK_SCHEMES:
            sim = Simulation(model, integ, 1e-3)
            u = np.linspace(0.2, -0.2, sim.na)

            def tick(sim=sim, u=u):
                sim.set_controls(u)
                sim.step(1)
                sim.qpos()
                sim.qvel()
            ticks[integ] = tick
        mujoco = None
        if with_mujoco:
            try:
                import mujoco

                from rtrigid.references.mujoco_ref import build_tree
            except ImportError:
                mujoco = None
            if mujoco is not None:
                for key, mj_integ in (("mujoco_euler", "Euler"), ("mujoco_rk4", "RK4")):
                    mjm, d, _, _ = build_tree(model, dt=1e-3, integrator=mj_integ)
                    u = np.linspace(0.2, -0.2, mjm.nu)

                    def mj_tick(mjm=mjm, d=d, u=u):
                        d.ctrl[:] = u
                        mujoco.mj_step(mjm, d)
                        d.qpos.copy()
                        d.qvel.copy()
                    ticks[key] = mj_tick
        row = _alternated_medians(ticks, repeats, calls, timer)
        if mujoco is not None:
            for integ in TICK_SCHEMES:
                row[f"{integ}/mujoco_euler"] = row[integ] / row["mujoco_euler"]
                row[f"{integ}/mujoco_rk4"] = row[integ] / row["mujoco_rk4"]
        out["arms"][f"{n}-link"] = row
    calls_us = {}
    for integ in TICK_SCHEMES:
        sim = Simulation(servo_arm(2), integ, 1e-3)
        u = np.array([0.3, -0.4])
        per = {"set_controls(u)": lambda: sim.set_controls(u),
               "set_control(name, x)": lambda: sim.set_control("joint1", 0.3),
               "set_joint_force(j, x)": lambda: sim.set_joint_force(1, 0.1),
               "apply_force(b, f)": lambda: sim.apply_force(1, (0.0, 0.0, 1e-9)),
               "apply_force(b, f, point=p)": lambda: sim.apply_force(1, (0.0, 0.0, 1e-9),
                                                                   point=(0.1, 0.0, 0.0)),
               "apply_torque(b, t)": lambda: sim.apply_torque(1, (0.0, 1e-9, 0.0)),
               "energy()": sim.energy, "qpos()": sim.qpos, "qvel()": sim.qvel,
               "step(1)": lambda: sim.step(1)}
        calls_us[integ] = {k: _median_us(f, repeats, calls, timer) for k, f in per.items()}
    out["call_us"] = calls_us
    return out


def print_control_ticks(result):
    print(f"control tick, median us ({result['repeats']} x {result['calls']} ticks), dt = 1 ms: "
          "rtrigid set_controls(u); step(1); qpos(); qvel() against MuJoCo d.ctrl[:] = u; "
          "mj_step; d.qpos.copy(); d.qvel.copy()")
    keys = list(next(iter(result["arms"].values())))
    rows = [["arm", *keys]]
    for arm, row in result["arms"].items():
        rows.append([arm, *(f"{row[k]:.2f}" for k in keys)])
    print("\n".join("  " + line for line in format_table(rows)))
    print("per call, median us (2-link arm)")
    names = list(next(iter(result["call_us"].values())))
    rows = [["call", *result["call_us"]]]
    for name in names:
        rows.append([name, *(f"{v[name]:.2f}" for v in result["call_us"].values())])
    print("\n".join("  " + line for line in format_table(rows)))


def query_costs(repeats=5, calls=5000):
    """Microseconds per call (best of ``repeats`` timed loops of ``calls`` calls) of the
    generalized-coordinate calls and dynamics queries on :func:`seven_link_arm` at dt = 1 ms,
    per tree integrator, the arm moving at 0.5 rad/s per joint."""
    import timeit

    from rtrigid.simulation import Simulation

    out = {}
    for integ in ("nullspace_rk4", "energy_momentum"):
        sim = Simulation(seven_link_arm(), integ, 1e-3)
        sim.set_qvel(np.full(7, 0.5))
        sim.step(10)
        q, v, a = sim.qpos(), sim.qvel(), np.ones(7)
        sim.mass_matrix()  # compile / load the queries outside the timing
        calls_of = {
            "step(1)": lambda: sim.step(1),
            "qpos()": sim.qpos,
            "qvel()": sim.qvel,
            "step(1); qvel()": lambda: (sim.step(1), sim.qvel()),
            "set_joint_force(j, x)": lambda: sim.set_joint_force(3, 0.1),
            "set_qpos(q)": lambda: sim.set_qpos(q),
            "set_qvel(v)": lambda: sim.set_qvel(v),
            "mass_matrix()": sim.mass_matrix,
            "bias_forces()": sim.bias_forces,
            "inverse_dynamics(qacc)": lambda: sim.inverse_dynamics(a),
            "jacobian(b, p)": lambda: sim.jacobian(6, (0.0, 0.0, 0.15)),
        }
        out[integ] = {name: min(timeit.repeat(f, number=calls, repeat=repeats)) / calls * 1e6
                      for name, f in calls_of.items()}
    return out


def print_table(result):
    integs = integrators.names() + ["mujoco_rk4"]
    print("median us/step, one compiled call of", result["steps_per_call"], "steps,",
          result["repeats"], "repeats ('-': the integrator does not support the scenario, or "
          "MuJoCo cannot build it; '*': timed over the first steps only, the scheme's state "
          "would not stay finite for all of them at this dt)")
    rows = [["scenario", "dt", *integs]]
    for row in result["rows"]:
        cost, window = row["us_per_step"], row.get("window", {})
        rows.append([row["scenario"], f"{row['dt']:g}",
                     *(f"{cost[i]:.3f}{'*' if i in window else ''}" if i in cost else "-"
                       for i in integs)])
    print("\n".join(format_table(rows)))
    s = result["summary"]
    for k, v in s["single_call_us"].items():
        print(f"single sim.step() call, {k}: {v:.3f} us (overhead over the in-kernel step "
              f"{s['single_call_overhead_us'][k]:.3f} us)")
    if "ratio_to_mujoco_rk4_gyro_top_dt_1ms" in s:
        for k, v in s["ratio_to_mujoco_rk4_gyro_top_dt_1ms"].items():
            print(f"gyro_top dt=1ms, {k} / MuJoCo RK4 time per step: {v:.3f}")
    print(f"`rtrigid run gyro_top --t-end 0.01`, fresh process, warm cache: "
          f"{s['cold_run_gyro_top_t_end_0.01_s']:.2f} s")
    c = result["chain"]
    print(f"spherical chain, dt = {c['dt']:.6g}: median us/step against the number of links")
    keys = [k for k in c["scaling_us_per_step"][0] if k != "n"]
    rows = [["links", *keys]]
    for row in c["scaling_us_per_step"]:
        rows.append([row["n"], *("fails" if row.get(k) is None else f"{row[k]:.2f}"
                                 for k in keys)])
    print("\n".join("  " + line for line in format_table(rows)))
    print("  |energy drift| over 10 s, n = 10:",
          ", ".join(f"{k} {v:.3g}" for k, v in c["energy_drift_10s_n10"].items()))
    if "solver" in result:
        print_solver_section(result["solver"])
    if "contact" in result:
        print_contact(result["contact"])
    if "loops" in result:
        print_loops(result["loops"])
    if "control_ticks" in result:
        print_control_ticks(result["control_ticks"])


def main(args):
    if getattr(args, "contact", False):
        result = {"contact": contact_section(args.repeats, not args.no_mujoco)}
        return report(result, args, lambda r: print_contact(r["contact"]))
    result = collect(steps=args.steps, repeats=args.repeats, with_mujoco=not args.no_mujoco)
    return report(result, args, print_table)


def report(result, args, table):
    """Write the result as JSON to ``args.out`` if given; print the JSON (``--json``) or the table."""
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    if args.json:
        print(text)
    else:
        table(result)
    return 0
