"""``energy_momentum4``: the energy-momentum step is symmetric, so its symmetric composition is
of order 4 and conserves what the step conserves.

References: scipy DOP853 at rtol = 1e-13 (free body, heavy top; also the heavy top on a
spherical joint, stepped by the tree kernels), the analytic steady precession of the gyro top,
and ``nullspace_rk4`` at a 64-256x smaller step on jointed systems (its own error there is
~1e-14, checked against the step halved once more).
"""
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import rtrigid.maths.quat as rq
from rtrigid import cli, integrators, scenarios
from rtrigid.backends.compositions import COMPOSITIONS
from rtrigid.model import Model
from rtrigid.simulation import Simulation
from rtrigid.references.scipy_ref import fitted_order, rigid_body_reference
from tests.helpers import lively, randomize_joints, spring_model, stored_rates, tree_of_kinds

ROOT = Path(__file__).resolve().parents[2]
EM4 = "energy_momentum4"
OPTIONS = [{"composition": c} for c in COMPOSITIONS]
IDS = list(COMPOSITIONS)


def kernel(sim):
    """The simulation's own step kernel, to step it by -dt (the façade refuses dt <= 0)."""
    return integrators.get(sim.integrator).module(sim.backend.name, sim.options,
                                                  springs=bool(sim.model.springs))[1]


def mixed_tree(integrator=EM4, dt=0.01, options=None):
    """A free root carrying spherical, revolute (skew axes) and fixed joints, random state."""
    sim = Simulation(tree_of_kinds(["spherical", "revolute", "fixed", "revolute"], seed=3),
                     integrator, dt, options=options)
    randomize_joints(sim, np.random.default_rng(4))
    return sim


def heavy_top_on_a_joint(integrator=EM4, dt=0.01, options=None):
    """The heavy top's body held by a spherical joint to the world: the tree kernels."""
    h = scenarios.build("heavy_top")
    body = h.model.bodies[0]
    m = Model(gravity=h.model.gravity)
    m.add_body("top", body.mass, body.inertia)
    m.add_joint("spherical", None, "top", anchor_parent=body.pivot_world,
                anchor_child=body.pivot_body)
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_orientation(0, h.q[0])
    sim.set_angular_velocity(0, h.w[0], frame="body")
    return sim


def tree_fields(sim):
    """The tree state that determines the next step -- coordinates and the end-of-step
    velocities and momenta -- and the bodies' poses.  The stored rates nu are left out: they
    are the mean rates of the last step (a predictor's seed), the same for a step and its
    reverse, not a state that the reverse step restores."""
    b = sim.backend
    return {"Qg": b.Qg, "x": b.x, "q": b.q, "v": b.v, "w": b.w, "L": b._L}


def body_fields(sim):
    from rtrigid.backends.bodies.common import STATE_FIELDS, state_view
    return dict(zip([f for f, _ in STATE_FIELDS], state_view(sim.backend.S, sim.nb)))


def forward_and_back(sim, dt, fields):
    """Relative change of each state field after a step h and after h then -h."""
    start = {k: v.copy() for k, v in fields(sim).items()}
    step = kernel(sim)
    assert step(1, dt, sim.backend.F, sim.backend.I) == 0
    moved = {k: np.abs(v - start[k]).max() / max(1.0, np.abs(start[k]).max())
             for k, v in fields(sim).items()}
    assert step(1, -dt, sim.backend.F, sim.backend.I) == 0
    back = {k: np.abs(v - start[k]).max() / max(1.0, np.abs(start[k]).max())
            for k, v in fields(sim).items()}
    return moved, back


# -- the base step is symmetric ---------------------------------------------------------------

def _loaded_free_body(integrator="energy_momentum"):
    sim = scenarios.build("free_body", integrator=integrator, dt=0.05)
    sim.apply_torque(0, (0.3, -0.2, 0.5))
    sim.apply_force(0, (1.0, 2.0, -3.0), point=(0.1, 0.0, 0.2), frame="body")
    return sim


def _spring_body(integrator="energy_momentum"):
    sim = Simulation(spring_model(True, 0.5), integrator, 0.02)
    sim.set_angular_velocity(0, (3.0, -2.0, 5.0), frame="body")
    return sim


SINGLE = {
    "gyro_top": lambda i: scenarios.build("gyro_top", integrator=i, dt=0.01),
    "heavy_top": lambda i: scenarios.build("heavy_top", integrator=i, dt=0.02),
    "free_body_with_loads": _loaded_free_body,
    "spring_appendix_d": _spring_body,
}
TREES = {
    "lively_chain": lambda i: lively(i, 1.0 / 60.0, n=5),
    "mixed_tree": lambda i: mixed_tree(i, dt=0.02),
    "gimbal": lambda i: scenarios.build("gimbal_gyroscope", integrator=i, dt=0.01),
}


@pytest.mark.parametrize("integrator", ["energy_momentum", EM4])
@pytest.mark.parametrize("case", list(SINGLE))
def test_single_body_step_is_symmetric(case, integrator):
    """A step h then -h returns every state field to the start to round-off (the step moved
    it by O(1)).  QUAT.EM is symmetric: swapping (z0, z1) and negating h leaves its equations
    as they were, the Cayley factor of -h being the inverse of that of h; the applied torque's
    exact balance and the mid-point translation are symmetric too.  So is the composition."""
    sim = SINGLE[case](integrator)
    sim.step(3)
    moved, back = forward_and_back(sim, sim.dt, body_fields)
    assert max(moved.values()) > 1e-3
    assert max(back.values()) <= 1e-13, back


@pytest.mark.parametrize("integrator", ["energy_momentum", EM4])
@pytest.mark.parametrize("case", list(TREES))
def test_jointed_step_is_symmetric(case, integrator):
    """The jointed step too: mean arms (R0 + R1)/2, mean axes and the mid-point rule are
    symmetric in the two configurations, and the canonical root of -h's increment is minus
    that of h, so even the joint quaternions come back with their sign.

    Positions come back to 1e-15 (1.3e-14 for the composition's ten solves on the mixed
    tree, each stopping at its round-off floor).  Velocities and momenta to ~1e-13
    (measured: 4e-17 to 1.2e-13 for one step, up to 8e-13 for the composition): the tree's
    velocity is a difference of positions over h, v1 = 2 (x1 - x0)/h - v0, which carries
    eps |x| / h, and its Newton iteration stops at that floor."""
    sim = TREES[case](integrator)
    sim.step(3)
    moved, back = forward_and_back(sim, sim.dt, tree_fields)
    assert max(moved.values()) > 1e-3
    assert max(back[k] for k in ("Qg", "x", "q")) <= (1e-14 if integrator == "energy_momentum"
                                                      else 3e-14), back
    assert max(back[k] for k in ("v", "w", "L")) <= (2e-13 if integrator == "energy_momentum"
                                                     else 2e-12), back


# -- order 4 against independent references --------------------------------------------------

def _config_error(sim, t_end=1.0):
    fm_body = sim.model.bodies[0]
    com = np.zeros(3) if fm_body.pivot_body is None else -np.asarray(fm_body.pivot_body)
    if sim.backend.name == "tree":  # the top on its joint: the child anchor is the pivot
        com = -np.asarray(sim.model.joints[0].anchor_child)
    j_ref = np.diag(fm_body.inertia) + fm_body.mass * (com @ com * np.eye(3) - np.outer(com, com))
    _, R, _ = rigid_body_reference(rq.to_matrix(sim.q[0]), sim.w[0], j_ref, t_end, com=com,
                                   mass=fm_body.mass, gravity=sim.gravity)
    sim.step(int(round(t_end / sim.dt)))
    return np.linalg.norm(R[-1] @ rq.to_matrix(sim.q[0]).T - np.eye(3))


BUILDERS = {
    "free_body": lambda dt, o: scenarios.build("free_body", integrator=EM4, dt=dt, options=o),
    "heavy_top": lambda dt, o: scenarios.build("heavy_top", integrator=EM4, dt=dt, options=o),
    "heavy_top_on_a_spherical_joint": lambda dt, o: heavy_top_on_a_joint(EM4, dt, o),
}


@pytest.mark.parametrize("options", OPTIONS, ids=IDS)
@pytest.mark.parametrize("case", list(BUILDERS))
def test_order_four_against_scipy(case, options):
    """000 Fig. 1 setting, ||R_ref R^T - I||_F at T = 1 (measured: 4.00 for every case and
    both compositions, 3.98 for the triple jump on the jointed top)."""
    dts = [0.01, 0.005, 0.0025]
    errs = [_config_error(BUILDERS[case](dt, options)) for dt in dts]
    assert abs(fitted_order(dts, errs) - 4.0) <= 0.2, errs


def _pose_error(a, b):
    return max(np.abs(a.x - b.x).max(),
               max(np.abs(rq.to_matrix(p) - rq.to_matrix(r)).max() for p, r in zip(a.q, b.q)))


@pytest.mark.parametrize("case,dts", [
    ("chain", [1 / 60, 1 / 120, 1 / 240]),        # spherical joints
    ("mixed_tree", [1 / 20, 1 / 40, 1 / 80]),     # free root, spherical, revolute, fixed
    ("gimbal", [1 / 100, 1 / 200, 1 / 400]),      # three revolute joints
])
def test_jointed_order_four_against_rk4(case, dts):
    """Cross-check between schemes over 0.5 s: poses against nullspace_rk4 at 1/15360 s,
    which agrees with itself at half that step to 1e-13 (measured: 3.98, 4.01, 3.97)."""
    build = {"chain": lively, "mixed_tree": lambda i, dt: mixed_tree(i, dt),
             "gimbal": lambda i, dt: scenarios.build("gimbal_gyroscope", integrator=i, dt=dt)}[case]
    t_end = 0.5
    ref = build("nullspace_rk4", 1 / 15360)
    ref.step(7680)
    half = build("nullspace_rk4", 1 / 7680)
    half.step(3840)
    assert _pose_error(ref, half) < 1e-12
    errs = []
    for dt in dts:
        sim = build(EM4, dt)
        sim.step(int(round(t_end / dt)))
        errs.append(_pose_error(sim, ref))
    assert abs(fitted_order(dts, errs) - 4.0) <= 0.2, errs


@pytest.mark.parametrize("options", OPTIONS, ids=IDS)
def test_gyro_top_centre_of_mass_error_falls_at_order_four(options):
    """000 Fig. 3 setting against the analytic steady precession (measured 4.0)."""
    dts = [0.002, 0.001, 0.0005]
    errs = []
    for dt in dts:
        sim = scenarios.build("gyro_top", integrator=EM4, dt=dt, options=options)
        sim.step(int(round(1.0 / dt)))
        ref = scenarios.info(sim)["reference"](sim.t)
        errs.append(np.linalg.norm(sim.x[0] - ref) / np.linalg.norm(ref))
    assert abs(fitted_order(dts, errs) - 4.0) <= 0.2, errs


def _run_json(capsys, *argv):
    assert cli.main(["run", "gyro_top", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_gyro_top_run_command_centre_of_mass_error(capsys):
    """`rtrigid run gyro_top --integrator energy_momentum4` (10 s): the centre of mass within
    1e-2 of the analytic one at dt = 1 ms (energy_momentum: 0.17), 1e-3 at 0.5 ms; energy and
    h_z kept as energy_momentum keeps them.  Measured: 1.8e-5 and 1.1e-6."""
    em = _run_json(capsys, "--integrator", "energy_momentum")
    r1 = _run_json(capsys, "--integrator", EM4)
    r2 = _run_json(capsys, "--integrator", EM4, "--dt", "0.0005")
    assert r1["steps"] == 10000 and r2["steps"] == 20000
    assert r1["max_rel_reference_error"] <= 1e-2
    assert r1["max_rel_reference_error"] <= em["max_rel_reference_error"] / 17.0
    assert r2["max_rel_reference_error"] <= 1e-3
    for r in (r1, r2):
        assert r["max_rel_energy_drift"] <= 1e-13 and r["max_rel_momentum_drift"] <= 1e-13
        assert r["solver"]["fallback_steps"] == 0


# -- conservation -----------------------------------------------------------------------------

def _max_drifts(sim, steps, chunk, axes):
    e0 = sim.energy()
    l0 = sim.momentum()[1]
    scale = np.linalg.norm(l0)
    worst_e = worst_l = 0.0
    for _ in range(steps // chunk):
        sim.step(chunk)
        worst_e = max(worst_e, abs(sim.energy() - e0) / abs(e0))
        worst_l = max(worst_l, np.abs(sim.momentum()[1][axes] - l0[axes]).max() / scale)
    return worst_e, worst_l


@pytest.mark.parametrize("options", OPTIONS, ids=IDS)
@pytest.mark.parametrize("name,dt,axes", [("free_body", 0.02, [0, 1, 2]),
                                          ("gyro_top", 0.01, [2]), ("heavy_top", 0.01, [2])])
def test_energy_and_angular_momentum_over_1e5_steps(name, dt, axes, options):
    """Measured maxima over 1e5 steps: 2e-14 to 1.3e-13."""
    sim = scenarios.build(name, integrator=EM4, dt=dt, options=options)
    e, l = _max_drifts(sim, 100000, 1000, axes)
    assert e <= 1e-12 and l <= 1e-12


def test_jointed_energy_and_vertical_momentum():
    """A swinging 3-link spherical chain (gravity along z, pivot at the origin: h_z is kept)
    over 2e4 steps.  The jointed solve leaves a round-off walk of ~1e-13 per 1e3 steps in
    both schemes (measured over 1e5 steps at 1/120 s: energy_momentum 8e-13, this scheme,
    with five solves a step, 2.5e-12)."""
    sim = lively(EM4, 1.0 / 120.0)
    e, l = _max_drifts(sim, 20000, 1000, [2])
    assert e <= 5e-12 and l <= 5e-12
    assert sim.constraint_error() < 1e-12


# -- the contract: snapshots, fallback, statistics, no allocation ----------------------------

def test_jointed_restore_reproduces_the_run_bit_for_bit():
    """The stage predictor reads the state before the last step: both are in the snapshot."""
    sim = lively(EM4, 1.0 / 120.0, n=5)
    sim.step(20)
    snap = sim.snapshot()
    sim.step(50)
    a, stats = sim.backend.S.copy(), sim.solver_stats()
    sim.restore(snap)
    sim.step(50)
    assert np.array_equal(sim.backend.S, a) and sim.solver_stats() == stats


def test_stored_rates_are_the_mean_rates_of_the_step():
    """nu after a step is the increment of the coordinates over the whole step / h, as for
    energy_momentum (so its predictor extrapolates them), on the near Cayley root."""
    sim = lively(EM4, 1.0 / 60.0)
    sim.step(5)
    Q0 = sim.backend.Qg.copy()
    sim.step(1)
    for b in range(sim.nb):  # a spherical chain: joint b's quaternion at 4 b
        s0, s1 = Q0[4 * b:4 * b + 4], sim.backend.Qg[4 * b:4 * b + 4]
        a = stored_rates(sim, b) * sim.dt / 4.0
        assert np.linalg.norm(a) < 1.0
        c = np.r_[1.0 - a @ a, 2.0 * a] / (1.0 + a @ a)
        np.testing.assert_allclose(rq.mul(s0, c), s1, rtol=0, atol=1e-14)


def test_jointed_fallback_is_taken_counted_and_conserves_energy():
    """With the smallest Newton cap, lively steps fall back to composed sub-steps; energy and
    h_z are kept through them, and statistics count every stage's iterations."""
    base = lively(EM4, 1.0 / 40.0)  # (at 1/60 three iterations suffice from the predictor)
    sim = Simulation(base.model, EM4, base.dt, max_iter=3)
    for name in base.joint_names:  # the lively state, with the tight cap
        sim.set_joint_position(name, base.joint_position(name))
        sim.set_joint_velocity(name, base.joint_velocity(name))
    assert np.allclose(sim.backend.S, base.backend.S, rtol=0, atol=1e-14)
    e0, lz0 = sim.energy(), sim.momentum()[1][2]
    with pytest.warns(RuntimeWarning, match="sub-steps"):
        sim.step(60)
    stats = sim.solver_stats()
    assert stats["steps"] == 60 and stats["fallback_steps"] > 0
    assert stats["max_iterations"] <= 3 and stats["mean_iterations"] >= 5.0  # 5 stages
    assert abs(sim.energy() - e0) <= 1e-12 * abs(e0)
    assert abs(sim.momentum()[1][2] - lz0) <= 1e-12 * np.linalg.norm(sim.momentum()[1])
    # the same run without the cap takes no sub-step
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        base.step(60)
    assert base.solver_stats()["fallback_steps"] == 0


ALLOC_PROBE = """
import numpy as np, rtrigid as rt
from numba.core.runtime import rtsys
from tests.helpers import lively
sims = [rt.scenarios.build("gyro_top", integrator="energy_momentum4"),
        lively("energy_momentum4", 1 / 240, n=5)]
out = []
for sim in sims:
    sim.step(1)
    counts = []
    for n in (1, 300):
        a = rtsys.get_allocation_stats().alloc
        sim.step(n)
        counts.append(rtsys.get_allocation_stats().alloc - a)
    out.append(counts)
print(out)
"""


def test_kernels_allocate_nothing_per_step():
    """numba's own allocation counter (NUMBA_NRT_STATS) over 1 and 300 steps in one call: the
    same count (the views made once per call), so the step loop allocates nothing."""
    env = dict(os.environ, NUMBA_NRT_STATS="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", ALLOC_PROBE], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    counts = json.loads(out.stdout)
    assert all(one == many for one, many in counts), counts


def test_compositions_are_symmetric_and_of_order_four():
    for stages in COMPOSITIONS.values():
        assert stages == stages[::-1]
        assert abs(sum(stages) - 1.0) < 1e-15 and abs(sum(g ** 3 for g in stages)) < 1e-14


def test_bad_options_are_refused_naming_the_field():
    model = scenarios.build("gyro_top").model
    with pytest.raises(ValueError, match="^options: .*composition"):
        Simulation(model, EM4, 0.001, options={"composition": "yoshida"})
    with pytest.raises(ValueError, match="^options: .*no option 'stages'"):
        Simulation(model, EM4, 0.001, options={"stages": 7})


def test_held_joint_torques_do_exact_discrete_work():
    """Each stage does the exact discrete work tau (theta_k - theta_{k-1}) of a held revolute
    torque (the base scheme's rule), so over a composed step the work telescopes to
    tau (theta_1 - theta_0): energy changes by exactly that."""
    sim = scenarios.build("chain", integrator=EM4, n=5, joint="revolute",
                          omega0=np.random.default_rng(2).normal(size=(5, 3)))
    rng = np.random.default_rng(3)
    worst, work = 0.0, 0.0
    for _ in range(300):
        tau = rng.normal(size=5)
        for j in range(5):
            sim.set_joint_force(j, tau[j])
        q0, e0 = sim.qpos(), sim.energy()
        sim.step(1)
        dw = float(tau @ (sim.qpos() - q0))
        worst = max(worst, abs(sim.energy() - e0 - dw))
        work += dw
    assert worst <= 1e-13 * abs(sim.energy())
    assert abs(work) > 0.1  # the torques did work worth checking
