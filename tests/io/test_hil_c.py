"""The C reference client (``rtrigid/io/hil/c/``): compiled with ``-std=c99 -Wall -Wextra
-Werror``, its example drives a real server on loopback, and its qpos/qvel are bit-identical
to the same calls made in process."""
import importlib.resources
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
                                             "example_stream.c")}


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


def in_process(steps):
    """example.c's calls made on a Simulation: its lines, in its format."""
    sim = scenarios.build("arm")
    body, joint = sim.nb - 1, len(sim.joint_names) - 1
    lines = []
    for i in range(steps):
        for k in range(len(sim.model.actuators)):
            sim.set_control(k, 0.5 - 0.001 * (i % 100) if k == 0 else -0.8 + 0.002 * (i % 50))
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
