"""One Simulation over both backends: the registry decides what runs, handles and frames
are the same everywhere, and a user's mistake on the command line is one line and exit 2."""
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

import rtrigid as rt
from rtrigid import cli, scenarios
from rtrigid.joints import KINDS
from tests.helpers import without_compile_notice


def _pendulum(kind="revolute"):
    m = rt.Model()
    m.add_body("base", 2.0, (0.1, 0.1, 0.1))
    m.add_body("arm", 1.0, (0.02, 0.02, 0.01))
    axis = {"axis_parent": (1.0, 0.0, 0.0)} if KINDS[kind].axial else {}
    m.add_joint("fixed", None, "base")
    j = m.add_joint(kind, "base", "arm", anchor_parent=(0.0, 0.0, -0.1),
                    anchor_child=(0.0, 0.0, 0.2), **axis)
    return m, j


@pytest.mark.parametrize("scenario", ["free_body", "gyro_top", "gimbal_gyroscope"])
def test_angular_velocity_round_trips_with_default_frames(scenario):
    sim = scenarios.build(scenario, integrator="nullspace_rk4")
    body = {"gimbal_gyroscope": None}.get(scenario, 0)
    if body is None:  # a jointed model: the free body of a tree
        m = sim.model
        m.add_body("puck", 1.0, (0.1, 0.2, 0.25))
        sim = rt.Simulation(m, "nullspace_rk4", 0.002)
        body = "puck"
    sim.set_orientation(body, rt.quat.from_rotvec(np.array([0.3, -0.2, 0.5])))
    omega = np.array([1.5, -2.0, 0.25])
    sim.set_angular_velocity(body, omega)
    np.testing.assert_allclose(sim.velocity(body)[1], omega, rtol=0, atol=1e-15 * 4)
    # and in the body frame (bit for bit on the bodies backend, which stores that vector)
    sim.set_angular_velocity(body, omega, frame="body")
    np.testing.assert_allclose(sim.velocity(body, frame="body")[1], omega, rtol=0, atol=1e-15)
    if sim.backend.name == "bodies":
        np.testing.assert_array_equal(sim.velocity(body, frame="body")[1], omega)


def test_add_joint_handle_is_what_joint_queries_take():
    m, j = _pendulum()
    assert j == 1
    sim = rt.Simulation(m, "energy_momentum", 0.001)
    sim.set_joint_position(j, [0.4])
    np.testing.assert_array_equal(sim.joint_position(j), [0.4])
    np.testing.assert_array_equal(sim.joint_position("revolute_arm"), [0.4])
    assert sim.joint_position(0).size == 0  # the fixed joint, handle 0
    # the arm really turned by 0.4 about x: its z axis leans towards -y
    z = rt.quat.rotate(sim.pose("arm")[1], np.array([0.0, 0.0, 1.0]), np.empty(3))
    np.testing.assert_allclose(z, [0.0, -np.sin(0.4), np.cos(0.4)], atol=1e-15)
    with pytest.raises(ValueError, match="^joint"):
        sim.joint_position(2)


def test_pivot_of_a_single_body_is_a_joint_too():
    sim = scenarios.build("gyro_top", integrator="nullspace_rk4")
    name = "pivot_top"
    assert sim.joint_names == [name]
    np.testing.assert_array_equal(sim.joint_position(name), sim.pose("top")[1])
    np.testing.assert_array_equal(sim.joint_velocity(name), sim.velocity("top", "body")[1])
    sim.set_joint_velocity(name, [0.0, 0.0, 5.0])
    np.testing.assert_array_equal(sim.velocity("top", frame="body")[1], [0.0, 0.0, 5.0])


@pytest.mark.parametrize("name", rt.integrators.names())
def test_every_integrator_is_accepted_exactly_where_the_registry_says(name):
    entry = rt.integrators.get(name)
    for kind in ("revolute", "prismatic", "spherical"):
        m, _ = _pendulum(kind)
        if "tree" in entry.backends() and kind in entry.joint_kinds:
            sim = rt.Simulation(m, name, 1e-3)
            sim.step(5)
            assert sim.constraint_error() < 1e-12
        else:
            with pytest.raises(ValueError, match="^integrator: .*schemes that step this model: .*nullspace_rk4"):
                rt.Simulation(m, name, 1e-3)
    assert rt.Simulation(rt.scenarios.build("free_body").model, name, 1e-3).integrator == name


def test_state_views_handed_out_are_read_only():
    sim = scenarios.build("free_body", integrator="nullspace_rk4")
    for view in (sim.x, sim.q, sim.v, sim.w):
        with pytest.raises(ValueError):
            view[0, 0] = 1.0


def test_forces_and_impulses_name_their_frames_alike():
    a = scenarios.build("free_body", integrator="nullspace_rk4")
    b = scenarios.build("free_body", integrator="nullspace_rk4")
    q = a.pose(0)[1]
    R = rt.quat.rotmat(q, np.empty((3, 3)))
    f_body, p_body = np.array([0.0, 1.0, 0.5]), np.array([0.1, 0.0, -0.2])
    a.apply_force(0, f_body, point=p_body, frame="body")
    b.apply_force(0, R @ f_body, point=b.pose(0)[0] + R @ p_body)
    for u, v in zip(a.applied(0), b.applied(0)):
        np.testing.assert_allclose(u, v, atol=1e-15)
    a.apply_impulse(0, f_body, p_body, frame="body")
    b.apply_impulse(0, impulse_world=R @ f_body, point_world=b.pose(0)[0] + R @ p_body)
    for u, v in zip(a.velocity(0), b.velocity(0)):
        np.testing.assert_allclose(u, v, atol=1e-14)


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "rtrigid.cli", *argv], capture_output=True,
                          text=True, timeout=300)


def _one_line_exit_2(out, field):
    err = without_compile_notice(out.stderr)
    assert out.returncode == 2, out.stderr
    assert err.count("\n") == 1 and "Traceback" not in err, out.stderr
    assert re.match(r"rtrigid( \w+)?: error: ", err) and field in err, out.stderr


def test_cli_non_finite_step_is_one_line_with_the_step_and_a_hint():
    out = _cli("run", "gyro_top", "--dt", "0.5", "--integrator", "nullspace_rk4")
    _one_line_exit_2(out, "step ")
    assert "t=" in out.stderr and "try a smaller dt" in out.stderr


@pytest.mark.parametrize("argv,field", [
    (["run", "chain", "--set", "n=2.5"], "n: expected an integer"),
    (["run", "chain", "--integrator", "director"], "integrator: director has no kernel"),
    (["run", "gyro_top", "--integrator", "nope"], "--integrator"),
    (["run", "nope"], "SCENARIO"),
])
def test_cli_user_mistakes_are_one_line(argv, field):
    _one_line_exit_2(_cli(*argv), field)


def test_cli_serve_on_a_busy_port_is_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = _cli("serve", "gyro_top", "--port", str(port))
    _one_line_exit_2(out, "in use")


def test_cli_in_process_errors_match(capsys):
    assert cli.main(["run", "chain", "--set", "n=2.5"]) == 2
    assert capsys.readouterr().err == "rtrigid: error: n: expected an integer, got 2.5\n"
