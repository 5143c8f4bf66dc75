"""The dynamics queries on models with loop joints: imu, joint_reaction,
inverse_dynamics, mass_matrix and bias_forces account for the loops.

References: finite differences of the simulated motion (accelerations of the bodies'
centres, fourth order in the step), each body's Newton balance m (a - g) = the forces its
joints (tree and loop) exert on it, and MuJoCo's model of the same mechanism with the loops
as equality constraints (made nearly hard).
"""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.maths import quat

DT = 1e-4  # the finite differences' step: truncation ~ DT^4


def _build(name):
    sim = rt.scenarios.build(name, integrator="nullspace_rk4", dt=DT)
    sim.step(300)  # moving: velocity terms in every reaction
    return sim


def _fd(sim, read):
    """d/dt of read(sim) now, one-sided and fourth order from the simulated motion; the
    state is left as it was."""
    snap = sim.snapshot()
    vals = []
    for _ in range(5):
        vals.append(np.array(read(sim), float))
        sim.step()
    sim.restore(snap)
    w = (-25.0, 48.0, -36.0, 16.0, -3.0)
    return sum(c * v for c, v in zip(w, vals)) / (12.0 * sim.dt)


def _centre_acc(sim, body):
    return _fd(sim, lambda s: s.velocity(body)[0])


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "delta_robot"])
def test_imu_reads_the_motion_the_loops_allow(name):
    sim = _build(name)
    scale = 0.0
    worst = 0.0
    for b in sim.names:
        gyro, accel = sim.imu(b)
        a = _centre_acc(sim, b)
        ref = quat.rotate_inv(sim.pose(b)[1], a - sim.gravity, np.empty(3))
        worst = max(worst, np.max(np.abs(accel - ref)))
        scale = max(scale, np.max(np.abs(ref)))
        np.testing.assert_allclose(gyro, sim.velocity(b, frame="body")[1], atol=1e-12)
    assert worst <= 1e-6 * scale, worst


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "delta_robot"])
def test_joint_reactions_with_the_loops_balance_every_body(name):
    """m (a - g) of each body is the sum of what its tree joints and loop joints exert on
    it: the tree joints' reactions carry the loops' multipliers, and the loop joints'
    reactions are readable by name."""
    sim = _build(name)
    forces = {}  # body -> sum of joint forces on it
    for j in sim.joints() + [{"name": lj.name, "child": lj.child, "parent": lj.parent}
                             for lj in sim.model.loop_joints]:
        f, _ = sim.joint_reaction(j["name"])
        forces[j["child"]] = forces.get(j["child"], 0.0) + f
        if j["parent"] >= 0:
            forces[j["parent"]] = forces.get(j["parent"], 0.0) - f
    loop_force = np.max(np.abs(sim.joint_reaction(sim.model.loop_joints[0].name)[0]))
    assert loop_force > 1e-3  # the loops carry load here
    worst = scale = 0.0
    for b, name_b in enumerate(sim.names):
        ma = sim.body_mass[b] * (_centre_acc(sim, name_b) - sim.gravity)
        worst = max(worst, np.max(np.abs(ma - forces[b])))
        scale = max(scale, np.max(np.abs(ma)), loop_force)
    assert worst <= 1e-6 * scale, (worst, scale)


def test_joint_reaction_names_a_loop_joint_or_errs():
    sim = _build("four_bar")
    f, t = sim.joint_reaction("pin")
    assert f.shape == (3,) and t.shape == (3,)
    with pytest.raises(ValueError, match="joint"):
        sim.joint_reaction("no such joint")


def test_inverse_dynamics_holds_the_motion_the_loops_allow():
    """Holding inverse_dynamics(qacc) gives qacc where qacc meets the loops (a simulated
    acceleration), and otherwise qacc's projection in the mass metric onto what the loops
    allow: the difference is M-orthogonal to every motion the loops allow (qvel is one)."""
    sim = _build("four_bar")
    crank = sim.joint_names[0]
    sim.set_joint_force(crank, 0.3)
    qacc = _fd(sim, lambda s: s.qvel())  # meets the loops (to the differences' error)
    other = rt.scenarios.build("four_bar", integrator="nullspace_rk4", dt=DT)
    other.restore(sim.snapshot())
    other.set_joint_force(crank, 0.0)
    tau = other.inverse_dynamics(qacc)
    for j, name in enumerate(other.joint_names):
        other.set_joint_force(name, tau[j])
    got = _fd(other, lambda s: s.qvel())
    np.testing.assert_allclose(got, qacc, atol=1e-6 * np.max(np.abs(qacc)))
    # an acceleration the loops do not allow: the projection
    rng = np.random.default_rng(4)
    wish = rng.normal(size=sim.nv) * np.max(np.abs(qacc))
    tau = sim.inverse_dynamics(wish)  # on top of what is held (0.3 on the crank)
    sim.set_joint_force(crank, 0.3 + tau[0])
    for j, name in enumerate(sim.joint_names[1:], 1):
        sim.set_joint_force(name, tau[j])
    got = _fd(sim, lambda s: s.qvel())
    M, v = sim.mass_matrix(), sim.qvel()
    assert np.max(np.abs(got - wish)) > 0.1 * np.max(np.abs(wish))  # it was projected
    assert abs(v @ M @ (wish - got)) <= 1e-6 * np.abs(v) @ np.abs(M) @ np.abs(wish)
    assert sim.constraint_error() <= 1e-12


@pytest.mark.parametrize("name", ["four_bar", "delta_robot"])
def test_loop_queries_agree_with_mujoco_equality_constraints(name):
    """MuJoCo's model of the mechanism, the loops as connect equalities made as hard as it
    allows (solimp 0.9999: the reactions soften by ~1e-4): the same tree mass matrix and bias
    (the loops' reactions are not in them, as in qM and qfrc_bias), and the accelerometers
    read MuJoCo's constrained accelerations."""
    mujoco = pytest.importorskip("mujoco")
    from rtrigid.references import mujoco_ref

    sim = _build(name)
    mjm, d, qadr, vadr = mujoco_ref.build_tree(sim.model, dt=1e-3)
    mjm.eq_solimp[:, :2] = 0.9999
    mjm.opt.tolerance = 1e-14
    d.qpos[qadr], d.qvel[vadr] = sim.qpos(), sim.qvel()
    mujoco.mj_forward(mjm, d)
    mujoco.mj_rnePostConstraint(mjm, d)
    full = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, d, full)
    M = full[np.ix_(vadr, vadr)]
    assert np.max(np.abs(sim.mass_matrix() - M)) <= 1e-12 * np.max(np.abs(M))
    bias = d.qfrc_bias[vadr]
    assert np.max(np.abs(sim.bias_forces() - bias)) <= 1e-10 * np.max(np.abs(bias))
    worst = scale = 0.0
    for b, body in enumerate(sim.names):
        acc = np.zeros(6)
        bid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, body)
        mujoco.mj_objectAcceleration(mjm, d, mujoco.mjtObj.mjOBJ_BODY, bid, acc, 1)
        accel = sim.imu(body)[1]
        worst = max(worst, np.max(np.abs(accel - acc[3:])))
        scale = max(scale, np.max(np.abs(acc[3:])))
    assert worst <= 1e-3 * scale, (worst, scale)
