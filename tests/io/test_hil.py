"""rtrigid.hil: lock-step stepping over loopback TCP.

Determinism: every reply of the server is compared, byte for byte, with the same calls made
through the Simulation API in process.  Robustness: hostile packets are built here from the
protocol as documented (struct formats written out again, not taken from rtrigid.hil), and
after each the server must answer with the documented error code, stay up, and leave its
simulation exactly as it was.  Every server is stopped by the test that started it.
"""
import contextlib
import json
import math
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

from rtrigid import scenarios
from rtrigid.io.hil import Client, Server, ServerError
from rtrigid.model import Model
from rtrigid.simulation import Simulation, SimulationError

HEADER = "<4sBBHII"       # magic, version, kind, flags, seq, length
HELLO, STEP, STATE, RESET, SET_STATE = 1, 2, 3, 4, 5
VERSION = 2
RECORD = "<I6d"           # body, force xyz, torque xyz
STATE_HEAD = "<dQIIII"    # t, steps, n_bodies, nq, nv, n_sensor_values
TIMEOUT = 10.0            # guards against a hang; no test measures speed


def two_body_sim(integrator="energy_momentum", dt=2e-3):
    """A pivoted top and a free puck on a spring (the spring puts the puck on the App. D solver)."""
    m = Model()
    m.add_body("top", 1.0, (0.02, 0.02, 0.01))
    m.attach_to_world("top", point_body=(0.0, 0.0, -0.1))
    m.add_body("puck", 0.5, (1e-3, 2e-3, 2.5e-3))
    m.add_spring("puck", (0.01, 0.0, 0.0), (0.3, 0.0, 0.2), 40.0)
    sim = Simulation(m, integrator, dt)
    sim.set_orientation("top", (0.96, 0.28, 0.0, 0.0))
    sim.set_angular_velocity("top", (0.0, 0.0, 80.0), frame="body")
    sim.set_position("puck", (0.3, 0.05, 0.1))
    sim.set_angular_velocity("puck", (1.0, -2.0, 3.0), frame="body")
    return sim


def expected(sim):
    """The reply content, computed in process through the public API."""
    poses = np.array([np.concatenate(sim.pose(b)) for b in range(sim.nb)])
    vels = np.array([np.concatenate(sim.velocity(b)) for b in range(sim.nb)])
    return sim.t, sim.steps_taken, poses, vels


def assert_bits_equal(reply, sim):
    t, steps, poses, vels = expected(sim)
    assert struct.pack("<d", reply["t"]) == struct.pack("<d", t)
    assert reply["steps"] == steps
    assert reply["poses"].shape == (sim.nb, 7) and reply["velocities"].shape == (sim.nb, 6)
    assert reply["poses"].tobytes() == poses.tobytes()
    assert reply["velocities"].tobytes() == vels.tobytes()


def in_process_step(sim, n, forces):
    """The documented meaning of a STEP with loads, spelled out with the Simulation API."""
    for body, (force, torque) in forces.items():
        sim.apply_force(body, force)
        sim.apply_torque(body, torque)
    sim.step(n)
    sim.clear_applied()


def sim_fingerprint(sim):
    """Everything a refused request must leave untouched (through public accessors)."""
    parts = [struct.pack("<dq", sim.t, sim.steps_taken)]
    for b in range(sim.nb):
        for arr in sim.pose(b) + sim.velocity(b) + sim.applied(b):
            parts.append(arr.tobytes())
    parts.append(repr(sim.solver_stats()).encode())
    return b"".join(parts)


def packet(kind, payload=b"", *, magic=b"RTRG", version=VERSION, flags=0, seq=7, length=None):
    n = len(payload) if length is None else length
    return struct.pack(HEADER, magic, version, kind, flags, seq, n) + payload


def step_payload(n, records, controls=(), joint_forces=()):
    """STEP: loads (body, force, torque), controls (actuator, value), joint forces (joint,
    values...)."""
    return (struct.pack("<IIII", n, len(records), len(controls), len(joint_forces))
            + b"".join(struct.pack(RECORD, *r) for r in records)
            + b"".join(struct.pack("<Id", *c) for c in controls)
            + b"".join(struct.pack(f"<I{len(f) - 1}d", *f) for f in joint_forces))


def set_state_payload(qpos=(), qvel=()):
    return struct.pack(f"<II{len(qpos) + len(qvel)}d", len(qpos), len(qvel), *qpos, *qvel)


def read_reply(sock, version=VERSION):
    """(kind, seq, payload) of one reply, or None if the server closed the connection.

    ``version=None``: a reply of another version is allowed when it is ERROR 2 (the answer to
    a request of that version)."""
    def exact(size):
        buf = b""
        while len(buf) < size:
            chunk = sock.recv(size - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    head = exact(16)
    if head is None:
        return None
    magic, got_version, kind, flags, seq, length = struct.unpack(HEADER, head)
    assert (magic, flags) == (b"RTRG", 0)
    payload = exact(length)
    if version is None and got_version != VERSION:
        assert kind == 0xFF and struct.unpack_from("<H", payload)[0] == 2
    else:
        assert got_version == (VERSION if version is None else version)
    return kind, seq, payload


def raw_socket(server):
    """An unconnected socket of the server's transport (TCP or Unix-domain)."""
    return socket.socket(socket.AF_UNIX if isinstance(server.address, str) else socket.AF_INET)


def connect(server):
    sock = raw_socket(server)
    sock.settimeout(TIMEOUT)
    sock.connect(server.address)
    if sock.family == socket.AF_INET:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def client_for(server, **kw):
    """A Client of ``server`` over its transport, spinning if the server does."""
    kw.setdefault("timeout", TIMEOUT)
    kw.setdefault("spin", 5e-4 if server.spin else 0.0)
    if isinstance(server.address, str):
        return Client(unix=server.address, **kw)
    return Client(*server.address, **kw)


def is_closed(sock):
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


TRANSPORTS = {  # Server keywords; the hostile-packet tests run over each
    "tcp": {},
    "unix": {"unix": True},
    "tcp, spin": {"spin": 2e-3},
    "unix, spin": {"unix": True, "spin": 2e-3},
}


def make_server(sim, tmp_path, unix=False, **kw):
    if unix:
        kw["unix"] = str(tmp_path / "rtrigid.sock")
    return Server(sim, port=0, **kw)


@pytest.fixture(params=list(TRANSPORTS))
def served(request, tmp_path):
    sim = two_body_sim()
    server = make_server(sim, tmp_path, partial_timeout=0.3, **TRANSPORTS[request.param]).start()
    yield server, sim
    server.stop()


# -- determinism over the wire ------------------------------------------------------------------

@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("integrator", ["energy_momentum", "nullspace_rk4"])
def test_stepping_over_the_wire_is_bit_identical_to_in_process(integrator, transport, tmp_path):
    ref = two_body_sim(integrator)
    rng = np.random.default_rng(6)
    with make_server(two_body_sim(integrator), tmp_path, **TRANSPORTS[transport]).start() as \
            server, client_for(server) as client:
        assert client.names == ["top", "puck"] and client.dt == ref.dt
        assert client.integrator == integrator
        assert_bits_equal(client.state(), ref)
        for i in range(40):
            n = int(rng.integers(0, 6))
            loads = {}
            if i % 3:
                loads["top"] = (rng.normal(size=3), 0.05 * rng.normal(size=3))
            if i % 4 == 1:
                loads[1] = (rng.normal(size=3), 1e-3 * rng.normal(size=3))
            reply = client.step(n, forces=loads)
            in_process_step(ref, n, {ref.body_index(b): v for b, v in loads.items()})
            assert_bits_equal(reply, ref)
            if i == 25:
                snap0 = two_body_sim(integrator).snapshot()
                assert_bits_equal(client.reset(), two_body_sim(integrator))
                ref.restore(snap0)
        reply = client.step(3, forces={"puck": {"torque": (0, 0, 1e-3)}})
        in_process_step(ref, 3, {"puck": ((0, 0, 0), (0, 0, 1e-3))})
        assert_bits_equal(reply, ref)
        assert ref.steps_taken > 20


def chain_sim(integrator="energy_momentum"):
    sim = scenarios.build("chain", integrator=integrator, n=3)
    sim.set_joint_velocity("joint1", (0.5, -1.0, 2.0))
    return sim


def assert_joint_state_bits_equal(reply, sim):
    assert_bits_equal(reply, sim)
    assert reply["qpos"].tobytes() == sim.qpos().tobytes()
    assert reply["qvel"].tobytes() == sim.qvel().tobytes()


@pytest.mark.parametrize("integrator", ["energy_momentum", "nullspace_rk4"])
def test_joint_forces_and_set_state_over_the_wire_match_in_process(integrator):
    """Protocol 2: HELLO describes the joints; held joint forces, qpos/qvel in every state
    reply and SET_STATE give bit for bit what the same Simulation calls give in process."""
    ref = chain_sim(integrator)
    ref.step(0)   # compile (or load) the kernel here, not while the client waits for a reply
    with Server(chain_sim(integrator), port=0).start() as server, client_for(server) as client:
        assert client.joint_names == ref.joint_names
        assert (client.nq, client.nv) == (ref.nq, ref.nv)
        at = 0
        for j in client.joints:
            assert j["kind"] == "spherical" and (j["nq"], j["nv"]) == (4, 3)
            assert j["qpos_at"] == at and j["limits"] == (-math.inf, math.inf)
            at += 4
        assert [j["parent"] for j in client.joints] == [-1, 0, 1]
        assert_joint_state_bits_equal(client.state(), ref)
        reply = client.step(5, joint_forces={"joint1": (0.2, 0.0, -0.1), 2: (0.0, 0.3, 0.0)})
        ref.set_joint_force("joint1", (0.2, 0.0, -0.1))
        ref.set_joint_force(2, (0.0, 0.3, 0.0))
        ref.step(5)
        assert_joint_state_bits_equal(reply, ref)
        ref.step(4)   # joint forces are held, as in process
        assert_joint_state_bits_equal(client.step(4), ref)
        qpos, qvel = ref.qpos(), ref.qvel()
        qpos[4:8] = (0.8, 0.6, 0.0, 0.0)
        qvel[:3] = (1.0, 2.0, 3.0)
        ref.set_qpos(qpos)
        ref.set_qvel(qvel)
        assert_joint_state_bits_equal(client.set_state(qpos, qvel), ref)
        ref.set_qvel(np.zeros(ref.nv))
        assert_joint_state_bits_equal(client.set_state(qvel=np.zeros(ref.nv)), ref)
        ref.step(3)
        assert_joint_state_bits_equal(client.step(3), ref)
        with pytest.raises(ServerError) as err:   # a refused state changes nothing
            client.set_state(qpos=np.r_[np.zeros(4), qpos[4:]])
        assert err.value.code == 7 and "qpos" in str(err.value)
        assert_joint_state_bits_equal(client.state(), ref)
        reset = chain_sim(integrator)
        assert_joint_state_bits_equal(client.reset(), reset)   # held forces gone too
        reset.step(2)
        assert_joint_state_bits_equal(client.step(2), reset)


@pytest.mark.parametrize("integrator", ["energy_momentum", "nullspace_rk4"])
def test_a_client_drives_the_arm_with_controls_and_reads_its_imu(integrator):
    """Protocol 2 on the ``arm`` scenario: HELLO lists its servos; controls (by name, index or
    all at once) are held like set_control/set_controls; an IMU's readings and the arm's
    qpos/qvel come back bit for bit as the same calls give them in process."""
    ref = scenarios.build("arm", integrator=integrator, n_links=3)
    ref.step(0)
    point = (0.0, 0.0, -0.15)
    with Server(scenarios.build("arm", integrator=integrator, n_links=3), port=0,
                imus=["link2", ("link1", point)]).start() as server, \
            client_for(server) as client:
        assert client.actuator_names == ref.actuator_names == ["joint0", "joint1", "joint2"]
        assert [(a["kind"], a["joint"], a["force_range"]) for a in client.actuators] == [
            ("position", k, (-40.0, 40.0)) for k in range(3)]
        assert [s["name"] for s in client.sensors] == ["imu:link2", "imu:link1@0,0,-0.15"]

        def check(reply):
            assert_joint_state_bits_equal(reply, ref)
            for name, (body, at) in (("imu:link2", ("link2", (0, 0, 0))),
                                     ("imu:link1@0,0,-0.15", ("link1", point))):
                gyro, accel = ref.imu(body, at)
                assert reply["sensors"][name].tobytes() == np.r_[gyro, accel].tobytes()

        reply = client.step(20, controls={"joint1": 0.3, 0: -0.2})
        ref.set_control("joint1", 0.3)
        ref.set_control(0, -0.2)
        ref.step(20)
        check(reply)
        check(client.state())
        ref.step(15)   # held
        check(client.step(15))
        u = np.array([0.1, -0.4, 0.25])
        ref.set_controls(u)
        ref.set_joint_force("joint2", 0.05)
        ref.step(10)
        check(client.step(10, controls=u, joint_forces={"joint2": 0.05}))
        with pytest.raises(ValueError, match="controls"):    # refused before it is sent
            client.step(1, controls={"joint0": 0.1, "joint1": math.inf})
        with pytest.raises(ValueError, match="controls"):
            client.step(1, controls=[0.1, 0.2])
        check(client.state())
        sock = connect(server)   # and by the server, changing nothing
        sock.sendall(packet(STEP, step_payload(1, [], controls=[(0, 0.1), (1, NAN)]), seq=3)
                     + packet(STEP, step_payload(1, [], controls=[(3, 0.1)]), seq=4)
                     + packet(STATE, seq=5))
        for seq in (3, 4):
            kind, got, payload = read_reply(sock)
            assert (kind, got, struct.unpack_from("<H", payload)[0]) == (0xFF, seq, 7)
        kind, _, payload = read_reply(sock)
        assert kind == STATE | 0x80 and struct.unpack_from("<Q", payload, 8)[0] == 0
        sock.close()


@pytest.mark.parametrize("version", [0, 1, 3])
def test_a_client_of_another_version_gets_an_error_it_can_read(served, version):
    """A version-1 client (or any other) gets ERROR 2 in its own version's header, whose
    layout every version shares, and the connection stays usable for a version-2 request."""
    server, _ = served
    sock = connect(server)
    sock.sendall(packet(HELLO, version=version, seq=3))
    kind, seq, payload = read_reply(sock, version=version)
    assert (kind, seq) == (0xFF, 3)
    assert struct.unpack_from("<H", payload)[0] == 2
    assert f"version {version}" in payload[2:].decode() and "version 2" in payload[2:].decode()
    sock.sendall(packet(STATE, seq=4))
    assert read_reply(sock)[:2] == (STATE | 0x80, 4)
    sock.close()


def test_loads_act_for_their_request_only_and_the_servers_own_loads_stay():
    sim = two_body_sim()
    sim.apply_force("puck", (0.0, 0.0, 2.0))  # a load the served simulation carries itself
    served = sim_fingerprint(sim)
    with Server(sim, port=0).start() as server, Client(*server.address) as client:
        first = client.step(4, forces={"puck": ((0.5, 0, 0), (0, 0, 0)),
                                       "top": ((0, 0, 0), (0, 0.01, 0))})
        second = client.step(3)
    # the connection stepped a copy of it: the given simulation is the starting point only
    assert sim_fingerprint(sim) == served
    ref = two_body_sim()
    ref.apply_force("puck", (0.0, 0.0, 2.0))
    ref.apply_force("puck", (0.5, 0.0, 0.0))
    ref.apply_torque("top", (0.0, 0.01, 0.0))
    ref.step(4)
    assert_bits_equal(first, ref)
    ref.clear_applied()
    ref.apply_force("puck", (0.0, 0.0, 2.0))  # the request's loads gone, the own one back
    ref.step(3)
    assert_bits_equal(second, ref)


@contextlib.contextmanager
def serve_process(*args, **kw):
    """``rtrigid serve ARGS`` as a process: yields (process, its first line, which names the
    address it serves on); stopped (SIGTERM) and its pipes closed on exit."""
    proc = subprocess.Popen([sys.executable, "-m", "rtrigid.cli", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        line = proc.stdout.readline()
        assert "rtrigid serve" in line, proc.stderr.read() if proc.poll() is not None else line
        yield proc, line
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("transport", ["tcp", "unix, spin"])
def test_cli_serve_process_gives_the_in_process_trajectory(transport, tmp_path):
    args = ["gyro_top", "--integrator", "energy_momentum", "--dt", "0.002"]
    path = str(tmp_path / "serve.sock")
    args += ["--unix", path, "--spin", "0.002"] if transport != "tcp" else ["--port", "0"]
    with serve_process(*args) as (proc, line):
        ref = scenarios.build("gyro_top", integrator="energy_momentum", dt=0.002)
        if transport == "tcp":
            client = Client("127.0.0.1", int(line.rsplit(":", 1)[1]), timeout=TIMEOUT)
        else:
            assert line.rstrip().endswith(f"on unix:{path}")
            client = Client(unix=path, timeout=TIMEOUT, spin=5e-4)
        with client:
            assert client.scenario == "gyro_top" and client.names == ref.names
            for k in range(20):
                torque = (0.0, 1e-3 * math.cos(k), 0.0)
                reply = client.step(k % 4 + 1, forces={"top": ((0, 0, 0), torque)})
                in_process_step(ref, k % 4 + 1, {"top": ((0, 0, 0), torque)})
                assert_bits_equal(reply, ref)
    assert proc.returncode in (0, -15)
    assert not (tmp_path / "serve.sock").exists()  # the server removed its socket file


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_serve_stops_on_a_signal_closing_its_connections(sig):
    """It stops and closes cleanly (how fast is measured by scripts/hil_stop_time.py, not
    asserted here)."""
    with serve_process("arm", "--port", "0") as (
            proc, line):
        host, port = line.rsplit(" on ", 1)[1].strip().rsplit(":", 1)
        with Client(host, int(port), timeout=TIMEOUT) as client:
            assert client.step(2)["steps"] == 2
            proc.send_signal(sig)
            assert proc.wait(timeout=TIMEOUT) == 0
            assert client._sock.recv(1) == b""  # the server closed it: end of file, no reset


FACTORY = """
from rtrigid.model import Model


def pendulum(n=2, length=0.3):
    m = Model()
    parent = None
    for i in range(n):
        m.add_body(f"link{i}", 1.0, (0.01, 0.01, 0.002))
        m.add_joint("revolute", parent, f"link{i}", name=f"hinge{i}", axis_parent=(0, 1, 0),
                    anchor_parent=(0, 0, 0) if parent is None else (0, 0, -length / 2),
                    anchor_child=(0, 0, length / 2))
        parent = f"link{i}"
    return m
"""


def test_cli_serve_takes_a_model_factory_and_drives_its_joints(tmp_path, monkeypatch):
    (tmp_path / "factory_for_serve.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    name = "factory_for_serve:pendulum"
    with serve_process(name, "--set", "n=3", "--integrator", "nullspace_rk4", "--port", "0",
                       env=env) as (proc, line):
        ref = scenarios.build(name, integrator="nullspace_rk4", n=3)
        assert ref.dt == scenarios.FACTORY_DT
        with Client("127.0.0.1", int(line.rsplit(":", 1)[1]), timeout=TIMEOUT) as client:
            assert client.scenario == name and client.dt == ref.dt
            assert client.joint_names == ["hinge0", "hinge1", "hinge2"] == ref.joint_names
            assert [(j["kind"], j["nq"], j["nv"], j["qpos_at"]) for j in client.joints] == [
                ("revolute", 1, 1, k) for k in range(3)]
            for k in range(10):
                torque = 0.3 * math.sin(k)
                reply = client.step(k % 3 + 1, joint_forces={"hinge1": torque})
                ref.set_joint_force("hinge1", torque)
                ref.step(k % 3 + 1)
                assert_joint_state_bits_equal(reply, ref)
            assert np.any(ref.qvel() != 0.0)


@pytest.mark.parametrize("name, says", [
    ("no_such_module_here:fn", "cannot import module 'no_such_module_here'"),
    ("rtrigid.scenarios:no_such_function", "has no function 'no_such_function'"),
    ("rtrigid.scenarios:names", "returned a list, not a Model"),
    ("gyro_tops", "'gyro_tops' is neither a scenario"),
])
def test_cli_refuses_a_bad_model_factory_in_one_line(name, says):
    proc = subprocess.run([sys.executable, "-m", "rtrigid.cli", "run", name, "--t-end", "0.01"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_cli_serve_limits_its_clients(tmp_path):
    path = str(tmp_path / "serve.sock")
    with serve_process("gyro_top", "--unix", path, "--max-clients", "1", "--idle-timeout", "inf",
                       "--partial-timeout", "5", "--send-timeout", "0.5", "--time-slice", "0.001"):
        with Client(unix=path, timeout=TIMEOUT) as first:
            with pytest.raises(ServerError) as err:
                Client(unix=path, timeout=TIMEOUT)
            assert err.value.code == 10 and "1 clients already connected" in str(err.value)
            assert first.step(3)["steps"] == 3


@pytest.mark.parametrize("args, field", [
    (["--max-clients", "0"], "max_clients"), (["--max-clients", "many"], "--max-clients"),
    (["--idle-timeout", "-1"], "idle_timeout"), (["--partial-timeout", "nan"], "partial_timeout"),
    (["--send-timeout", "inf"], "send_timeout"), (["--time-slice", "0"], "time_slice"),
    (["--spin", "-1"], "spin"), (["--imu", "top@1,2"], "imu"),
    (["--session-grace", "-5"], "session_grace"),
])
def test_cli_serve_refuses_bad_limits_in_one_line(args, field):
    out = subprocess.run([sys.executable, "-m", "rtrigid.cli", "serve", "gyro_top", "--port",
                          "0", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and field in out.stderr, out.stderr


def test_unix_socket_path_is_removed_on_stop_and_never_taken_from_a_live_server(tmp_path):
    path = tmp_path / "a.sock"
    server = Server(two_body_sim(), unix=str(path)).start()
    assert server.address == str(path) and path.exists()
    with pytest.raises(ValueError, match="^unix: a server already listens"):
        Server(two_body_sim(), unix=str(path))
    with Client(unix=str(path), timeout=TIMEOUT) as client:
        assert client.step(2)["steps"] == 2  # the refused second server changed nothing
    server.stop()
    assert not path.exists()
    with pytest.raises(OSError):
        Client(unix=str(path), timeout=TIMEOUT)


def test_unix_socket_replaces_a_stale_socket_file_and_refuses_other_files(tmp_path):
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(tmp_path / "stale.sock"))  # bound, never listening: what a crash leaves
    stale.close()
    with Server(two_body_sim(), unix=str(tmp_path / "stale.sock")).start() as server, \
            Client(unix=server.address, timeout=TIMEOUT) as client:
        assert client.step(1)["steps"] == 1
    (tmp_path / "data.txt").write_text("keep me")
    with pytest.raises(ValueError, match="^unix: .* not a socket"):
        Server(two_body_sim(), unix=str(tmp_path / "data.txt"))
    assert (tmp_path / "data.txt").read_text() == "keep me"


@pytest.mark.parametrize("spin", [-1e-3, float("nan"), float("inf"), 11.0, "fast", None])
def test_spin_must_be_a_bounded_number_of_seconds(spin):
    with pytest.raises(ValueError, match="^spin"):
        Server(two_body_sim(), port=0, spin=spin)
    with pytest.raises(ValueError, match="^spin"):
        Client("127.0.0.1", 1, spin=spin)


# -- malformed and hostile packets ----------------------------------------------------------------

NAN = float("nan")
# the longest STEP of the served two-body simulation: 2 loads, no actuator, a force on each of
# its joints (the top's pivot: 3 rates, the puck's free joint: 6)
MAX_PAYLOAD = 16 + 52 * 2 + (4 + 8 * 3) + (4 + 8 * 6)
QPOS = (1.0, 0.0, 0.0, 0.0, 0.3, 0.05, 0.1, 1.0, 0.0, 0.0, 0.0)   # nq 11 = 4 + 7
HOSTILE = {
    # name: (bytes, expected error code, connection closed by the server afterwards: False,
    # True, or "truncated": after a further ERROR 5)
    "bad magic": (packet(STATE, magic=b"HTTP"), 1, True),
    "text": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, True),
    "unknown kind": (packet(9), 3, False),
    "reply kind as request": (packet(STATE | 0x80), 3, False),
    "error kind as request": (packet(0xFF), 3, False),
    # the payload would be discarded as it arrives, but it never does: ERROR 5 after
    # partial_timeout
    "huge length": (packet(STEP, b"", length=0xFFFFFFFF), 4, "truncated"),
    # the payload is discarded and the connection stays usable
    "length one over": (packet(STEP, bytes(MAX_PAYLOAD + 1)), 4, False),
    "length one over, payload later": (packet(STEP, b"", length=MAX_PAYLOAD + 1), 4,
                                       "payload later"),
    "short step": (packet(STEP, b"\x01\x00\x00\x00"), 6, False),
    "record missing": (packet(STEP, struct.pack("<IIII", 1, 2, 0, 0)
                              + struct.pack(RECORD, 0, *[0.0] * 6)), 6, False),
    "bytes after the records": (packet(STEP, step_payload(1, []) + b"\x00"), 6, False),
    "joint force cut": (packet(STEP, step_payload(1, [], joint_forces=[(0, 1.0, 2.0, 3.0)])[:-8]),
                        6, False),
    "joint forces missing": (packet(STEP, struct.pack("<IIII", 1, 0, 0, 3)), 6, False),
    "nan joint force": (packet(STEP, step_payload(1, [], joint_forces=[(0, 0, NAN, 0)])), 7,
                        False),
    "unknown joint": (packet(STEP, step_payload(1, [], joint_forces=[(2, 0.0)])), 7, False),
    "repeated joint": (packet(STEP, step_payload(1, [], joint_forces=[(0, 0, 0, 1.0),
                                                                      (0, 0, 0, 1.0)])), 7, False),
    # the bodies' kernels take no joint force (Simulation.set_joint_force refuses it)
    "joint force on free bodies": (packet(STEP, step_payload(1, [], joint_forces=[
        (1, 1, 0, 0, 0, 0, 0)])), 7, False),
    "control, no actuator": (packet(STEP, step_payload(1, [], controls=[(0, 1.0)])), 7, False),
    "set_state short": (packet(SET_STATE, b"\x0b\x00\x00\x00"), 6, False),
    "set_state values cut": (packet(SET_STATE, set_state_payload(QPOS)[:-8]), 6, False),
    "set_state partial qpos": (packet(SET_STATE, set_state_payload(QPOS[:4])), 7, False),
    "set_state nan": (packet(SET_STATE, set_state_payload(QPOS[:5] + (NAN,) + QPOS[6:])), 7,
                      False),
    "set_state zero quaternion": (packet(SET_STATE, set_state_payload((0.0,) * 4 + QPOS[4:])), 7,
                                  False),
    "set_state huge rate": (packet(SET_STATE, set_state_payload((), (1e308,) * 9)), 7, False),
    "record cut": (packet(STEP, step_payload(1, [(0, 1, 2, 3, 4, 5, 6)])[:-8]), 6, False),
    "state with payload": (packet(STATE, b"\x00" * 4), 6, False),
    "reset with payload": (packet(RESET, b"\x00" * 4), 6, False),
    "hello with payload": (packet(HELLO, b"\x00"), 6, False),
    "nan force": (packet(STEP, step_payload(1, [(0, NAN, 0, 0, 0, 0, 0)])), 7, False),
    "inf torque": (packet(STEP, step_payload(1, [(1, 0, 0, 0, 0, 0, math.inf)])), 7, False),
    "nan among good": (packet(STEP, step_payload(3, [(0, 1, 0, 0, 0, 0, 0),
                                                     (1, 0, 0, 0, 0, -NAN, 0)])), 7, False),
    "unknown body": (packet(STEP, step_payload(1, [(2, 1, 0, 0, 0, 0, 0)])), 7, False),
    "body -1": (packet(STEP, step_payload(1, [(0xFFFFFFFF, 1, 0, 0, 0, 0, 0)])), 7, False),
    "repeated body": (packet(STEP, step_payload(1, [(0, 1, 0, 0, 0, 0, 0),
                                                    (0, 1, 0, 0, 0, 0, 0)])), 7, False),
    "too many steps": (packet(STEP, step_payload(100_001, [])), 7, False),
    "flags": (packet(STATE, flags=1), 7, False),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_packet_gets_its_error_and_changes_nothing(served, name):
    server, sim = served
    data, code, closes = HOSTILE[name]
    with client_for(server) as client:
        client.step(3, forces={"top": ((0.1, 0, 0), (0, 0, 0))})
        before = client.state()
        sock = connect(server)
        # move this connection's own simulation first, so that "changes nothing" means more
        # than "still at the start"
        sock.sendall(packet(STEP, step_payload(2, [(1, 0, 0.2, 0, 0, 0, 0)]), seq=5))
        kind, seq, moved = read_reply(sock)
        assert (kind, seq) == (STEP | 0x80, 5)
        sock.sendall(data)
        kind, seq, payload = read_reply(sock)
        assert kind == 0xFF
        assert struct.unpack_from("<H", payload)[0] == code, payload[2:].decode()
        if closes == "payload later":  # the refused message's payload, after its reply
            sock.sendall(bytes(MAX_PAYLOAD + 1))
            closes = False
        if closes == "truncated":
            kind, seq, payload = read_reply(sock)
            assert (kind, seq, struct.unpack_from("<H", payload)[0]) == (0xFF, 0, 5)
            closes = True
        if not closes:
            assert seq == 7
            sock.sendall(packet(STATE, seq=8))  # the connection still works
            kind, seq, state = read_reply(sock)
            assert (kind, seq) == (STATE | 0x80, 8)
            assert state == moved  # and its simulation is where the refused request found it
        else:
            assert is_closed(sock)
        sock.close()
        after = client.state()
        for key in ("poses", "velocities"):
            assert after[key].tobytes() == before[key].tobytes()
        assert (after["t"], after["steps"]) == (before["t"], before["steps"])
        assert client.step(1)["steps"] == before["steps"] + 1  # still serving


@pytest.mark.parametrize("sent, how", [(5, "header"), (16 + 20, "payload")])
@pytest.mark.parametrize("ending", ["half-close", "stall"])
def test_truncated_message_is_reported_and_dropped(served, sent, how, ending):
    server, sim = served
    whole = packet(STEP, step_payload(1, [(0, 1, 0, 0, 0, 0, 0)]))
    with client_for(server) as client:
        before = client.state()
        sock = connect(server)
        sock.sendall(whole[:sent])
        if ending == "half-close":
            sock.shutdown(socket.SHUT_WR)
        # else the server gives up after its partial_timeout (0.3 s in this fixture)
        kind, _, payload = read_reply(sock)
        assert kind == 0xFF and struct.unpack_from("<H", payload)[0] == 5, how
        assert is_closed(sock)
        sock.close()
        assert client.state()["poses"].tobytes() == before["poses"].tobytes()


def test_a_stalled_client_does_not_block_the_others(served):
    server, _ = served
    server.partial_timeout = 30.0
    stalled = connect(server)
    stalled.sendall(packet(STEP, step_payload(1, []))[:10])
    with client_for(server) as client:
        assert client.step(2)["steps"] == 2   # answered although a message is half in
    stalled.close()


def test_failed_step_is_rolled_back_and_reported():
    # RK4 with a huge torque: some steps complete, then the state blows up
    sim = scenarios.build("gyro_top", integrator="nullspace_rk4")
    with Server(sim, port=0).start() as server, Client(*server.address) as client:
        client.step(5)
        before = client.state()
        with pytest.raises(ServerError) as err:
            client.step(100, forces={"top": ((0, 0, 0), (1e3, 0, 0))})
        assert err.value.code == 8
        after = client.state()
        assert after["steps"] == 5
        assert after["poses"].tobytes() == before["poses"].tobytes()
        ref = scenarios.build("gyro_top", integrator="nullspace_rk4")
        ref.step(5)
        assert_bits_equal(after, ref)
        ref.step(7)  # nothing of the failed request (its load, its steps) lives on
        assert_bits_equal(client.step(7), ref)


def test_random_garbage_never_kills_the_server_or_moves_it_on_an_error(served):
    """Seeded fuzz: valid messages with random bytes overwritten, each sent on a fresh
    connection between a STEP that moves that connection's simulation and a STATE (seq 99)
    that shows where it is after the broken message."""
    server, sim = served
    rnd = random.Random(2024)
    seeds = [packet(STATE), packet(HELLO), packet(RESET),
             packet(STEP, step_payload(0, [(0, 1, 2, 3, 0.1, 0.2, 0.3)])),
             packet(STEP, step_payload(2, [(1, 0.5, 0, 0, 0, 0, 0.01), (0, 0, 0, 0, 0, 0, 0)])),
             packet(STEP, step_payload(1, [], joint_forces=[(0, 0.0, 0.1, 0.0)])),
             packet(SET_STATE, set_state_payload(QPOS, (0.0,) * 9)),
             packet(SET_STATE, set_state_payload((), (0.1,) * 9))]
    prefix = packet(STEP, step_payload(2, [(1, 0, 0.2, 0, 0, 0, 0)]), seq=5)
    errors = successes = checked = 0
    with client_for(server) as client, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a wild load may need sub-steps
        for _ in range(200):
            data = bytearray(rnd.choice(seeds))
            for _ in range(rnd.randint(1, 4)):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
            if rnd.random() < 0.2:
                data = data[:rnd.randrange(1, len(data))]
            before = client.state()
            sock = connect(server)
            sock.sendall(prefix + bytes(data) + packet(STATE, seq=99))
            sock.shutdown(socket.SHUT_WR)
            replies = []
            while (r := read_reply(sock, version=None)) is not None:
                replies.append(r)
            sock.close()
            after = client.state()  # another connection: never touched by this one
            assert after["poses"].tobytes() == before["poses"].tobytes()
            assert after["steps"] == before["steps"]
            assert replies[0][:2] == (STEP | 0x80, 5)
            synced = replies[-1][:2] == (STATE | 0x80, 99)  # else the broken message took
            broken = replies[1:-1] if synced else replies[1:]  # the STATE in, or closed
            assert broken, "every message, even a broken one, gets an answer"
            if all(k == 0xFF for k, _, _ in broken):
                errors += 1
                if synced:  # refused: this connection's simulation must not have moved
                    assert replies[-1][2] == replies[0][2]
                    checked += 1
            else:
                successes += 1
        # the fuzz reached both paths, and the state check ran on the refusals that kept the
        # connection open
        assert errors > 50 and successes > 5 and checked > 20


# -- many clients: limits, timeouts, turns (no test measures time; TIMEOUT guards hangs) ----------

def error_code(reply):
    kind, seq, payload = reply
    assert kind == 0xFF, kind
    return seq, struct.unpack_from("<H", payload)[0]


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_connection_over_max_clients_gets_an_error_reply_not_a_reset(transport, tmp_path):
    with make_server(two_body_sim(), tmp_path, transport == "unix", max_clients=3).start() \
            as server:
        admitted = [client_for(server) for _ in range(3)]  # HELLO answered: all three are in
        extra = connect(server)
        assert error_code(read_reply(extra)) == (0, 10)  # seq 0: it answers no request
        assert is_closed(extra)
        extra.close()
        for _ in range(20):  # the server may close before or after the client's HELLO is out
            with pytest.raises(ServerError) as err:
                client_for(server)
            assert err.value.code == 10 and "max_clients" in str(err.value)
        for client in admitted:  # the refusals disturbed nobody
            assert client.step(1)["steps"] == 1
        for _ in range(20):  # a closed connection's place is free at once: no retry needed
            admitted.pop().close()
            admitted.append(client_for(server))
        assert admitted[-1].step(2)["steps"] == 2
        for client in admitted:
            client.close()
        assert server.counts["refused_full"] >= 21 and server.counts["accepted"] == 23


def test_200_idle_and_16_half_header_connections_leave_room_and_time_for_a_client():
    ref = two_body_sim()
    with Server(two_body_sim(), port=0, idle_timeout=600.0, partial_timeout=600.0).start() \
            as server:
        idle = [connect(server) for _ in range(200)]
        half = [connect(server) for _ in range(16)]
        for sock in half:
            sock.sendall(packet(STEP, step_payload(1, []))[:8])
        try:
            with client_for(server) as client:
                for k in range(5):
                    reply = client.step(k, forces={"top": ((0, 0, 0), (0, 0, 0.01))})
                    in_process_step(ref, k, {"top": ((0, 0, 0), (0, 0, 0.01))})
                    assert_bits_equal(reply, ref)
            assert server.counts["accepted"] == 217 and server.counts["refused_full"] == 0
        finally:
            for sock in idle + half:
                sock.close()


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_idle_connection_is_told_and_closed(transport, tmp_path):
    with make_server(two_body_sim(), tmp_path, transport == "unix", idle_timeout=0.3).start() \
            as server:
        silent = connect(server)
        assert error_code(read_reply(silent)) == (0, 11)
        assert is_closed(silent)
        silent.close()
        client = client_for(server)
        assert client.step(1)["steps"] == 1
        # its notice arrives while it waits; observed, not timed
        assert select.select([client._sock], [], [], TIMEOUT)[0]
        with pytest.raises(ServerError) as err:
            client.step(1)
        assert err.value.code == 11
        with pytest.raises(OSError):
            client.state()  # the client closed its end too
        assert server.counts["closed_idle"] == 2


def test_keepalive_answers_empty_and_restarts_the_idle_timeout(served):
    server, _ = served
    with client_for(server) as client:
        assert client.limits == {"max_payload": MAX_PAYLOAD, "max_clients": 256,
                                 "idle_timeout": 60.0, "partial_timeout": 0.3,
                                 "send_timeout": 1.0, "time_slice": 0.002,
                                 "session_grace": 120.0}
        moved = client.step(3)
        assert client.keepalive() is None
        assert client.state()["steps"] == moved["steps"]  # it changed nothing
        sock = connect(server)
        sock.sendall(packet(6, seq=9))
        assert read_reply(sock) == (6 | 0x80, 9, b"")
        sock.sendall(packet(6, b"x", seq=10))
        assert error_code(read_reply(sock)) == (10, 6)
        sock.close()


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_keepalives_keep_an_idle_connection_open(transport, tmp_path):
    """Counted, not timed: a connection whose only requests are KEEPALIVEs, sent every 20 ms,
    outlives three silent connections that the server closes for idleness (0.5 s)."""
    with make_server(two_body_sim(), tmp_path, transport == "unix", idle_timeout=0.5).start() \
            as server:
        with client_for(server) as client:
            moved = client.step(2)
            for _ in range(3):
                silent = connect(server)
                while not select.select([silent], [], [], 0.02)[0]:
                    client.keepalive()
                assert error_code(read_reply(silent)) == (0, 11)
                silent.close()
            client.keepalive()
            assert client.state()["steps"] == moved["steps"]
            assert server.counts["closed_idle"] == 3


def many_body_sim(n=40):
    """n free bodies: a STEP may carry n load records, so a message can be long."""
    m = Model()
    for i in range(n):
        m.add_body(f"b{i}", 1.0, (0.01, 0.02, 0.03))
    return Simulation(m, "nullspace_rk4", 1e-3)


def test_partial_timeout_counts_from_the_first_byte_not_the_last():
    """A message dripped a byte at a time, a third of partial_timeout apart, never leaves a
    gap as long as partial_timeout; the server must cut it off all the same, long before its
    last byte (1 + 2096 bytes, 0.1 s apart: 200 s)."""
    sim = many_body_sim()
    message = packet(STEP, step_payload(1, [(b, 1, 0, 0, 0, 0, 0) for b in range(sim.nb)]))
    with Server(sim, port=0, partial_timeout=0.3).start() as server:
        sock = connect(server)
        for i, byte in enumerate(message):
            if select.select([sock], [], [], 0.1)[0]:  # waits a third of partial_timeout
                break
            sock.sendall(message[i:i + 1])
        else:
            raise AssertionError("the whole message went in: the timer restarted on each byte")
        assert error_code(read_reply(sock)) == (0, 5)
        assert is_closed(sock)
        sock.close()
        assert server.counts["closed_partial"] == 1


def test_a_long_step_does_not_hold_up_another_clients_requests():
    """Order, not durations: client A's one STEP (2**32 - 1 steps, hours of work) is still
    unanswered after client B has had 20 of its own requests answered."""
    ref = two_body_sim()
    with Server(two_body_sim(), port=0, max_steps_per_request=2**32 - 1).start() as server:
        long = connect(server)
        long.sendall(packet(STEP, step_payload(2**32 - 1, [(0, 0, 0, 0, 0, 0, 0.01)]), seq=1))
        wait_until(lambda: server.counts["preempted"] >= 1)  # A's request is being stepped
        with client_for(server) as client:
            for k in range(20):
                reply = client.step(k % 4, forces={"puck": ((0.1, 0, 0), (0, 0, 0))})
                in_process_step(ref, k % 4, {"puck": ((0.1, 0, 0), (0, 0, 0))})
                assert_bits_equal(reply, ref)
        long.setblocking(False)
        with pytest.raises(BlockingIOError):
            long.recv(1)  # A's reply has not come: its request is still being served
        long.close()
        assert server.counts["preempted"] >= 2  # A was stepped in several turns


SLICED = [  # scenario or model, integrator, steps, load on body 0 (the chain's falls back)
    ("two_body", "energy_momentum", 300, (0.0, 0.0, 0.05)),
    ("two_body", "nullspace_rk4", 300, (0.0, 0.02, 0.0)),
    # (the chain at 200 N m: steps taken along the path of their solution in h, and sub-steps)
    ("chain", "energy_momentum", 200, (200.0, 0.0, 0.0)),
    ("gyro_top", "nullspace_rk4", 100, (1e3, 0.0, 0.0)),   # fails part-way
]


def sliced_sim(name, integrator):
    return (two_body_sim(integrator) if name == "two_body"
            else scenarios.build(name, integrator=integrator))


@pytest.mark.parametrize("name, integrator, n, torque", SLICED)
def test_a_step_in_one_step_slices_is_bit_identical_to_one_call(name, integrator, n, torque):
    """time_slice = 1 ns: every turn takes exactly one step, and two clients' STEPs alternate;
    each reply must still be exactly one uninterrupted ``sim.step(n)`` (or its failure)."""
    torques = {"first": torque, "second": tuple(-0.5 * c for c in torque)}
    refs, expect = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the chain's sub-step fallback
        for who, tau in torques.items():
            ref = refs[who] = sliced_sim(name, integrator)
            ref.step(3)
            ref.apply_torque(0, tau)
            try:
                ref.step(n)
                expect[who] = None
            except SimulationError as exc:
                expect[who] = f"SimulationError: {exc}"
                ref.clear_applied()  # what the server's rollback leaves: the state before
                ref.restore(sliced_sim(name, integrator).snapshot())
                ref.step(3)
            else:
                ref.clear_applied()
        if name == "chain":
            stats = refs["first"].solver_stats()  # the cases are exercised
            assert stats["fallback_steps"] > 0 and stats["path_steps"] > 0
        with Server(sliced_sim(name, integrator), port=0, time_slice=1e-9).start() as server:
            socks = {who: connect(server) for who in torques}
            for who, sock in socks.items():
                sock.sendall(packet(STEP, step_payload(3, []), seq=1))
                assert read_reply(sock)[:2] == (STEP | 0x80, 1)
            for who, sock in socks.items():  # both in, then both answered
                sock.sendall(packet(STEP, step_payload(n, [(0, 0, 0, 0, *torques[who])]), seq=2)
                             + packet(STATE, seq=3))
            for who, sock in socks.items():
                kind, seq, payload = read_reply(sock)
                if expect[who] is None:
                    assert (kind, seq) == (STEP | 0x80, 2)
                else:
                    assert (kind, seq) == (0xFF, 2)
                    assert struct.unpack_from("<H", payload)[0] == 8
                    assert payload[2:].decode() == expect[who]  # the same step failed
                kind, seq, payload = read_reply(sock)
                assert (kind, seq) == (STATE | 0x80, 3)
                t, steps, nb, *_ = struct.unpack_from(STATE_HEAD, payload)
                state = np.frombuffer(payload, "<f8", offset=32, count=13 * nb).reshape(-1, 13)
                assert_bits_equal({"t": t, "steps": steps, "poses": state[:, :7],
                                   "velocities": state[:, 7:]}, refs[who])
                sock.close()
        # every turn took one step: a STEP of n steps was interrupted n - 1 times
        if all(e is None for e in expect.values()):
            assert server.counts["preempted"] == 2 * (3 - 1) + 2 * (n - 1)


def test_twenty_concurrent_clients_are_all_served_bit_identically():
    failures = []

    def drive(i):
        try:
            rng = np.random.default_rng(100 + i)
            ref = two_body_sim()
            with client_for(server) as client:
                for r in range(30):
                    n = int(rng.integers(0, 200))
                    loads = {"top": ((0, 0, 0), 0.02 * rng.normal(size=3))} if r % 2 else {}
                    reply = client.step(n, forces=loads)
                    in_process_step(ref, n, loads)
                    assert_bits_equal(reply, ref)
                    if r == 20:
                        assert_bits_equal(client.reset(), two_body_sim())
                        ref = two_body_sim()
        except BaseException as exc:  # reported below, from the test's own thread
            failures.append((i, exc))

    with Server(two_body_sim(), port=0).start() as server:
        threads = [threading.Thread(target=drive, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT * 6)
        assert not any(t.is_alive() for t in threads)
        assert failures == []
        assert server.counts["accepted"] == 20 and server.counts["refused_full"] == 0


@pytest.mark.parametrize("field, value", [
    ("max_clients", 0), ("max_clients", 1.5), ("max_clients", True), ("max_clients", "8"),
    ("max_clients", 10**9), ("idle_timeout", 0), ("idle_timeout", -1.0),
    ("idle_timeout", float("nan")), ("idle_timeout", "60"), ("partial_timeout", math.inf),
    ("partial_timeout", 0.0), ("send_timeout", -0.5), ("send_timeout", None),
    ("time_slice", 0), ("time_slice", math.inf), ("max_steps_per_request", 0),
    ("max_steps_per_request", 2**32), ("max_steps_per_request", 2.5),
])
def test_server_limits_refuse_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"^{field}: "):
        Server(two_body_sim(), port=0, **{field: value})


def test_server_refuses_what_is_not_a_simulation():
    with pytest.raises(ValueError, match="^sim: "):
        Server("gyro_top", port=0)


def test_idle_timeout_may_be_infinite():
    with Server(two_body_sim(), port=0, idle_timeout=math.inf).start() as server, \
            client_for(server) as client:
        assert client.step(1)["steps"] == 1


# -- the client's own checks ----------------------------------------------------------------------

@pytest.mark.parametrize("call, field", [
    (lambda c: c.step(1, forces={"nobody": ((0, 0, 0), (0, 0, 0))}), "forces"),
    (lambda c: c.step(1, forces={5: ((0, 0, 0), (0, 0, 0))}), "forces"),
    (lambda c: c.step(1, forces={"top": ((0, 0), (0, 0, 0))}), "forces"),
    (lambda c: c.step(1, forces={"top": ((NAN, 0, 0), (0, 0, 0))}), "forces"),
    (lambda c: c.step(1, forces={"top": {"push": (1, 0, 0)}}), "forces"),
    (lambda c: c.step(1, forces={"top": ((1, 0, 0),), 0: ((1, 0, 0), (0, 0, 0))}), "forces"),
    (lambda c: c.step(1, forces={"top": ((1, 0, 0), (0, 0, 0)), 0: ((1, 0, 0), (0, 0, 0))}),
     "forces"),
    (lambda c: c.step(1, forces=[1, 2]), "forces"),
    (lambda c: c.step(-1), "n"),
    (lambda c: c.step(1.5), "n"),
    (lambda c: c.step(10**9), "n"),
])
def test_client_refuses_bad_arguments_before_sending(served, call, field):
    server, _ = served
    with client_for(server) as client:
        before = client.state()
        with pytest.raises(ValueError, match=f"^{field}"):
            call(client)
        assert client.state()["steps"] == before["steps"]  # and the connection is in sync


def test_stop_closes_the_port():
    server = Server(two_body_sim(), port=0).start()
    address = server.address
    with Client(*address) as client:
        client.step(1)
    server.stop()
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=TIMEOUT).close()


def flood_without_reading(server, sock):
    """Send ``sock``'s server 200 000 STATE requests and read none of the replies (28 MB,
    far beyond the socket buffers); stop when the server hangs up."""
    requests = packet(STATE) * 1000
    try:
        for _ in range(200):
            sock.sendall(requests)
    except OSError:
        pass  # the server hung up while we were still writing


def greedy_socket(server):
    sock = raw_socket(server)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(server.address)
    sock.settimeout(TIMEOUT)
    return sock


def wait_until(condition):
    """Poll ``condition`` until it holds; TIMEOUT only guards against a hang."""
    for _ in range(int(TIMEOUT / 0.01)):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached")


def test_a_client_that_never_reads_its_replies_is_disconnected(served):
    server, _ = served
    server.send_timeout = 0.2
    greedy = greedy_socket(server)
    flood_without_reading(server, greedy)
    # nothing is read from it before the server says it dropped it, so its replies stay stuck
    wait_until(lambda: server.counts["closed_send"] == 1)
    with client_for(server) as client:
        assert client.step(1)["steps"] == 1
    try:  # what the server managed to send, then its hang-up
        while greedy.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass
    greedy.close()
    assert server.counts["closed_send"] == 1 and server.counts["send_stalled"] >= 1


def test_a_client_that_stops_reading_does_not_stall_the_others(served):
    server, _ = served
    server.send_timeout = 600.0  # it stays connected, stuck, for all of this test
    greedy = greedy_socket(server)
    flooding = threading.Thread(target=flood_without_reading, args=(server, greedy))
    flooding.start()
    try:
        wait_until(lambda: server.counts["send_stalled"] >= 1)  # its replies no longer fit
        ref = two_body_sim()
        with client_for(server) as client:
            for k in range(20):
                reply = client.step(k % 3)
                ref.step(k % 3)
                assert_bits_equal(reply, ref)
        assert server.counts["closed_send"] == 0  # served while the greedy one was stuck
    finally:
        greedy.shutdown(socket.SHUT_RDWR)  # ends the flood's blocked sendall
        flooding.join(TIMEOUT)
        greedy.close()
    assert not flooding.is_alive()


@pytest.mark.parametrize("spin", [0.0, 0.05])
def test_client_times_out_on_a_silent_server_and_closes(spin):
    listener = socket.create_server(("127.0.0.1", 0))
    hello = (struct.pack("<IdIIIIII", 1, 0.01, 10, 0, 0, 0, 0, 0) + b"".join(
        struct.pack("<H", len(s)) + s for s in (b"energy_momentum", b"", b"body")))

    def answer_hello_then_nothing():
        conn, _ = listener.accept()
        struct.unpack(HEADER, conn.recv(16))
        conn.sendall(packet(HELLO | 0x80, hello, seq=1))
        conn.recv(1024)  # the STEP request, never answered
        done.wait(TIMEOUT)
        conn.close()

    done = threading.Event()
    thread = threading.Thread(target=answer_hello_then_nothing)
    thread.start()
    try:
        client = Client(*listener.getsockname()[:2], timeout=0.2, spin=spin)
        assert client.names == ["body"] and client.max_steps_per_request == 10
        with pytest.raises(TimeoutError):
            client.step(1)
        with pytest.raises(OSError):
            client.state()  # closed: a late reply must not be taken for this one
    finally:
        done.set()
        thread.join()
        listener.close()


# -- the benchmark's side-by-side harness (no timing is asserted) ---------------------------------

def test_lockstep_comparison_runs_its_rows_and_leaves_nothing_behind(tmp_path, monkeypatch):
    import os
    import tempfile

    from rtrigid.tools import realtime_bench

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    configs = [c for c in realtime_bench.LOCKSTEP_CONFIGS
               if c[0] in ("echo, unix", "tcp", "unix, spin, cores 1/0")]
    if len(os.sched_getaffinity(0)) < 2:
        configs = configs[:2]
    result = realtime_bench.lockstep_comparison(0.04, priority=0, configs=configs, block=20)
    assert list(result) == [c[0] for c in configs]
    for row in result.values():
        assert row["round_trips"] == 40
        assert 0 < row["rtt_us_p50"] <= row["rtt_us_p99"] <= row["rtt_us_max"]
    assert list(tmp_path.iterdir()) == []  # socket files and their directory are gone


def test_fairness_measurement_runs_and_leaves_nothing_behind(tmp_path):
    """python -m studies.hil_fairness, scaled down: what it counts, not its times."""
    from studies import hil_fairness

    out = tmp_path / "fair.json"
    assert hil_fairness.main(["--round-trips", "5", "--requests", "3", "--steps", "2000",
                              "--chain-steps", "20", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["crowd"]["idle_connections_open_at_end"] == 200
    assert r["crowd"]["connect_hello_step1"]["n"] == 20
    for key in ("long_gyro_top", "long_chain_fallback"):
        assert r[key]["rtt_beside_long_steps"]["n"] == 5 and r[key]["long_requests_done"] >= 1
    t = r["twenty"]
    assert t["clients_all_served"] == t["clients_bit_identical"] == 20 and t["errors"] == []
