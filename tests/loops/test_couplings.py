"""Joint couplings (``Model.add_coupling``): q_joint = offset + ratio * q_source, held exactly
by the schemes that step loops, against the reduced equations of motion of the coupled system."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

import rtrigid as rt

G = 9.81
MASS, SPIN = 1.0, 0.01  # each bob: mass, moment about its centre
ARMS = {"a": 0.4, "b": 0.7}  # pivot to centre


def _pendulums(ratio, offset):
    """Two pendulums on the world about parallel axes, a's angle = offset + ratio * b's."""
    m = rt.Model()
    for k, (n, arm) in enumerate(ARMS.items()):
        m.add_body(n, MASS, (SPIN, SPIN, SPIN))
        m.add_joint("revolute", None, n, anchor_parent=(0, k, 0), anchor_child=(0, 0, arm),
                    axis_parent=(0, 1, 0), name=n)
    m.add_coupling("a", "b", ratio, offset)
    return m


def _reduced(ratio, offset, b0, t_end):
    """b's angle at t_end from the coupled system's one equation of motion (b from rest):
    (I_a c^2 + I_b) b'' = -c m g l_a sin(a) - m g l_b sin(b), a = offset + c b."""
    inertia = {n: SPIN + MASS * arm**2 for n, arm in ARMS.items()}
    eff = inertia["a"] * ratio**2 + inertia["b"]

    def rhs(t, y):
        a = offset + ratio * y[0]
        torque = -ratio * MASS * G * ARMS["a"] * np.sin(a) - MASS * G * ARMS["b"] * np.sin(y[0])
        return [y[1], torque / eff]

    sol = solve_ivp(rhs, (0.0, t_end), [b0, 0.0], method="DOP853", rtol=1e-13, atol=1e-13)
    return sol.y[0, -1]


def _angle(sim, joint):
    return sim.joint_position(joint)[0]


@pytest.mark.parametrize("ratio,offset", [(0.5, 0.1), (-2.0, 0.0)])
@pytest.mark.parametrize("integrator,tol", [("nullspace_rk4", 1e-9), ("energy_momentum", 1e-5)])
def test_coupled_pendulums_follow_the_reduced_equation(integrator, tol, ratio, offset):
    sim = rt.Simulation(_pendulums(ratio, offset), integrator=integrator, dt=1e-3)
    sim.set_joint_position("b", [0.6])  # a follows: the written value is kept
    assert _angle(sim, "a") == pytest.approx(offset + ratio * 0.6, abs=1e-14)
    e0 = sim.energy()
    sim.step(1000)
    b = _angle(sim, "b")
    assert abs(b - _reduced(ratio, offset, 0.6, 1.0)) < tol
    assert abs(_angle(sim, "a") - offset - ratio * b) < 1e-12
    assert sim.constraint_error() < 1e-12
    if integrator == "energy_momentum":  # the coupling's reaction does no work
        assert abs(sim.energy() - e0) < 1e-10 * abs(e0)


def test_a_rack_driven_through_its_pinion_accelerates_as_one_body():
    """A pinion (moment I about its axle) drives a rack (mass M) with x = r * theta; a force F
    on the rack gives theta'' = F r / (I + M r^2): exact under RK4, the accelerometer reads it."""
    r, inertia, mass, force = 0.05, 0.002, 3.0, 4.0
    m = rt.Model(gravity=(0, 0, 0))
    m.add_body("pinion", 1.0, (inertia, inertia, inertia))
    m.add_body("rack", mass, (0.1, 0.1, 0.1))
    m.add_joint("revolute", None, "pinion", axis_parent=(0, 0, 1), name="axle")
    m.add_joint("prismatic", None, "rack", axis_parent=(1, 0, 0), name="slide")
    m.add_coupling("slide", "axle", r)
    sim = rt.Simulation(m, integrator="nullspace_rk4", dt=1e-3)
    sim.set_joint_force("slide", [force])
    alpha = force * r / (inertia + mass * r**2)
    accel = sim.imu("rack")[1]
    assert accel[0] == pytest.approx(alpha * r, rel=1e-12)
    sim.step(500)
    assert _angle(sim, "axle") == pytest.approx(0.5 * alpha * 0.5**2, rel=1e-10)
    assert _angle(sim, "slide") == pytest.approx(r * 0.5 * alpha * 0.5**2, rel=1e-10)


def _chain():
    """A two-link arm whose elbow turns back twice the shoulder's angle (a parallel gripper's
    linkage), with a servo on the shoulder."""
    m = rt.Model()
    m.add_body("upper", 1.0, (0.01, 0.01, 0.002))
    m.add_body("lower", 0.5, (0.004, 0.004, 0.001))
    m.add_joint("revolute", None, "upper", anchor_child=(0, 0, 0.15), axis_parent=(0, 1, 0),
                name="shoulder")
    m.add_joint("revolute", "upper", "lower", anchor_parent=(0, 0, -0.15),
                anchor_child=(0, 0, 0.1), axis_parent=(0, 1, 0), name="elbow")
    m.add_coupling("elbow", "shoulder", -2.0)
    return m


def test_a_servo_on_the_source_holds_the_coupled_arm_where_statics_puts_it():
    """The elbow turns back twice the shoulder's angle, so the lower link hangs at -s and the
    arm's potential is -0.35 g cos(s): the servo rests where kp (0.3 - s) = 0.35 g sin(s).
    Under ``energy_momentum`` the solve keeps converging at rest (no fallback steps)."""
    kp = 40.0
    m = _chain()
    m.add_actuator("shoulder", "position", kp=kp, kv=4.0)
    sim = rt.Simulation(m, integrator="energy_momentum", dt=2e-3)
    sim.set_controls([0.3])
    sim.step(3000)
    rest = brentq(lambda s: kp * (0.3 - s) - 0.35 * G * np.sin(s), 0.0, 0.3)
    assert _angle(sim, "shoulder") == pytest.approx(rest, abs=1e-7)
    assert _angle(sim, "elbow") == pytest.approx(-2.0 * _angle(sim, "shoulder"), abs=1e-12)
    assert sim.solver_stats()["fallback_steps"] == 0


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_coupled_copies_in_a_batch_step_as_their_simulations(integrator):
    starts = np.array([[q, -2.0 * q] for q in (0.2, -0.4, 0.7)])
    batch = rt.Batch(_chain(), 3, integrator=integrator, dt=2e-3)
    batch.set_qpos(starts)
    batch.step(50)
    for i, q in enumerate(starts):
        sim = rt.Simulation(_chain(), integrator=integrator, dt=2e-3)
        sim.set_qpos(q)
        sim.step(50)
        assert np.array_equal(batch.qpos()[i], sim.qpos())
        assert abs(sim.qpos()[1] + 2.0 * sim.qpos()[0]) < 1e-12


def _on_the_ground(friction=0.0):
    """The pendulums coupled 1:1, a sphere on a's bob that meets the ground at 0.5 rad."""
    m = _pendulums(1.0, 0.0)
    m.add_geom("a", "sphere", radius=0.05, friction=friction)
    m.add_ground(height=-ARMS["a"] * np.cos(0.5) - 0.05, friction=friction)
    return m


def test_a_coupled_pendulum_resting_on_the_ground_carries_both_weights():
    """At rest on a frictionless ground at a = b = 0.5 the contact's normal force N balances
    both bobs through the coupling: N l_a sin(a) = m g (l_a + l_b) sin(a), so each step's
    impulse is m g (l_a + l_b) / l_a dt, and neither joint moves."""
    sim = rt.Simulation(_on_the_ground(), integrator="nullspace_rk4", dt=1e-3)
    sim.set_joint_position("a", [0.52])
    sim.step(1200)
    (contact,) = sim.contacts()
    impulse = MASS * G * (ARMS["a"] + ARMS["b"]) / ARMS["a"] * 1e-3
    assert contact["impulse"][2] == pytest.approx(impulse, rel=1e-4)
    assert np.allclose(sim.qpos(), 0.5, atol=1e-5)
    assert np.max(np.abs(sim.qvel())) < 1e-12
    assert sim.constraint_error() < 1e-12
    before = sim.qpos()
    sim.step(600)
    assert np.max(np.abs(sim.qpos() - before)) < 1e-12


def test_an_inelastic_impact_stops_both_coupled_joints_and_never_adds_energy():
    sim = rt.Simulation(_on_the_ground(), integrator="nullspace_rk4", dt=1e-3)
    sim.set_joint_position("a", [1.2])
    energy = [sim.energy()]
    for _ in range(400):
        sim.step()
        energy.append(sim.energy())
        assert abs(sim.qvel()[0] - sim.qvel()[1]) < 1e-12
        assert sim.constraint_error() < 1e-12
    assert np.all(np.diff(energy) <= 1e-12 * abs(energy[0]))
    assert sim.contacts() and np.max(np.abs(sim.qvel())) < 1e-12


def test_schemes_that_do_not_step_couplings_refuse_them_naming_the_coupling():
    with pytest.raises(ValueError, match="joint coupling 'coupling_a'.*nullspace_rk4"):
        rt.Simulation(_pendulums(1.0, 0.0), integrator="semi_implicit_euler", dt=1e-3)
    with pytest.raises(ValueError, match="does not step contacts on a model with loop joints "
                                         "or joint couplings .joint coupling 'coupling_a'.*"
                                         "schemes that step this model: \\['nullspace_rk4'\\]"):
        rt.Simulation(_on_the_ground(), integrator="energy_momentum", dt=1e-3)
    with pytest.raises(ValueError, match="does not batch contacts on a model with loop"):
        rt.Batch(_on_the_ground(), 2, integrator="nullspace_rk4", dt=1e-3)


@pytest.mark.parametrize("args,kw,field", [
    (("a", "a"), {}, "source"),
    (("a", "nope"), {}, "joint"),
    (("a", "b"), {"ratio": float("nan")}, "ratio"),
    (("a", "b"), {"offset": "1"}, "offset"),
    (("a", "b"), {"name": "b"}, "name"),
    (("a", "ball"), {}, "source"),
    (("b", "a"), {}, "joint"),  # b already follows a coupling (added first below)
])
def test_bad_couplings_are_refused_naming_the_field_and_change_nothing(args, kw, field):
    m = rt.Model()
    for n in ("a", "b", "c"):
        m.add_body(n, 1.0, (0.01, 0.01, 0.01))
    m.add_joint("revolute", None, "a", axis_parent=(0, 1, 0), name="a")
    m.add_joint("prismatic", None, "b", axis_parent=(1, 0, 0), name="b")
    m.add_joint("spherical", None, "c", name="ball")
    m.add_coupling("b", "a", 0.1)
    before = list(m.couplings)
    with pytest.raises(ValueError, match=rf"^{field}: "):
        m.add_coupling(*args, **kw)
    assert m.couplings == before


MJCF = """<mujoco>
  <worldbody>
    <body name="a" pos="0 0 1"><joint name="ja" type="hinge" axis="0 1 0" ref="{ref}"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02" contype="0" conaffinity="0"/>
    </body>
    <body name="b" pos="0 1 1"><joint name="jb" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.7" size="0.02" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality>
    <joint name="gear" joint1="ja" joint2="jb" polycoef="{poly}"/>
  </equality>
</mujoco>
"""


def test_mjcf_joint_equality_is_a_coupling_in_mujocos_coordinates(tmp_path):
    """MuJoCo's q1 - ref1 = c0 + c1 (q2 - ref2) becomes q1 = ref1 + c0 - c1 ref2 + c1 q2 in
    its own coordinates, which the loader keeps."""
    path = tmp_path / "gear.xml"
    path.write_text(MJCF.format(ref="10", poly="0.1 -1.5 0 0 0"))  # ref in degrees
    ref = np.radians(10.0)
    model = rt.load_model(str(path))
    (c,) = model.couplings
    assert (c.name, c.joint, c.source) == ("gear", "ja", "jb")
    assert (c.ratio, c.offset) == (-1.5, pytest.approx(ref + 0.1, abs=1e-15))
    assert any(e.what == "equality joint" for e in model.load_report.approximated)
    sim = rt.Simulation(model, integrator="nullspace_rk4", dt=1e-3)
    sim.set_joint_position("jb", [0.4])
    sim.step(100)
    assert _angle(sim, "ja") - ref == pytest.approx(0.1 - 1.5 * _angle(sim, "jb"), abs=1e-12)
    path.write_text(MJCF.format(ref="0", poly="0 1 0.5 0 0"))
    model = rt.load_model(str(path))
    assert not model.couplings
    assert any(e.what == "equality joint" and "degree" in e.detail
               for e in model.load_report.ignored)
