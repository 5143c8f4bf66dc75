"""``energy_momentum`` on prismatic, cylindrical and planar joints: the
slides' discrete reactions do no work and have no moment, so energy and momenta are kept as on
revolute chains; held forces, servos and limits on slides do their exact discrete work; the
trajectories converge to nullspace_rk4's and agree with MuJoCo's."""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.model import Model
from rtrigid.references import mujoco_ref
from tests.helpers import (chain, limited_link, newton_error, random_tree, randomize_joints,
                           tree_of_kinds)

EM = "energy_momentum"
SLIDE_KINDS = ("revolute", "prismatic", "cylindrical", "planar", "spherical")


def slide_chain(seed, dt=1.0 / 240.0, integrator=EM, kinds=SLIDE_KINDS, gravity=True):
    """A seeded random chain of 3-6 links hanging from the world, each joint drawn from
    ``kinds`` (random axes and anchors), in a lively random state.  A spring across each
    joint with slides (between its two joint points) keeps the slides bounded: they would
    otherwise run off under gravity."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7))
    m = Model(gravity=(0.0, 0.0, -9.81) if gravity else (0.0, 0.0, 0.0))
    for i in range(n):
        mass = rng.uniform(0.5, 2.0)
        m.add_body(f"l{i}", mass, rt.scenarios.rod_inertia(mass, rng.uniform(0.2, 0.5), 0.03))
        kind = kinds[int(rng.integers(len(kinds)))]
        axis = {}
        if kind != "spherical":
            axis = {"axis_parent": rng.normal(size=3), "axis_child": rng.normal(size=3)}
        ap, ac = rng.normal(scale=0.2, size=3), rng.normal(scale=0.2, size=3)
        m.add_joint(kind, None if i == 0 else i - 1, i, anchor_parent=ap, anchor_child=ac,
                    **axis)
        if kind in ("prismatic", "cylindrical", "planar"):
            if i == 0:
                m.add_spring(i, ac, ap, 40.0)
            else:
                m.add_spring_between(i - 1, ap, i, ac, 40.0)
    sim = rt.Simulation(m, integrator, dt)
    randomize_joints(sim, rng)
    return sim


@pytest.mark.parametrize("kinds", [["prismatic", "revolute", "prismatic"],
                                   ["cylindrical", "planar", "spherical", "prismatic",
                                    "revolute", "planar"]])
def test_newton_matrix_is_the_jacobian_with_slides(kinds):
    """The slides' columns and their E rows (the discrete slide direction turns with the
    parent; a cylindrical or planar slide's row against its own turn) are the exact Jacobian:
    a free root carrying a branching tree, at the predictor and away from the solution."""
    sim = rt.Simulation(tree_of_kinds(kinds, seed=2), EM, dt=0.002)
    randomize_joints(sim, np.random.default_rng(4))
    sim.step(30)
    mu = sim.dt * sim.backend.nu
    assert newton_error(sim, mu) < 1e-6  # measured 1.3e-8 and 1.5e-8
    assert newton_error(sim, 1.2 * mu + 1e-3, seed=1) < 1e-6  # 1.2e-8 and 3.5e-8


@pytest.mark.filterwarnings("ignore:energy_momentum. Newton did not converge")
@pytest.mark.parametrize("seed", range(4))
def test_slide_chains_keep_energy_over_ten_thousand_steps(seed):
    """Every kind, 1e4 steps at 1/240 s: energy within 1e-10.  The springs'
    derivatives are left out of the Newton matrix, which then converges linearly; the solver
    counted such a slow contraction as a stall and accepted the step at a residual of up to
    1e-9 (seed 2 drifted 1.9e-10).  A stall now counts only once the updates stop halving:
    measured 2.1e-12 to 1.5e-11.  Sub-steps are allowed."""
    sim = slide_chain(seed)
    e0 = sim.energy()
    sim.step(10000)
    assert abs(sim.energy() - e0) <= 1e-10 * abs(e0)
    assert sim.constraint_error() < 1e-11


def test_a_free_system_with_slides_keeps_its_momenta():
    """No gravity, a free root carrying every kind: the reactions of the slides are equal and
    opposite on one line, so linear and angular momentum stay to round-off."""
    m = tree_of_kinds(["cylindrical", "planar", "prismatic", "spherical", "prismatic",
                       "revolute"], seed=5)
    m.gravity = np.zeros(3)
    for j in m.joints:  # internal springs keep the slides (and the round-off) from growing
        if j.kind in ("prismatic", "cylindrical", "planar"):
            m.add_spring_between(j.parent, j.anchor_parent, j.child, j.anchor_child, 20.0)
    sim = rt.Simulation(m, EM, dt=0.004)
    randomize_joints(sim, np.random.default_rng(6))
    (p0, h0), e0 = sim.momentum(), sim.energy()
    sim.step(2000)
    p1, h1 = sim.momentum()
    # the round-off floor of the mid-point rule grows with |x|/dt (the free root drifts ~20 m
    # here); measured 5e-12, 7e-11 and 1e-12, the same model with spherical and revolute
    # joints instead: 4e-12, 3e-12 and 4e-13
    assert np.abs(p1 - p0).max() <= 1e-10 * np.abs(p0).max()
    assert np.abs(h1 - h0).max() <= 1e-9 * np.abs(h0).max()
    assert abs(sim.energy() - e0) <= 1e-10 * abs(e0)


def test_held_forces_on_slides_do_exact_discrete_work():
    """Random held forces on every coordinate of linear joints (revolute, prismatic,
    cylindrical, planar), redrawn each step: every step's energy change is tau . (q1 - q0)
    to round-off."""
    sim = slide_chain(11, kinds=("revolute", "prismatic", "cylindrical", "planar"))
    rng = np.random.default_rng(12)
    names = sim.joint_names
    worst, work = 0.0, 0.0
    e_start = sim.energy()
    for _ in range(1000):
        tau = [rng.normal(size=len(sim.joint_velocity(j))) for j in names]
        for j, t in zip(names, tau):
            sim.set_joint_force(j, t if len(t) > 1 else float(t[0]))
        q0, e0 = sim.qpos(), sim.energy()
        sim.step(1)
        dw = float(np.concatenate(tau) @ (sim.qpos() - q0))
        worst = max(worst, abs(sim.energy() - e0 - dw))
        work += dw
    scale = max(abs(sim.energy()), abs(e_start), 1.0)
    assert worst <= 1e-12 * scale  # measured 1.4e-13: the chain's own energy round-off
    assert abs(sim.energy() - e_start - work) <= 1e-11 * scale
    assert abs(work) > 0.1


@pytest.mark.parametrize("kind", ["position", "velocity"])
def test_prismatic_actuators_do_exact_work_under_energy_momentum(kind):
    """energy() - actuator_work() stays at its start to round-off (the force at the mean
    coordinate and rate times the increment is the discrete work of the slide's force pair)."""
    gains = {"position": {"kp": 50.0, "kv": 1.0}, "velocity": {"kv": 3.0}}[kind]
    model = chain(3, kind, joint="prismatic", axis=(0.3, 0.2, 1.0), **gains)
    sim = rt.Simulation(model, EM, 2e-3)
    randomize_joints(sim, np.random.default_rng(1))
    sim.set_controls([0.5, -1.0, 0.7])
    e0 = sim.energy()
    sim.step(2000)
    work = sim.actuator_work().sum()
    assert abs(work) > 0.1
    assert abs(sim.energy() - e0 - work) <= 1e-11 * max(1.0, abs(e0), abs(work))


def test_prismatic_servos_settle_under_energy_momentum():
    sim = rt.scenarios.build("arm", integrator=EM, n_links=7, joint="prismatic", kv=40.0)
    sim.step(5000)
    assert np.allclose(sim.qpos(), [0.05] + [-0.08] * 6, atol=1e-3)


def test_energy_momentum_converges_to_nullspace_rk4_at_second_order():
    """Every kind in one chain: the difference to a fine nullspace_rk4 run after 0.5 s falls
    by ~4 per halving of dt."""
    ref = slide_chain(3, dt=1.0 / 4000.0, integrator="nullspace_rk4")
    ref.step(2000)
    errors = []
    for n in (250, 500, 1000):
        sim = slide_chain(3, dt=0.5 / n)
        sim.step(n)
        errors.append(np.abs(sim.qpos() - ref.qpos()).max())
    assert errors[-1] < 5e-4  # measured 2.5e-3, 6.2e-4, 1.5e-4
    assert 3.5 < errors[0] / errors[1] < 4.5 and 3.5 < errors[1] / errors[2] < 4.5


@pytest.mark.skipif(not mujoco_ref.available(), reason="mujoco is a dev dependency")
@pytest.mark.parametrize("seed", range(3))
def test_revolute_prismatic_trees_agree_with_mujoco(seed):
    """Random trees of revolute and prismatic joints (several roots, random gravity) without
    joint springs and dampers, 0.5 s against MuJoCo's RK4 at the same step:
    the difference is energy_momentum's second-order error (falls by 4 per halving of dt;
    measured 3.7e-7 to 1.1e-6 at dt = 1 ms, 9.3e-8 to 2.7e-7 at 0.5 ms)."""
    import mujoco

    model = random_tree(seed)
    for j in model.joints:
        j.stiffness = j.damping = 0.0
    errors = []
    for dt in (1e-3, 5e-4):
        sim = rt.Simulation(model, EM, dt)
        rng = np.random.default_rng(seed + 10)
        sim.set_qpos(rng.normal(size=sim.nq))
        sim.set_qvel(rng.normal(size=sim.nv))
        mjm, d, qadr, vadr = mujoco_ref.build_tree(sim.model, dt=dt)
        d.qpos[qadr] = sim.qpos()
        d.qvel[vadr] = sim.qvel()
        n = round(0.5 / dt)
        sim.step(n)
        mujoco.mj_step(mjm, d, nstep=n)
        errors.append(max(np.abs(sim.qpos() - d.qpos[qadr]).max(),
                          np.abs(sim.qvel() - d.qvel[vadr]).max()))
    assert errors[1] < 5e-7
    assert 3.5 < errors[0] / errors[1] < 4.5


def test_a_prismatic_stop_holds_a_sliding_block_under_energy_momentum():
    """The block slides down onto its stop: it lands exactly on it, never passes it, loses the
    energy of the approach (the stop is inelastic) and then rests with the stop's reaction
    carrying its weight."""
    m, j = limited_link(limits=(-0.1, 0.4), kind="prismatic")
    sim = rt.Simulation(m, EM, 1e-3)
    sim.set_joint_velocity(j, [0.5])
    e_prev = sim.energy()
    for _ in range(2000):
        sim.step()
        assert sim.joint_position(j)[0] >= -0.1
        assert sim.energy() <= e_prev + 1e-12
        e_prev = sim.energy()
    assert sim.joint_position(j)[0] == -0.1
    assert abs(sim.joint_velocity(j)[0]) < 1e-12
    force, _ = sim.joint_reaction(j)
    np.testing.assert_allclose(force, -sim.gravity, atol=1e-9)


def test_energy_momentum4_keeps_energy_on_slide_chains():
    """The composed scheme's stages are energy-momentum steps, slides included: energy to the
    1e-10 of the slide chains.  (It is round-off: with numba 0.68 the relative change
    wanders up to 1.1e-11 over the 2000 steps, three stages each, where the linear
    convergence left by the springs stops each stage's solve near the floor.)"""
    sim = slide_chain(1, integrator="energy_momentum4")
    e0 = sim.energy()
    sim.step(2000)
    assert abs(sim.energy() - e0) <= 1e-10 * max(1.0, abs(e0))
