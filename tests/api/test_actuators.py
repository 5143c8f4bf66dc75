"""Actuators: motors and servos on revolute and prismatic joints, through
the public API -- exact discrete work and unconditional servo stability under
energy_momentum, RK4's stable range, MuJoCo's actuators as the reference."""
import numpy as np
import pytest

import rtrigid as rt
from tests.helpers import chain

TREE_SCHEMES = ("nullspace_rk4", "energy_momentum", "energy_momentum4")


def servo_energy(sim, kp, gear=1.0):
    return sum(0.5 * kp * (u - gear * c) ** 2 for u, c in zip(sim.controls(), sim.qpos()))


# -- the model builder and the façade's checks -------------------------------------------------
def test_add_actuator_refuses_bad_input():
    m = rt.Model()
    a = m.add_body("a", 1.0, (0.1, 0.1, 0.1))
    b = m.add_body("b", 1.0, (0.1, 0.1, 0.1))
    m.add_joint("revolute", None, a, axis_parent=(1, 0, 0), name="hinge")
    m.add_joint("spherical", a, b, name="ball")
    with pytest.raises(ValueError, match="^joint: actuators drive revolute or prismatic"):
        m.add_actuator("ball", "motor")
    with pytest.raises(ValueError, match="^joint: no joint named"):
        m.add_actuator("nope", "motor")
    with pytest.raises(ValueError, match="^kind: unknown actuator kind"):
        m.add_actuator("hinge", "servo")
    with pytest.raises(ValueError, match="^kp: a position actuator needs kp"):
        m.add_actuator("hinge", "position")
    with pytest.raises(ValueError, match="^kv: a velocity actuator needs kv"):
        m.add_actuator("hinge", "velocity")
    with pytest.raises(ValueError, match="^kp: a motor actuator takes no kp"):
        m.add_actuator("hinge", "motor", kp=1.0)
    with pytest.raises(ValueError, match="^force_range: expected lo < hi"):
        m.add_actuator("hinge", "motor", force_range=(1.0, -1.0))
    with pytest.raises(ValueError, match="^ctrl_range: must be finite"):
        m.add_actuator("hinge", "motor", ctrl_range=(0.0, np.inf))
    with pytest.raises(ValueError, match="^gear: must be non-zero"):
        m.add_actuator("hinge", "motor", gear=0.0)
    assert m.add_actuator(0, "position", kp=10.0, name="shoulder") == 0
    with pytest.raises(ValueError, match="^name: actuator name 'shoulder'"):
        m.add_actuator(0, "motor", name="shoulder")
    assert not any(x.name != "shoulder" for x in m.actuators)  # refused ones left nothing


def test_set_control_validates_clamps_and_keeps_state():
    m = chain(2, "motor", ctrl_range=(-1.0, 2.0))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_control("a1", 5.0)
    sim.set_control(0, -0.5)
    assert sim.controls().tolist() == [-0.5, 2.0]  # clamped to ctrl_range
    sim.set_controls([3.0, -4.0])
    assert sim.controls().tolist() == [2.0, -1.0]
    before = sim.snapshot()
    for bad, field in ((np.nan, "value"), ("1", "value"), (True, "value")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            sim.set_control("a0", bad)
    for bad in ([1.0], [1.0, np.inf], [[1.0, 2.0]], ["1", "2"]):
        with pytest.raises(ValueError, match="^u:"):
            sim.set_controls(bad)
    with pytest.raises(ValueError, match="^actuator: no actuator 'a9'"):
        sim.set_control("a9", 0.0)
    with pytest.raises(ValueError, match="^actuator: no actuator with handle 2"):
        sim.set_control(2, 0.0)
    assert sim.controls().tolist() == [2.0, -1.0]
    after = sim.snapshot()
    assert all(np.array_equal(x, y) for x, y in zip(before._data[:3], after._data[:3]))


@pytest.mark.parametrize("integrator", TREE_SCHEMES)
def test_snapshot_keeps_controls_and_actuator_work(integrator):
    sim = rt.Simulation(chain(2, "position", kp=20.0, kv=1.0), integrator, 1e-3)
    sim.set_controls([0.3, -0.2])
    sim.step(20)
    snap = sim.snapshot()
    sim.step(30)
    ref = sim.qpos(), sim.qvel(), sim.actuator_work(), sim.controls()
    sim.set_controls([9.0, 9.0])
    sim.step(5)
    sim.restore(snap)
    sim.step(30)
    for a, b in zip(ref, (sim.qpos(), sim.qvel(), sim.actuator_work(), sim.controls())):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("integrator", TREE_SCHEMES)
def test_motor_is_the_held_joint_force(integrator):
    """A motor's (saturated) force is the generalized force of set_joint_force: bit for bit
    under nullspace_rk4, to Newton's round-off under the EM schemes (their Newton matrix
    takes the motors' pair factor, not the held forces')."""
    sims = [rt.Simulation(chain(3, "motor", gear=2.0, force_range=(-0.4, 0.4)), integrator,
                          1e-3) for _ in range(2)]
    sims[0].set_controls([5.0, -0.1, 0.15])  # 5 saturates at 0.4, times the gear
    for j, tau in enumerate((0.8, -0.2, 0.3)):
        sims[1].set_joint_force(j, tau)
    assert sims[0].actuator_forces().tolist() == [0.4, -0.1, 0.15]
    for sim in sims:
        sim.step(20)  # round-off grows along this chain's motion: compare early
    tol = 0.0 if integrator == "nullspace_rk4" else 1e-13
    assert np.allclose(sims[0].qpos(), sims[1].qpos(), rtol=0, atol=tol)
    assert np.allclose(sims[0].qvel(), sims[1].qvel(), rtol=0, atol=10 * tol)


def test_inverse_dynamics_counts_the_actuators():
    sims = []
    for servo in (True, False):
        m = chain(2, "position", kp=30.0, kv=2.0) if servo else chain(2, "motor")
        sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
        sim.set_qpos([0.3, -0.5])
        sim.set_qvel([0.7, 0.2])
        sims.append(sim)
    sims[0].set_controls([0.1, 0.4])
    sims[1].set_controls(sims[0].actuator_forces())  # the same forces, as motors
    qacc = np.array([0.5, -1.5])
    assert np.allclose(sims[0].inverse_dynamics(qacc), sims[1].inverse_dynamics(qacc),
                       rtol=1e-14, atol=1e-14)


# -- energy_momentum: exact work, unconditional servos ----------------------------------------
@pytest.mark.slow
def test_em_motor_torques_do_exact_discrete_work():
    """Random motor torques on a 5-link revolute chain, 1e4 steps:
    |E_N - E_0 - sum tau . dq| <= 1e-10 |E|, and actuator_work() is that sum."""
    rng = np.random.default_rng(12)
    sim = rt.Simulation(chain(5, "motor", axis=(1.0, 0.3, 0.0)), "energy_momentum", 1e-3)
    sim.set_qpos(rng.uniform(-1.0, 1.0, 5))
    sim.set_qvel(rng.uniform(-2.0, 2.0, 5))
    e0 = sim.energy()
    work = 0.0
    scale = abs(e0)
    for _ in range(10_000):
        tau = rng.uniform(-2.0, 2.0, 5)
        sim.set_controls(tau)
        q0 = sim.qpos()
        sim.step()
        work += float(tau @ (sim.qpos() - q0))
        scale = max(scale, abs(sim.energy()), sim.kinetic_energy())
    assert scale > 1.0
    assert abs(sim.energy() - e0 - work) <= 1e-10 * scale
    assert abs(sim.actuator_work().sum() - work) <= 1e-10 * scale


def test_em_servo_spring_is_exact_and_damper_only_dissipates():
    """Fixed targets: energy + servo spring energy is constant to round-off without kv and
    never increases with kv; the actuators' work is minus the change of the spring energy
    plus the damper's loss."""
    for kv, integrator in ((0.0, "energy_momentum"), (3.0, "energy_momentum"),
                           (0.0, "energy_momentum4")):
        sim = rt.Simulation(chain(3, "position", kp=80.0, kv=kv), integrator, 1.0 / 120.0)
        sim.set_controls([1.0, -0.5, 0.8])
        balance = [sim.energy() + servo_energy(sim, 80.0)]
        e0 = sim.energy()
        for _ in range(300):
            sim.step()
            balance.append(sim.energy() + servo_energy(sim, 80.0))
        b = np.array(balance)
        tol = 1e-12 * np.max(np.abs(b))
        if kv == 0.0:
            assert np.max(np.abs(b - b[0])) <= 20 * tol
        else:
            assert np.all(np.diff(b) <= tol)
            assert b[-1] < b[0] - 1.0  # it does dissipate
        assert abs(sim.energy() - e0 - sim.actuator_work().sum()) <= 1e-11 * np.max(np.abs(b))


@pytest.mark.filterwarnings("ignore:energy_momentum. Newton did not converge")  # sub-steps
@pytest.mark.parametrize("stiffness", [1.0, 1e2, 1e4])
def test_em_position_servo_is_stable_at_any_gain(stiffness):
    """kp dt²/m_eff up to 1e4 at dt = 1/60 with the targets fixed: undamped, energy + servo
    spring energy is kept to round-off; damped (from a large error, 0.1 and 2 times critical
    damping), it never increases and the arm stays bounded; saturated (force_range), the
    energy changes by exactly the actuators' work."""
    dt = 1.0 / 60.0
    probe = rt.Simulation(chain(2, "motor"), "energy_momentum", dt)
    m_eff = float(np.max(1.0 / np.diag(np.linalg.inv(probe.mass_matrix()))))
    kp = stiffness * m_eff / dt ** 2
    cases = ((0.0, None, [1e-3, -2e-3]), (0.1 * np.sqrt(kp * m_eff), None, [0.6, -0.9]),
             (2.0 * np.sqrt(kp * m_eff), None, [0.6, -0.9]), (0.0, (-5.0, 5.0), [0.6, -0.9]))
    for kv, force_range, target in cases:
        sim = rt.Simulation(chain(2, "position", kp=kp, kv=kv, force_range=force_range),
                            "energy_momentum", dt)
        sim.set_controls(target)
        e0 = sim.energy()
        balance = [e0 + servo_energy(sim, kp)]
        for _ in range(600):
            sim.step()
            balance.append(sim.energy() + servo_energy(sim, kp))
        b = np.array(balance)
        scale = np.max(np.abs(b))
        assert np.all(np.isfinite(b))
        assert np.all(np.abs(sim.qpos()) < 10.0)
        assert abs(sim.energy() - e0 - sim.actuator_work().sum()) <= 1e-10 * scale
        if force_range is not None:
            continue
        if kv == 0.0:
            assert np.max(np.abs(b - b[0])) <= 1e-12 * scale
        else:
            assert np.all(np.diff(b) <= 1e-13 * scale)
            if stiffness <= 1e2:  # it settles (the midpoint rule barely damps modes far
                # beyond the step rate, see Simulation.set_control)
                assert np.allclose(sim.qpos(), target, atol=10.0 / kp)


# -- nullspace_rk4: the stable range -----------------------------------------------------------
def test_rk4_refuses_servo_gains_beyond_its_stable_range():
    dt = 1e-3
    probe = rt.Simulation(chain(2, "motor"), "nullspace_rk4", dt)
    m_eff = 1.0 / np.diag(np.linalg.inv(probe.mass_matrix()))
    kp_max = 2.5 ** 2 * float(np.min(m_eff)) / dt ** 2
    rt.Simulation(chain(2, "position", kp=0.9 * kp_max), "nullspace_rk4", dt)
    with pytest.raises(ValueError, match=r"^kp: actuator 'a1'.*stable range.*kp g² dt²/m_eff "
                                         r"must stay below 6.25"):
        rt.Simulation(chain(2, "position", kp=1.1 * kp_max), "nullspace_rk4", dt)
    kv_max = 2.5 * float(np.min(m_eff)) / dt
    rt.Simulation(chain(2, "velocity", kv=0.9 * kv_max), "nullspace_rk4", dt)
    with pytest.raises(ValueError, match="kv g² dt/m_eff below 2.5"):
        rt.Simulation(chain(2, "velocity", kv=1.1 * kv_max), "nullspace_rk4", dt)
    # energy_momentum takes any gain
    rt.Simulation(chain(2, "position", kp=1e3 * kp_max), "energy_momentum", dt)


def test_rk4_servos_just_inside_the_range_are_stable():
    dt = 1e-3
    probe = rt.Simulation(chain(2, "motor", joint="prismatic", axis=(0, 0, 1)), "nullspace_rk4",
                          dt)
    m_eff = float(np.min(1.0 / np.diag(np.linalg.inv(probe.mass_matrix()))))
    kp = 0.95 * 2.5 ** 2 * m_eff / dt ** 2
    sim = rt.Simulation(chain(2, "position", joint="prismatic", axis=(0, 0, 1), kp=kp,
                              kv=0.02 * kp * dt), "nullspace_rk4", dt)
    sim.set_controls([0.01, 0.02])
    sim.step(5000)
    assert np.allclose(sim.qpos(), [0.01, 0.02], atol=1e-4)


# -- MuJoCo's actuators as the reference -------------------------------------------------------
@pytest.mark.parametrize("kind, gains", [("position", {"kp": 40.0, "kv": 1.5}),
                                         ("velocity", {"kv": 2.0}),
                                         ("motor", {"gear": 1.5, "force_range": (-1.0, 1.0)})])
def test_actuators_match_mujoco(kind, gains):
    """nullspace_rk4 against MuJoCo's RK4 with the same actuators: the trajectories agree to
    the schemes' (fourth-order) truncation at dt = 1 ms; energy_momentum to its second-order
    one."""
    mujoco = pytest.importorskip("mujoco")
    from rtrigid.references.mujoco_ref import build_tree

    model = chain(3, kind, axis=(1.0, 0.2, 0.0), **gains)
    mjm, d, qadr, vadr = build_tree(model, dt=1e-3, integrator="RK4")
    u = np.array([0.4, -0.7, 0.9])
    for integrator, tol in (("nullspace_rk4", 1e-8), ("energy_momentum", 1e-4)):
        sim = rt.Simulation(model, integrator, 1e-3)
        sim.set_controls(u)
        mujoco.mj_resetData(mjm, d)
        d.ctrl[:] = u
        for _ in range(1000):
            sim.step()
            mujoco.mj_step(mjm, d)
        assert np.allclose(sim.qpos(), d.qpos[qadr], atol=tol, rtol=0), integrator
        assert np.allclose(sim.qvel(), d.qvel[vadr], atol=10 * tol, rtol=0), integrator
        assert np.allclose(sim.actuator_forces(), d.actuator_force, atol=100 * tol), integrator


def test_rk4_actuator_work_is_the_energy_change_to_fourth_order():
    """Under nullspace_rk4 energy() - actuator_work() drifts only by the scheme's error:
    halving dt divides the mismatch by ~16."""
    errors = []
    for dt in (2e-3, 1e-3, 5e-4):
        sim = rt.Simulation(chain(3, "position", kp=30.0, kv=0.5), "nullspace_rk4", dt)
        sim.set_controls([0.5, 0.5, -0.5])
        e0 = sim.energy()
        sim.step(round(2.0 / dt))
        errors.append(abs(sim.energy() - e0 - sim.actuator_work().sum()))
    assert errors[0] < 1e-5
    assert errors[0] / errors[1] > 12 and errors[1] / errors[2] > 12


# -- the arm scenario ------------------------------------------------------------------------
@pytest.mark.parametrize("integrator", TREE_SCHEMES)
def test_arm_scenario_settles_at_its_targets(integrator):
    sim = rt.scenarios.build("arm", integrator=integrator)
    assert sim.actuator_names == ["joint0", "joint1"]
    sim.step(3000)
    # gravity against kp = 200 leaves an offset of a few hundredths of a radian
    assert np.allclose(sim.qpos(), [0.5, -0.8], atol=0.05)
    assert np.max(np.abs(sim.qvel())) < 1e-3
    sim.set_control("joint1", 0.0)
    sim.step(3000)
    assert abs(sim.qpos()[1]) < 0.05


def test_arm_scenario_parameters():
    sim = rt.scenarios.build("arm", integrator="nullspace_rk4", n_links=7, joint="prismatic",
                             kv=40.0)
    assert sim.nv == 7 and sim.na == 7
    sim.step(5000)
    assert np.allclose(sim.qpos(), [0.05] + [-0.08] * 6, atol=1e-3)
    with pytest.raises(ValueError, match="^joint:"):
        rt.scenarios.build("arm", joint="spherical")


def test_em_newton_matrix_takes_the_servos():
    """The Newton matrix with stiff servos on a planar chain is the residual's Jacobian (the
    finite-difference check of test_multibody_em), away from the solution too."""
    from tests.helpers import newton_error

    sim = rt.Simulation(chain(3, "position", kp=2e3, kv=5.0), "energy_momentum", 1.0 / 60.0)
    sim.set_controls([0.6, -0.9, 0.4])
    sim.step(3)
    mu = sim.dt * sim.backend.nu
    assert newton_error(sim, mu) < 1e-5
    assert newton_error(sim, 1.2 * mu + 1e-3, seed=1) < 1e-4


# -- the control loop's fast paths keep the checks ----------------------------------------------
def test_set_controls_compiled_path_reads_every_float64_vector_right():
    """After its first call set_controls clamps through the compiled entry point, which reads
    its arrays as contiguous: a strided or read-only float64 vector must give the same
    controls as a list, and a bad vector is still refused with the controls unchanged."""
    sim = rt.Simulation(chain(3, "motor", ctrl_range=(-5.0, 5.0)), "semi_implicit_euler", 1e-3)
    for _ in range(2):  # the first call compiles and takes the entry point, the second uses it
        sim.set_controls(np.array([0.1, 0.2, 0.3]))
        assert sim.controls().tolist() == [0.1, 0.2, 0.3]
    sim.set_controls(np.arange(6.0)[::2])
    assert sim.controls().tolist() == [0.0, 2.0, 4.0]
    sim.set_controls(np.arange(12.0).reshape(3, 4)[:, 3])
    assert sim.controls().tolist() == [3.0, 5.0, 5.0]
    ro = np.array([-1.0, -7.0, 1.5])
    ro.flags.writeable = False
    sim.set_controls(ro)
    assert sim.controls().tolist() == [-1.0, -5.0, 1.5]
    for bad in (np.array([1.0, np.nan, 2.0]), np.array([1.0, 2.0]), np.zeros((3, 1)),
                np.array([0.0, 1.0, np.inf, 2.0, 0.0, 3.0])[::2]):
        with pytest.raises(ValueError, match="^u:"):
            sim.set_controls(bad)
        assert sim.controls().tolist() == [-1.0, -5.0, 1.5]
    sim.set_controls(np.array([1, 2, 3], np.float32))  # converted, as by the checks
    assert sim.controls().tolist() == [1.0, 2.0, 3.0]


def test_fast_paths_still_refuse_what_the_checks_refuse():
    sim = rt.Simulation(chain(2, "motor"), "nullspace_rk4", 1e-3)
    before = sim.snapshot()
    for bad in ((10 ** 400, 0, 0), (np.nan, 0.0, 0.0), ("1", "2", "3"), (1.0, 2.0),
                np.zeros((3, 1)), (np.inf, 0.0, 0.0), None):
        calls = [lambda: sim.apply_force(0, bad), lambda: sim.apply_torque(0, bad)]
        if bad is not None:  # point=None is the centre of mass
            calls.append(lambda: sim.apply_force(0, (1.0, 0.0, 0.0), point=bad))
        for call in calls:
            with pytest.raises(ValueError, match="^(force|torque|point):"):
                call()
    for bad in (np.array([np.nan, 0.0]), np.array([np.inf, 0.0]), np.array([1.0, 2.0, 3.0]),
                np.array([True, False]), [0.0, "1"]):
        with pytest.raises(ValueError, match="^u:"):
            sim.set_controls(bad)
    with pytest.raises(ValueError, match="^value:"):
        sim.set_joint_force(0, np.nan)
    sim.apply_force(0, (1e308, 0.0, 0.0))
    with pytest.raises(ValueError, match="^force: the applied loads would not be finite"):
        sim.apply_force(0, (1e308, 0.0, 0.0))
    sim.clear_applied()
    after = sim.snapshot()
    assert all(np.array_equal(x, y) for x, y in zip(before._data[:3], after._data[:3]))
    # and accept what the checks accept, the same way
    sim.set_controls(np.array([1e300, -1e300]))
    assert sim.controls().tolist() == [1e300, -1e300]
    sim.set_controls([1, 2])
    assert sim.controls().tolist() == [1.0, 2.0]
    for force in ((1, 2, 3), np.array([1.0, 2.0, 3.0], np.float32), [np.int64(1), 2.0, 3]):
        sim.clear_applied()
        sim.apply_force(1, force, point=(0.0, 0.1, 0.0), frame="body")
        f_body = np.array([1.0, 2.0, 3.0])
        R = rt.quat.rotmat(sim.pose(1)[1], np.empty((3, 3)))
        f, t = sim.applied(1)
        assert np.allclose(f, R @ f_body, atol=1e-15)
        assert np.allclose(t, np.cross(R @ np.array([0.0, 0.1, 0.0]), R @ f_body), atol=1e-15)
