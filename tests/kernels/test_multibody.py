"""Jointed systems: joint kinematics, null-space matrices, conservation, MuJoCo, impulses."""
import os
import subprocess
import sys

import numpy as np
import pytest

import rtrigid as rt
from rtrigid import joints as jointlib
from rtrigid.references import mujoco_ref
from rtrigid.model import Model
from rtrigid.backends.tree.kinematics import base_work_size, work_layout
from tests.helpers import randomize_joints, tree_of_kinds

KINDS = ["spherical", "revolute", "prismatic", "cylindrical", "planar", "fixed", "universal"]


def _tree_residual(sim, x, q):
    """Every joint's residual (rtrigid.joints.residual) at body positions x and quaternions q."""
    out = []
    world = np.zeros(3, dtype=x.dtype), np.array([1.0, 0.0, 0.0, 0.0], dtype=q.dtype)
    for b, (j, g) in enumerate(zip(sim.backend.joints, sim.backend.geometry)):
        xp, pp = (x[j.parent], q[j.parent]) if j.parent >= 0 else world
        out.append(jointlib.residual(j.kind, g, xp, pp, x[b], q[b]))
    return np.concatenate(out)


def _constraint_jacobian(sim):
    """d(joint residuals and |p|^2)/d(x, p) by complex step: independent of the kernels."""
    nb = sim.nb
    z = np.concatenate([np.r_[sim.x[b], sim.q[b]] for b in range(nb)]).astype(complex)

    def g(zz):
        x = np.array([zz[7 * b:7 * b + 3] for b in range(nb)])
        q = np.array([zz[7 * b + 3:7 * b + 7] for b in range(nb)])
        unit = [q[b] @ q[b] for b in range(nb)]
        return np.concatenate([_tree_residual(sim, x, q), unit])

    rows = len(g(z))
    G = np.zeros((rows, 7 * nb))
    for k in range(7 * nb):
        zz = z.copy()
        zz[k] += 1e-30j
        G[:, k] = g(zz).imag / 1e-30
    return G


@pytest.mark.parametrize("kind", KINDS)
def test_null_space_annihilates_constraint_gradient(kind):
    sim = rt.Simulation(tree_of_kinds([kind, kind, "spherical"]), "nullspace_rk4", dt=0.01)
    rng = np.random.default_rng(1)
    for _ in range(3):
        randomize_joints(sim, rng)
        G = _constraint_jacobian(sim)
        T = sim.backend.null_space_matrix()
        assert np.linalg.matrix_rank(T) == sim.backend.tree.nv
        assert np.abs(G @ T).max() < 1e-12 * max(1.0, np.abs(G).max() * np.abs(T).max())
        # and the constraint count plus the freedoms add up to 7 per body
        assert np.linalg.matrix_rank(G) + sim.backend.tree.nv == 7 * sim.nb


@pytest.mark.parametrize("integrator,kinds", [
    ("nullspace_rk4", KINDS),
    ("energy_momentum", ["spherical", "revolute", "fixed", "revolute", "universal"]),
])
def test_joints_hold_along_trajectories(integrator, kinds):
    m = tree_of_kinds(kinds, seed=3)
    sim = rt.Simulation(m, integrator, dt=0.002)
    randomize_joints(sim, np.random.default_rng(4))
    for _ in range(20):
        sim.step(10)
        assert sim.constraint_error() < 1e-12
        # velocity level: the residuals' time derivative G(z) zdot vanishes
        zdot = np.concatenate([np.r_[sim.v[b], 0.5 * rt.quat.mul(sim.q[b], np.r_[0.0, sim.w[b]])]
                               for b in range(sim.nb)])
        rate = _constraint_jacobian(sim) @ zdot
        # both report velocities at t that meet the joints (energy_momentum's own momenta
        # meet them only to O(h^2); it reports the rates of their generalized momentum)
        assert np.abs(rate).max() < 1e-11


def test_work_layout_matches_the_compiled_size():
    for nb, nq, nv in [(1, 4, 3), (5, 20, 15), (3, 9, 8)]:
        assert sum(int(np.prod(s)) for _, s in work_layout(nb, nq, nv)) == base_work_size(nb, nq, nv)


@pytest.mark.parametrize("joint", ["spherical", "revolute"])
def test_energy_momentum_keeps_energy_on_chains(joint):
    sim = rt.scenarios.build("chain", integrator="energy_momentum", n=5, joint=joint,
                             omega0=np.random.default_rng(2).normal(size=(5, 3)))
    e0 = sim.energy()
    sim.step(10000)
    assert abs(sim.energy() - e0) <= 1e-10 * max(1.0, abs(e0))
    assert sim.constraint_error() < 1e-12


def test_energy_momentum_keeps_vertical_momentum_of_spherical_chain():
    sim = rt.scenarios.build("chain", integrator="energy_momentum", n=3,
                             omega0=np.random.default_rng(5).normal(size=(3, 3)))
    hz0 = sim.momentum()[1][2]
    sim.step(2000)
    assert abs(sim.momentum()[1][2] - hz0) < 1e-11


def test_energy_momentum_vertical_momentum_follows_the_applied_loads():
    # h_z changes by exactly h (T_z + (x_mid x F)_z) per step: the reactions add nothing
    sim = rt.scenarios.build("chain", integrator="energy_momentum", n=3,
                             omega0=np.random.default_rng(5).normal(size=(3, 3)))
    torque, force = np.array([0.1, -0.2, 0.3]), np.array([0.2, -0.1, 0.4])
    sim.apply_torque(2, torque)
    sim.apply_force(1, force)
    expected = sim.momentum()[1][2]
    for _ in range(500):
        x0 = sim.x[1].copy()
        sim.step(1)
        expected += sim.dt * (torque[2] + np.cross(0.5 * (x0 + sim.x[1]), force)[2])
    assert abs(sim.momentum()[1][2] - expected) < 1e-12


def _random_joint_state(sim, seed):
    randomize_joints(sim, np.random.default_rng(seed))


def test_energy_momentum_keeps_momentum_of_a_free_jointed_pair():
    # no gravity, no support: linear and angular momentum (about the origin) are conserved
    m = Model(gravity=(0.0, 0.0, 0.0))
    a = m.add_body("a", 10.0, (41.6, 11.6, 50.0))
    b = m.add_body("b", 20.0, (41.6, 11.6, 50.0))
    m.add_joint("spherical", a, b, anchor_parent=(1.0, 2.0, -3.0), anchor_child=(5.0, -6.0, -7.0))
    sim = rt.Simulation(m, "energy_momentum", dt=0.002)
    _random_joint_state(sim, 8)
    # centre of mass at rest near the origin, so no term of the momenta grows without bound
    qg, nu = sim.joint_position("free_a"), sim.joint_velocity("free_a")
    nu[:3] -= sim.momentum()[0] / 30.0
    qg[:3] -= (10.0 * sim.x[0] + 20.0 * sim.x[1]) / 30.0
    sim.set_joint_position("free_a", qg)
    sim.set_joint_velocity("free_a", nu)
    (p0, h0), e0 = sim.momentum(), sim.energy()
    sim.step(2000)
    p1, h1 = sim.momentum()
    # the floor is round-off of x1 - x0 (|x| ~ 8 m) amplified by 2/h in v1: a random walk
    # of ~3e-13 per step (measured 4e-12 of |h| after 2000 steps; energy alike), where the
    # scheme with the reactions' arms at the mid-point quaternion drifted 1e-6 of |h|
    assert np.abs(h1 - h0).max() < 1e-10 * np.abs(h0).max()
    assert np.abs(p1 - p0).max() < 1e-10 * (np.abs(sim.v).max() * 30.0)
    assert abs(sim.energy() - e0) < 1e-10 * e0
    assert sim.constraint_error() < 1e-12


def test_energy_momentum_keeps_vertical_momentum_of_revolute_chain():
    # a turntable about the world z axis carrying hinged links (skew axes) under gravity:
    # gravity and the turntable's bearing exert no moment about the vertical axis
    m = Model()
    rng = np.random.default_rng(9)
    inertia = rt.scenarios.rod_inertia(1.0, 0.5, 0.05)
    for i in range(4):
        m.add_body(f"l{i}", 1.0, inertia)
        axis = (0.0, 0.0, 1.0) if i == 0 else rng.normal(size=3)
        m.add_joint("revolute", None if i == 0 else i - 1, i, axis_parent=axis,
                    anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.1, 0.0, -0.25),
                    anchor_child=(0.0, 0.0, 0.25))
    sim = rt.Simulation(m, "energy_momentum", dt=1.0 / 240.0)
    _random_joint_state(sim, 10)
    h0, e0 = sim.momentum()[1][2], sim.energy()
    sim.step(2000)
    assert abs(sim.momentum()[1][2] - h0) < 1e-11  # measured 5e-13; 2e-4 before
    assert abs(sim.energy() - e0) <= 1e-11 * max(1.0, abs(e0))
    assert sim.constraint_error() < 1e-12


def test_explicit_and_energy_momentum_agree_at_small_steps():
    kw = dict(n=3, omega0=np.random.default_rng(6).normal(size=(3, 3)))
    a = rt.scenarios.build("chain", integrator="nullspace_rk4", dt=1e-3, **kw)
    b = rt.scenarios.build("chain", integrator="energy_momentum", dt=1e-4, **kw)
    a.step(200)
    b.step(2000)
    assert np.abs(a.x - b.x).max() < 1e-5


@pytest.mark.skipif(not mujoco_ref.available(), reason="mujoco is a dev dependency")
def test_hanging_chain_agrees_with_mujoco_rk4():
    n, length, mass, radius = 5, 0.5, 1.0, 0.05
    rng = np.random.default_rng(7)
    rel = [rt.quat.from_rotvec(rng.normal(scale=0.3, size=3)) for _ in range(n)]
    rates = rng.normal(size=(n, 3))
    sim = rt.scenarios.build("chain", integrator="nullspace_rk4", dt=1e-4, n=n)
    model, data = mujoco_ref.build_chain(n, length, mass,
                                         rt.scenarios.rod_inertia(mass, length, radius), dt=1e-4)
    for i in range(n):
        sim.set_joint_position(i, rel[i])
        sim.set_joint_velocity(i, rates[i])
        data.qpos[4 * i:4 * i + 4] = rel[i]
        data.qvel[3 * i:3 * i + 3] = rates[i]

    def tips():
        return np.array([sim.x[i] + rt.quat.rotate(sim.q[i], np.array([0, 0, -length / 2]),
                                                   np.empty(3)) for i in range(n)])

    assert np.abs(tips() - mujoco_ref.chain_link_tips(model, data, length)).max() < 1e-14
    assert sim.energy() == pytest.approx(mujoco_ref.chain_energy(model, data), rel=1e-12)
    sim.step(5000)
    mujoco_ref.step(model, data, 5000)
    assert np.abs(tips() - mujoco_ref.chain_link_tips(model, data, length)).max() < 1e-6


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_impulse_on_unconstrained_pair_changes_momenta_exactly(integrator):
    m = Model(gravity=(0, 0, 0))
    a = m.add_body("a", 2.0, (0.3, 0.4, 0.5))
    b = m.add_body("b", 3.0, (0.2, 0.3, 0.4))
    m.add_spring_between(a, (0.1, 0, 0), b, (0, 0.2, 0), stiffness=10.0, rest_length=0.5)
    sim = rt.Simulation(m, integrator, dt=0.01)
    sim.set_position(b, (1.0, 0.5, -0.2))
    sim.set_orientation(a, rt.quat.from_rotvec(np.array([0.3, -0.2, 0.5])))
    lin0, ang0 = sim.momentum()
    J, r = np.array([0.3, -1.2, 0.7]), np.array([0.2, 0.4, 0.1])
    sim.apply_impulse(a, J, r)
    lin1, ang1 = sim.momentum()
    np.testing.assert_allclose(lin1 - lin0, J, atol=1e-14)
    np.testing.assert_allclose(ang1 - ang0, np.cross(r, J), atol=1e-14)


def test_impulse_through_a_joint_keeps_it_and_conserves_free_momentum():
    """A free root with a jointed child: total momentum still changes by exactly J."""
    m = Model(gravity=(0, 0, 0))
    m.add_body("root", 2.0, (0.3, 0.4, 0.5))
    m.add_body("arm", 1.0, (0.1, 0.1, 0.02))
    m.add_joint("revolute", 0, 1, anchor_parent=(0, 0, -0.3), anchor_child=(0, 0, 0.4),
                axis_parent=(1, 0, 0))
    sim = rt.Simulation(m, "nullspace_rk4", dt=0.01)
    lin0, ang0 = sim.momentum()
    J, r = np.array([0.0, 1.0, 0.5]), sim.x[1] + np.array([0.0, 0.0, -0.3])
    sim.apply_impulse(1, J, r)
    lin1, ang1 = sim.momentum()
    np.testing.assert_allclose(lin1 - lin0, J, atol=1e-14)
    np.testing.assert_allclose(ang1 - ang0, np.cross(r, J), atol=1e-14)
    sim.step(50)
    assert sim.constraint_error() < 1e-12


def test_damped_revolute_loses_energy_monotonically():
    m = Model()
    m.add_body("rod", 1.0, rt.scenarios.rod_inertia(1.0, 0.5, 0.02))
    m.add_joint("revolute", None, 0, anchor_child=(0, 0, 0.25), axis_parent=(1, 0, 0),
                damping=0.05, stiffness=2.0)
    sim = rt.Simulation(m, "nullspace_rk4", dt=0.002)
    sim.set_joint_position(0, [1.0])
    energies = [sim.energy()]
    for _ in range(500):
        sim.step(1)
        energies.append(sim.energy())
    d = np.diff(energies)
    assert np.all(d < 0.0)
    assert energies[-1] < 0.8 * energies[0] + 0.2 * min(energies)


def test_joint_spring_conserves_energy_without_damping():
    m = Model(gravity=(0, 0, 0))
    m.add_body("slider", 1.0, (0.1, 0.1, 0.1))
    m.add_joint("prismatic", None, 0, axis_parent=(0, 0, 1), stiffness=50.0, rest=0.1)
    sim = rt.Simulation(m, "nullspace_rk4", dt=0.001)
    sim.set_joint_velocity(0, [1.0])
    e0 = sim.energy()
    sim.step(2000)
    assert abs(sim.energy() - e0) < 1e-9
    # the period of a mass on a spring: sqrt(k/m) = 7.07 rad/s about rest 0.1
    t = sim.t
    w = np.sqrt(50.0)
    assert sim.joint_position(0)[0] == pytest.approx(0.1 - 0.1 * np.cos(w * t)
                                                     + np.sin(w * t) / w, abs=1e-6)


def test_bad_joint_input_is_refused_and_names_the_field():
    m = Model()
    a = m.add_body("a", 1.0, (1, 1, 1))
    b = m.add_body("b", 1.0, (1, 1, 1))
    with pytest.raises(ValueError, match="kind"):
        m.add_joint("screw", a, b)
    with pytest.raises(ValueError, match="axis_parent"):
        m.add_joint("revolute", a, b)
    with pytest.raises(ValueError, match="axis_parent"):
        m.add_joint("spherical", a, b, axis_parent=(0, 0, 1))
    with pytest.raises(ValueError, match="child"):
        m.add_joint("spherical", a, a)
    m.add_joint("spherical", a, b)
    with pytest.raises(ValueError, match="child"):
        m.add_joint("spherical", None, b)
    with pytest.raises(ValueError, match="parent"):
        m.add_joint("spherical", b, a)  # would close a loop
    with pytest.raises(ValueError, match="stiffness"):
        m.add_joint("spherical", None, a, stiffness=1.0)
    m2 = Model()
    m2.add_body("s", 1.0, (1, 1, 1))
    m2.add_body("t", 1.0, (1, 1, 1))
    m2.add_joint("prismatic", None, 0, axis_parent=(0, 0, 1), stiffness=3.0, armature=0.1)
    m2.add_joint("prismatic", None, 1, axis_parent=(0, 0, 1), name="follower")
    m2.add_coupling("follower", 0, ratio=0.5)
    with pytest.raises(ValueError, match="^integrator: energy_momentum does not step joint "
                                         "armature .* in a model with loop joints or couplings"):
        rt.Simulation(m2, "energy_momentum", dt=0.01)


def test_bad_state_input_leaves_simulation_unchanged():
    sim = rt.scenarios.build("chain", integrator="nullspace_rk4", n=3)
    snap = sim.snapshot()
    before = sim.backend.S.copy()
    for call in (lambda: sim.set_joint_position("nope", [1, 0, 0, 0]),
                 lambda: sim.set_joint_position(0, [0, 0, 0, 0]),
                 lambda: sim.set_joint_velocity(1, [1.0, np.nan, 0.0]),
                 lambda: sim.set_position(1, (0, 0, 0)),
                 lambda: sim.apply_impulse(0, (np.inf, 0, 0), (0, 0, 0))):
        with pytest.raises(ValueError):
            call()
        np.testing.assert_array_equal(sim.backend.S, before)
    sim.step(10)
    sim.restore(snap)
    np.testing.assert_array_equal(sim.backend.S, before)


def test_joints_report_world_anchors_and_axes():
    sim = rt.scenarios.build("gimbal_gyroscope", integrator="nullspace_rk4")
    joints = sim.joints()
    assert [j["kind"] for j in joints] == ["revolute"] * 3
    assert [j["parent"] for j in joints] == [-1, 0, 1]
    np.testing.assert_allclose(joints[0]["anchor"], (0, 0, 0.5), atol=1e-15)
    # the outer axis is the world x axis, whatever the tilt
    np.testing.assert_allclose(joints[0]["axis"], (1, 0, 0), atol=1e-15)


def _shifted_chain(n, origin, integrator="nullspace_rk4", dt=1e-3):
    """The ``chain`` scenario's links and joints, hung from ``origin`` instead of (0, 0, 0)."""
    m = Model()
    for i in range(n):
        m.add_body(f"link{i}", 1.0, rt.scenarios.rod_inertia(1.0, 0.5, 0.05))
        m.add_joint("spherical", None if i == 0 else i - 1, i,
                    anchor_parent=origin if i == 0 else (0.0, 0.0, -0.25),
                    anchor_child=(0.0, 0.0, 0.25))
    sim = rt.Simulation(m, integrator, dt)
    rng = np.random.default_rng(3)
    for i in range(n):
        sim.set_joint_position(i, rt.quat.from_rotvec(rng.normal(scale=0.3, size=3)))
        sim.set_joint_velocity(i, rng.normal(scale=0.3, size=3))
    return sim


def test_long_chain_far_from_the_origin_steps_as_at_the_origin():
    """The recursion works about each joint point, so moving a 50-link chain 2 km away changes
    its joint trajectory only by the round-off of the positions themselves."""
    near = _shifted_chain(50, (0.0, 0.0, 0.0))
    far = _shifted_chain(50, (1000.0, -2000.0, 500.0))
    e0 = near.energy()
    near.step(250)
    far.step(250)
    for i in range(50):
        assert np.allclose(near.joint_position(i), far.joint_position(i), rtol=0, atol=1e-10)
        assert np.allclose(near.joint_velocity(i), far.joint_velocity(i), rtol=0, atol=1e-9)
    assert np.allclose(far.x - far.x[0], near.x - near.x[0], rtol=0, atol=1e-9)
    assert abs(near.energy() - e0) < 1e-5 * abs(e0)


@pytest.mark.parametrize("kinds", [KINDS, ["revolute", "spherical", "prismatic"],
                                   ["planar", "cylindrical", "fixed", "spherical"]])
def test_explicit_scheme_conserves_energy_at_fourth_order_for_every_joint_kind(kinds):
    """A wrong velocity-product or bias term changes the equations, and then the energy drift
    tends to a non-zero rate as dt -> 0 instead of falling as dt^4."""
    drifts = []
    for dt in (2e-3, 1e-3):
        sim = rt.Simulation(tree_of_kinds(kinds, seed=4), "nullspace_rk4", dt)
        randomize_joints(sim, np.random.default_rng(5))
        e0 = sim.energy()
        worst = 0.0
        for _ in range(20):
            sim.step(int(round(0.01 / dt)))
            worst = max(worst, abs(sim.energy() - e0))
        drifts.append(worst / abs(e0))
    assert drifts[0] < 1e-6
    assert drifts[1] < drifts[0] / 10.0


ALLOCATION_PROBE = """
import warnings; warnings.simplefilter("ignore")
from numba.core.runtime import rtsys
import rtrigid as rt
from rtrigid.tools import bench
sims = [bench._lively_chain(5, i, 1 / 240) for i in ("nullspace_rk4", "energy_momentum")]
sims += [rt.scenarios.build("gyro_top", integrator=i) for i in ("nullspace_rk4", "energy_momentum")]
sims += [rt.scenarios.build(s, integrator=i) for s in ("four_bar", "delta_robot")
         for i in ("nullspace_rk4", "energy_momentum")]
m = rt.scenarios.build("four_bar").model  # a motor holds the crank on its limit: every step
m.joints[0].limits = (-float("inf"), 1.0)  # is a limit step (the loops closed with it held)
m.add_actuator("crank", "motor")
for i in ("nullspace_rk4", "energy_momentum"):
    sims.append(rt.Simulation(m, i, 1 / 240))
    sims[-1].set_controls([0.5])
    sims[-1].step(200)
    assert sims[-1].joint_position("crank")[0] == 1.0
for sim in sims:
    sim.step(1)
    counts = []
    for n in (1, 500):
        before = rtsys.get_allocation_stats().alloc
        sim.step(n)
        counts.append(rtsys.get_allocation_stats().alloc - before)
    print(*counts)
"""


def test_step_kernels_allocate_nothing_per_step():
    """numba's own allocation counter: a call of 500 steps allocates exactly as much as a call
    of one step (what the Python wrapper needs), so the compiled step loop allocates nothing
    (closed loops too: the four-bar and the delta robot under nullspace_rk4 and
    energy_momentum, and the four-bar resting on a joint limit, whose every step is a limit
    step)."""
    env = dict(os.environ, NUMBA_NRT_STATS="1")
    out = subprocess.run([sys.executable, "-c", ALLOCATION_PROBE], env=env, check=True,
                         capture_output=True, text=True).stdout.split("\n")
    rows = [tuple(map(int, line.split())) for line in out if line.strip()]
    assert len(rows) == 10
    for one, many in rows:
        assert one == many
