"""The C reference client (``rtrigid/io/hil/c/``): compiled with ``-std=c99 -Wall -Wextra
-Werror``, its examples drive a real server on loopback, and its qpos/qvel are bit-identical
to the same calls made in process; its sessions resume bit for bit, observe every state in
order, and a wrong token is refused without changing anything."""
import contextlib
import importlib.resources
import os
import re
import select
import socket
import struct
import subprocess

import pytest

from rtrigid import scenarios
from rtrigid.io.hil import Client, Server

STEPS = 1000
TIMEOUT = 300.0  # guards against a hang; no test measures speed
FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def sources():
    folder = importlib.resources.files("rtrigid.io.hil") / "c"
    return {name: folder / name for name in ("rtrigid_hil.h", "rtrigid_hil.c", "example.c",
                                             "example_stream.c", "example_session.c")}


def build(require, tmp_path, optimise, example="example"):
    require("cc")
    files = sources()
    for name, path in files.items():
        (tmp_path / name).write_bytes(path.read_bytes())
    out = tmp_path / example
    done = subprocess.run(["cc", *FLAGS, optimise, f"{example}.c", "rtrigid_hil.c", "-o",
                           str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return out


def hex_bits(values):
    return [format(struct.unpack("<Q", struct.pack("<d", float(x)))[0], "016x") for x in values]


def in_process(steps, sim=None, scale=1.0):
    """example.c's calls (``example HOST PORT steps scale``) made on a Simulation (``arm`` by
    default): its lines, in its format."""
    sim = scenarios.build("arm") if sim is None else sim
    body = sim.nb - 1
    joint = max(j for j, name in enumerate(sim.joint_names) if len(sim.joint_velocity(name)) == 1)
    lines = []
    for i in range(steps):
        for k in range(len(sim.model.actuators)):
            sim.set_control(k, scale * (0.5 - 0.001 * (i % 100) if k == 0
                                        else -0.8 + 0.002 * (i % 50)))
        sim.set_joint_force(joint, 0.05 if i % 3 == 0 else -0.02)
        sim.apply_force(body, (0.01 * (i % 7) - 0.03, 0.0, 0.0))
        sim.apply_torque(body, (0.0, 0.001 * (i % 5), 0.0))
        sim.step(1)
        sim.clear_applied(body)  # a STEP's loads act for its steps only
        lines.append(" ".join([str(sim.steps_taken), *hex_bits(sim.qpos()),
                               *hex_bits(sim.qvel())]))
    return lines


def test_the_c_sources_ship_inside_the_package():
    for name, path in sources().items():
        assert path.is_file(), name
    assert b"#include <" in sources()["rtrigid_hil.c"].read_bytes()


@pytest.mark.parametrize("optimise", ["-O0", "-O2"])
def test_c_client_drives_the_arm_bit_identically_to_in_process(require, tmp_path, optimise):
    program = build(require, tmp_path, optimise)
    with Server(scenarios.build("arm"), port=0, scenario="arm").start() as server:
        host, port = server.address
        done = subprocess.run([str(program), host, str(port), str(STEPS)], capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert server.counts["requests"] == STEPS + 2  # HELLO, the steps, KEEPALIVE
    assert done.returncode == 0, done.stderr
    assert "arm (energy_momentum" in done.stderr and "max_payload 168" in done.stderr
    got = done.stdout.splitlines()
    want = in_process(STEPS)
    assert len(got) == STEPS
    first_bad = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
    assert first_bad is None, f"step {first_bad}: C {got[first_bad]!r}, in process " \
                              f"{want[first_bad]!r}"


def test_c_client_drives_the_a1_on_the_floor_bit_identically_to_in_process(require, tmp_path):
    """The Unitree A1 from pybullet's URDF, its base free on the floor with its collision
    geometry, 12 position servos: 1000 lock-steps from C with controls, a load and a joint
    force give the qpos/qvel of the same calls in process, bit for bit."""
    pytest.importorskip("pybullet_data", reason="the robot files come with pybullet_data")
    from rtrigid.demos.robots import a1_standing

    program = build(require, tmp_path, "-O2")
    with Server(a1_standing(), port=0, scenario="a1").start() as server:
        host, port = server.address
        done = subprocess.run([str(program), host, str(port), str(STEPS), "0.05"],
                              capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "a1 (nullspace_rk4, dt=0.001): 13 bodies, 13 joints, 12 actuators" in done.stderr
    sim = a1_standing()
    got, want = done.stdout.splitlines(), in_process(STEPS, sim, 0.05)
    assert len(got) == STEPS and got == want
    assert sim.contacts() and 0.25 < sim.qpos()[14] < 0.45  # on its feet, on the floor


def test_c_client_reports_the_servers_error_code(require, tmp_path):
    """A full server's ERROR 10 (seq 0, sent before it hangs up) reaches the C caller as 10."""
    program = build(require, tmp_path, "-O0")
    with Server(scenarios.build("arm"), port=0, scenario="arm", max_clients=1).start() as server:
        host, port = server.address
        with Client(host, port, timeout=TIMEOUT):  # takes the only slot
            done = subprocess.run([str(program), host, str(port), "1"], capture_output=True,
                                  text=True, timeout=TIMEOUT)
    assert done.returncode == 1 and done.stdout == ""
    assert "connect: error 10" in done.stderr, done.stderr


def stream_command(sim, seq):
    """example_stream.c's command ``seq`` made on a Simulation (its loads replace the last)."""
    body, joint = sim.nb - 1, len(sim.joint_names) - 1
    for k in range(len(sim.model.actuators)):
        sim.set_control(k, 0.5 - 0.001 * (seq % 100) if k == 0 else -0.8 + 0.002 * (seq % 50))
    sim.clear_applied(body)
    sim.apply_force(body, (0.01 * (seq % 7) - 0.03, 0.0, 0.0))
    sim.set_joint_force(joint, 0.05 if seq % 3 == 0 else -0.02)


def test_c_stream_client_gets_the_in_process_trajectory(require, tmp_path):
    """The C client streams commands to a paced server (200 Hz, 5 steps a tick); which tick
    applies which command depends on timing, but every state says which command is in force
    and how many steps were run, so the same commands replayed in process give its qpos and
    qvel bit for bit."""
    from rtrigid.io.hil.stream import StreamServer

    program = build(require, tmp_path, "-O2", "example_stream")
    with StreamServer(scenarios.build("arm"), port=0, scenario="arm", rate=200.0) as server:
        server.start()
        host, port = server.address
        done = subprocess.run([str(program), host, str(port), "200"], capture_output=True,
                              text=True, timeout=TIMEOUT)
        server.stop()
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    assert "200 Hz, a state every 1 ticks" in done.stderr and "max_payload 164" in done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert len(lines) == 200
    ticks = [int(line[0]) for line in lines]
    assert ticks == sorted(set(ticks)) and stats["dropped_invalid"] == 0
    ref = scenarios.build("arm")
    in_force = 0
    for number, (tick, seq, steps, *values) in enumerate(lines):
        ref.step(int(steps) - ref.steps_taken)
        assert int(steps) == 5 * int(tick)
        assert values == hex_bits(ref.qpos()) + hex_bits(ref.qvel()), f"state {number}"
        if int(seq) != in_force:
            in_force = int(seq)
            stream_command(ref, in_force)


# -- sessions (example_session.c) ------------------------------------------------------------
E_SESSION = 12


def line(state):
    """A state as example.c prints it: the step count, then qpos and qvel in hex."""
    return " ".join([str(state["steps"]), *hex_bits(state["qpos"]), *hex_bits(state["qvel"])])


def run(program, *args):
    done = subprocess.run([str(program), *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT)
    return done.returncode, done.stdout.splitlines(), done.stderr


@contextlib.contextmanager
def running(program, *args):
    """The program started, its output piped; killed on the way out if it has not ended."""
    proc = subprocess.Popen([str(program), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        if not proc.stdout.closed:  # communicate() closes the pipes it has read to the end
            proc.communicate()


def first_line(proc):
    """The program's first line of output, read byte by byte from its pipe (nothing read
    beyond it is kept in a buffer that communicate() would not see); waiting for it is a hang
    guard, not a timing."""
    fd, text = proc.stdout.fileno(), b""
    while not text.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], TIMEOUT)
        assert ready, "no output"
        byte = os.read(fd, 1)
        assert byte, "the program ended"
        text += byte
    return text.decode().rstrip("\n")


@pytest.mark.parametrize("optimise", ["-O0", "-O2"])
def test_c_client_resumes_its_session_bit_identically_to_in_process(require, tmp_path,
                                                                      optimise):
    """example_session.c steps the arm as example.c does, closes its connection after 50 steps,
    connects again and RESUMEs with the token HELLO gave, and steps to 120; a second process
    resumes the same session with the token the first printed and steps to 200.  Every state,
    the RESUME replies' too, equals the in-process run's bit for bit: an unbroken run's."""
    program = build(require, tmp_path, optimise, "example_session")
    want = in_process(200)
    with Server(scenarios.build("arm"), port=0, scenario="arm",
                session_grace=TIMEOUT).start() as server:
        host, port = server.address
        code, first, err = run(program, host, port, 120, 50)
        assert code == 0, err
        token = re.search(r"^session ([0-9a-f]{32}) \(waits 300 s", err, re.M)
        assert token, err
        code, second, err = run(program, host, port, "resume", token[1], 200)
        assert code == 0, err
        assert server.counts["resumed"] == 2
    assert first[:50] == want[:50]
    assert first[50] == "resumed " + want[49]
    assert first[51:] == want[50:120]
    assert second[0] == "resumed " + want[119]
    assert second[1:] == want[120:]


def test_c_observer_receives_every_state_of_the_session_in_order(require, tmp_path):
    """A Python client steps a session, a C observer (example_session.c observe) watches it:
    one PUSH per state the stepping client receives (STEP, STATE, SET_STATE, RESET replies),
    with the seq of its request and the same state bit for bit.  The stepping client then
    closes and a C client resumes the session from another process: the observer goes on
    with the RESUME reply and the C client's steps (its seqs: HELLO 1, RESUME 2, ...)."""
    program = build(require, tmp_path, "-O0", "example_session")
    with Server(scenarios.build("arm"), port=0, scenario="arm",
                session_grace=TIMEOUT).start() as server:
        host, port = server.address
        with Client(host, port, timeout=TIMEOUT) as owner:
            start = owner.step(3, controls=[0.2, -0.3])
            token = owner.session.hex()
            with running(program, host, port, "observe", token, 28) as observer:
                assert first_line(observer) == "now " + line(start)
                want = []
                seqs = iter(range(3, 100))  # the Python client's: HELLO 1, the first step 2

                def push(state):
                    want.append(f"push {next(seqs)} {line(state)}")
                    return state

                for k in range(8):
                    push(owner.step(2 + k, forces={1: ((0.1 * k, 0.0, 0.0), (0.0, 0.0, 0.0))},
                                    controls=[0.1 * k, -0.5], joint_forces={1: 0.01 * k}))
                push(owner.state())
                push(owner.set_state(qpos=[0.3, -0.1]))
                push(owner.reset())
                for k in range(4):
                    last = push(owner.step(1, controls=[0.4, -0.2]))
                owner.close()  # the session waits for its token
                code, resumed, err = run(program, host, port, "resume", token, 16)
                assert code == 0, err
                assert resumed[0] == "resumed " + line(last)  # where the Python client stopped
                want.append("push 2 " + resumed[0].removeprefix("resumed "))
                want += [f"push {3 + i} {text}" for i, text in enumerate(resumed[1:])]
                assert len(want) == 28
                out, err = observer.communicate(timeout=TIMEOUT)
    assert observer.returncode == 0, err
    assert out.splitlines() == want


def test_c_observer_is_told_when_the_session_expires(require, tmp_path):
    """The stepping client closes and does not come back: once the grace period is over the
    observer's rth_observe_next returns ERROR 12 (seq 0) with the server's message, after every
    state of the session."""
    program = build(require, tmp_path, "-O0", "example_session")
    with Server(scenarios.build("arm"), port=0, scenario="arm",
                session_grace=0.2).start() as server:
        host, port = server.address
        with Client(host, port, timeout=TIMEOUT) as owner:
            now = owner.step(1)
            with running(program, host, port, "observe", owner.session.hex()) as observer:
                assert first_line(observer) == "now " + line(now)
                want = []
                for seq in (3, 4, 5):  # its requests' seqs: HELLO 1, the first step 2
                    state = owner.step(2)
                    want.append(f"push {seq} {line(state)}")
                owner.close()
                out, err = observer.communicate(timeout=TIMEOUT)
        assert server.counts["expired"] == 1
    assert observer.returncode == 0, err
    assert out.splitlines() == want
    assert f"observe: error {E_SESSION} the session observed ended" in err, err


def test_c_client_with_a_wrong_token_gets_error_12_and_changes_nothing(require, tmp_path):
    """rth_resume of a token no session has, or of a live session's, and rth_observe of a
    token no session has: ERROR 12.  The refused resumer steps a new simulation of its own
    from the start; the live session and a waiting one go on unchanged."""
    program = build(require, tmp_path, "-O0", "example_session")
    want = in_process(40)
    unknown = "00" * 16
    with Server(scenarios.build("arm"), port=0, scenario="arm",
                session_grace=TIMEOUT).start() as server:
        host, port = server.address
        code, waiting, err = run(program, host, port, 20, 20)  # its session waits at step 20
        assert code == 0, err
        token = re.search(r"^session ([0-9a-f]{32}) ", err, re.M)[1]
        with Client(host, port, timeout=TIMEOUT) as live:
            before = line(live.step(7, controls=[0.3, -0.6]))
            for bad in (unknown, live.session.hex()):
                code, lines, err = run(program, host, port, "resume", bad, 5)
                assert code == 0, err
                assert f"resume: error {E_SESSION} no session waits for this token" in err, err
                assert lines == want[:5]  # a new simulation of its own, from the start
            code, lines, err = run(program, host, port, "observe", unknown)
            assert code == 1 and lines == [], lines
            assert f"observe: error {E_SESSION} no session has this token" in err, err
            assert line(live.state()) == before
        code, lines, err = run(program, host, port, "resume", token, 40)
        assert code == 0, err
        assert server.counts["resumed"] == 2  # example_session's own resume, and this one
    assert waiting == want[:20] + ["resumed " + want[19]]
    assert lines == ["resumed " + want[19]] + want[20:40]


def hello_payload(server):
    """A real HELLO reply's payload, read over a raw socket."""
    with socket.create_connection(server.address, timeout=TIMEOUT) as sock:
        sock.sendall(b"RTRG" + struct.pack("<BBHII", 2, 1, 0, 1, 0))
        data = b""
        while len(data) < 16 or len(data) < 16 + struct.unpack_from("<I", data, 12)[0]:
            chunk = sock.recv(1 << 16)
            assert chunk, "the server closed"
            data += chunk
    return data[16:]


@pytest.mark.parametrize("tail", ["no session block", "half a block", "bytes after it"])
def test_c_client_reads_the_session_block_only_when_it_is_whole(require, tmp_path, tail):
    """A HELLO without the session block (an older server), with a block cut short, or with
    bytes after it (a newer server's additions): has_session is 0 unless the 24 bytes are
    there; what follows them is ignored.  The fake server answers HELLO, then hangs up."""
    program = build(require, tmp_path, "-O0", "example_session")
    with Server(scenarios.build("arm"), port=0, scenario="arm",
                session_grace=30.0).start() as server:
        payload = hello_payload(server)
    token = payload[-24:-8]
    payload = {"no session block": payload[:-24], "half a block": payload[:-12],
               "bytes after it": payload + bytes(range(1, 40))}[tail]
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(TIMEOUT)
        with running(program, "127.0.0.1", listener.getsockname()[1], 4) as proc:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(TIMEOUT)
                head = b""
                while len(head) < 16:
                    chunk = conn.recv(16 - len(head))
                    assert chunk, "the client closed"
                    head += chunk
                assert head[4:6] == bytes([2, 1])  # HELLO
                conn.sendall(b"RTRG" + struct.pack("<BBHII", 2, 0x81, 0, *struct.unpack_from(
                    "<I", head, 8), len(payload)) + payload)
            out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1 and out == ""
    if tail == "bytes after it":
        assert f"session {token.hex()} (waits 30 s after the connection closes)" in err, err
        assert "step 0: error -" in err  # then the fake server has hung up
    else:
        assert "this server has no sessions" in err, err
