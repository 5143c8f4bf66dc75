"""Streaming over UDP: a real StreamServer and StreamClient on loopback sockets.

Most tests move the server's clock by hand (ManualClock: ``server.run(ticks=n)`` runs n ticks
at once in the test's thread), so what each tick reads and applies is fixed: a datagram sent
on loopback is in the receiver's queue when ``send`` returns.  The paced test runs on the wall
clock and asserts only what timing cannot change: every command sent is accounted for, every
state sent is received, in order.
"""
import random
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from rtrigid import cli, scenarios
from rtrigid.io.hil import ServerError
from rtrigid.io.hil.stream import StreamServer
from rtrigid.io.hil.stream_client import StreamClient
from rtrigid.io.realtime import ManualClock

TIMEOUT = 10.0  # guards against a hang; no test measures speed


def bits(values):
    return np.asarray(values, dtype=np.float64).view(np.uint64)


def connect(server, **kw):
    """A StreamClient of a hand-clocked server: its DESCRIBE is answered by ticks run here
    until the client has its reply (how many is not fixed: tests look at the states' own
    tick and step counts)."""
    box = {}

    def make():
        try:
            box["client"] = StreamClient(*server.address, timeout=TIMEOUT, **kw)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=make)
    thread.start()
    while thread.is_alive():
        server.run(ticks=1)
        thread.join(0.001)
    if "error" in box:
        raise box["error"]
    return box["client"]


def drain(client):
    """The states already received."""
    out = []
    while True:
        try:
            out.append(client.next_state(timeout=0.05))
        except TimeoutError:
            return out


@pytest.fixture
def arm_server():
    servers = []

    def make(**kw):
        kw.setdefault("clock", ManualClock())
        server = StreamServer(scenarios.build("arm"), port=0, scenario="arm", **kw)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def test_describe_tells_the_simulation_and_the_stream(arm_server):
    server = arm_server(every=3, watchdog=0.25, on_silence="zero")
    with connect(server) as client:
        assert client.scenario == "arm" and client.names == ["link0", "link1"]
        assert client.actuator_names == ["joint0", "joint1"] and (client.nq, client.nv) == (2, 2)
        assert (client.rate, client.every, client.watchdog, client.on_silence) == (
            1000.0, 3, 0.25, "zero")
        assert client.max_payload == server.max_payload == 164


def test_streamed_commands_give_the_in_process_trajectory_bit_for_bit(arm_server):
    server = arm_server()
    with connect(server) as client:
        plan = {0: {"controls": {"joint0": 0.4}},
                3: {"controls": [0.1, -0.3], "joint_forces": {"joint1": 0.05}},
                7: {"forces": {"link1": ((0.5, 0.0, 0.0), (0.0, 0.0, 0.01))}},
                9: {}}  # a command without loads takes the previous command's loads off
        states = []
        for k in range(12):
            if k in plan:
                client.command(**plan[k])
            server.run(ticks=1)
            states.append(client.next_state())
        ref = scenarios.build("arm")
        first = states[0]["steps"]  # ticks the DESCRIBE took, with the initial controls
        for _ in range(first):
            ref.step(1)
        for k, state in enumerate(states):
            assert state["steps"] == first + k and state["tick"] == first + k
            assert (bits(state["qpos"]) == bits(ref.qpos())).all(), k
            assert (bits(state["qvel"]) == bits(ref.qvel())).all(), k
            assert state["command_seq"] == sum(1 for j in plan if j <= k)
            command = plan.get(k)
            if command is not None:
                for b in range(ref.nb):
                    ref.clear_applied(b)
                controls = command.get("controls")
                if isinstance(controls, dict):
                    for a, u in controls.items():
                        ref.set_control(a, u)
                elif controls is not None:
                    ref.set_controls(controls)
                for j, f in command.get("joint_forces", {}).items():
                    ref.set_joint_force(j, f)
                for b, (f, tau) in command.get("forces", {}).items():
                    ref.apply_force(b, f)
                    ref.apply_torque(b, tau)
            ref.step(1)


def test_every_command_is_accounted_for_with_drops_and_reordering(arm_server):
    """Commands sent as a lossy network would deliver them: some never sent, some swapped with
    the next, several per tick or none; the counts match the sender's own bookkeeping."""
    server = arm_server()
    rng = random.Random(7)
    with connect(server) as client:
        before = server.stats()
        sent, lost, seq = [], 0, 1  # sequence numbers in the order sent
        while seq <= 1200:
            batch = []
            for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):  # datagrams before this tick
                r = rng.random()
                if seq > 1200:
                    break
                if r < 0.01:
                    lost += 1
                    seq += 1
                elif r < 0.02 and seq < 1200:
                    batch += [seq + 1, seq]
                    seq += 2
                else:
                    batch.append(seq)
                    seq += 1
            for k in batch:
                client.send(client.packet(k, {"joint0": 0.001 * k}))
            sent += batch
            server.run(ticks=1)
        server.run(ticks=1)
        # a late copy of an old command arrives after newer ones were applied: stale
        client.send(client.packet(sent[10], {"joint0": 0.0}))
        sent.append(sent[10])
        server.run(ticks=1)
        after = server.stats()
        got = {k: after[k] - before[k] for k in ("commands_applied", "commands_superseded",
                                                 "dropped_stale", "dropped_reordered",
                                                 "dropped_invalid")}
        assert lost > 0 and got["dropped_reordered"] > 0 and got["dropped_stale"] >= 1
        assert got["dropped_invalid"] == 0
        assert (got["commands_applied"] + got["commands_superseded"] + got["dropped_stale"]
                + got["dropped_reordered"]) == len(sent)
        states = drain(client)
        assert [s["tick"] for s in states] == sorted(s["tick"] for s in states)
        assert all(b["command_seq"] >= a["command_seq"] for a, b in zip(states, states[1:]))
        assert states[-1]["command_seq"] == max(sent)
        assert server.sim.controls()[0] == 0.001 * max(sent)


def test_states_every_kth_tick(arm_server):
    server = arm_server(every=4)
    with connect(server) as client:
        drain(client)
        client.command({"joint0": 0.2})
        server.run(ticks=20)
        ticks = [s["tick"] for s in drain(client)]
        assert len(ticks) == 5 and all(t % 4 == 0 for t in ticks)
        assert np.all(np.diff(ticks) == 4)


def test_the_watchdog_zeroes_the_commands_after_silence(arm_server):
    server = arm_server(watchdog=0.05, on_silence="zero")
    with connect(server) as client:
        client.command({"joint0": 0.7, "joint1": -0.2}, joint_forces={"joint1": 0.3},
                       forces={"link1": ((1.0, 0.0, 0.0), (0.0, 0.0, 0.0))})
        server.run(ticks=50)  # 50 ms after the command was applied: not yet
        assert not drain(client)[-1]["watchdog"]
        sim = server.sim
        assert sim.controls().tolist() == [0.7, -0.2]
        server.run(ticks=2)
        states = drain(client)
        assert states[-1]["watchdog"] and server.stats()["watchdog_trips"] == 1
        assert sim.controls().tolist() == [0.0, 0.0]
        assert sim.joint_force("joint1").tolist() == [0.0]
        assert all(np.all(a == 0) for a in sim.applied("link1"))
        client.command({"joint0": 0.1})  # the next command clears it
        server.run(ticks=2)
        assert not drain(client)[-1]["watchdog"] and sim.controls().tolist() == [0.1, 0.0]


def test_the_watchdog_holds_by_default(arm_server):
    server = arm_server(watchdog=0.01)
    with connect(server) as client:
        client.command({"joint0": 0.7})
        server.run(ticks=30)
        assert drain(client)[-1]["watchdog"] and server.sim.controls().tolist()[0] == 0.7


def test_refused_datagrams_change_nothing_and_get_an_error(arm_server):
    server = arm_server()
    with connect(server) as client:
        client.command({"joint0": 0.3})
        server.run(ticks=1)
        drain(client)
        client.send(b"RTRU\x01\x01\x00\x00" + struct.pack("<II", 99, 12) + struct.pack(
            "<III", 0, 1, 0))  # a control counted, none sent
        server.run(ticks=1)
        with pytest.raises(ServerError) as err:
            client.next_state()
        assert err.value.code == 6 and "COMMAND" in str(err.value)
        assert server.sim.controls().tolist()[0] == 0.3
        assert server.stats()["dropped_invalid"] == 1


def test_stats_over_the_wire_match_the_server(arm_server):
    server = arm_server()
    with connect(server) as client:
        client.command({"joint0": 0.3})
        server.run(ticks=1)  # a STATS read in the same tick would be answered before it
        box = {}
        thread = threading.Thread(target=lambda: box.setdefault("stats", client.stats()))
        thread.start()
        while thread.is_alive():
            server.run(ticks=1)
            thread.join(0.001)
        stats = box["stats"]
        assert stats["commands_applied"] == 1 and stats["late_ticks"] == 0
        assert stats["worst_lateness_us"] == 0.0 and set(stats) <= set(server.stats())


def test_bad_arguments_name_the_field():
    sim = scenarios.build("arm")
    for kw, field in (({"every": 0}, "every"), ({"watchdog": -1.0}, "watchdog"),
                      ({"on_silence": "drop"}, "on_silence"), ({"rate": 0.0}, "rate"),
                      ({"max_packets_per_tick": 0}, "max_packets_per_tick")):
        with pytest.raises(ValueError, match=field):
            StreamServer(sim, port=0, **kw)
    with pytest.raises(ValueError, match="sim"):
        StreamServer("arm")


def test_client_refuses_bad_commands(arm_server):
    server = arm_server()
    with connect(server) as client:
        with pytest.raises(ValueError, match="seq"):
            client.packet(-1)
        with pytest.raises(ValueError, match="controls"):
            client.command({"shoulder": 1.0})
        with pytest.raises(ValueError, match="forces"):
            client.command(forces={"link9": ((0, 0, 0), (0, 0, 0))})


def _accounted(stats):
    """The commands a stream server has read: applied, superseded, or dropped as stale or
    reordered."""
    return (stats["commands_applied"] + stats["commands_superseded"] + stats["dropped_stale"]
            + stats["dropped_reordered"])


def test_a_paced_stream_accounts_for_every_command_and_state():
    """1 kHz on the wall clock for about a second, the client answering each state with a
    command, 1 % of them never sent and 1 % swapped with the next: whatever the machine's
    load, every command sent is applied, superseded or dropped as stale or reordered, and
    every state the server sent arrives, in order."""
    rng = random.Random(11)
    with StreamServer(scenarios.build("arm"), port=0, scenario="arm", rate=1000.0) as server:
        begun = time.perf_counter_ns()
        server.start()
        with StreamClient(*server.address, timeout=TIMEOUT, timestamps=True) as client:
            client.subscribe()  # the states come from the next tick on
            states, sent, held = [], 0, None
            while len(states) < 1000:
                state = client.next_state()
                assert begun < state["received_ns"] <= time.perf_counter_ns()
                states.append(state)
                seq = client.seq + 1
                client.seq = seq
                packet = client.packet(seq, {"joint0": 0.3 * np.sin(state["t"])})
                r = rng.random()
                if r < 0.01:
                    continue  # lost
                if r < 0.02 and held is None:
                    held = packet  # sent after the next one
                    continue
                client.send(packet)
                sent += 1
                if held is not None:
                    client.send(held)
                    sent += 1
                    held = None
            # the last commands reach the server at its next ticks: stop once it has read
            # every one (or the guard runs out, and the count below tells)
            guard = time.monotonic() + TIMEOUT
            while _accounted(server.stats()) < sent and time.monotonic() < guard:
                time.sleep(0.005)
            server.stop()
            states += drain(client)
        stats = server.stats()
    assert _accounted(stats) == sent
    assert stats["dropped_invalid"] == 0 and len(states) == stats["states_sent"]
    ticks = [s["tick"] for s in states]
    assert ticks == sorted(set(ticks))
    received = [s["received_ns"] for s in states]
    assert received == sorted(received)  # the kernel's receive times, in arrival order
    # a state's steps are the scheduled steps of its tick: one per tick at 1 kHz, dt 1 ms
    assert all(s["steps"] == s["tick"] for s in states)


def test_cli_serve_udp_streams_until_sigterm():
    proc = subprocess.Popen([sys.executable, "-m", "rtrigid.cli", "serve", "arm", "--udp", "0",
                             "--rate", "500", "--every", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "streaming at 500 Hz on udp" in line, proc.stderr.read() if proc.poll() else line
        host, port = line.rsplit(" ", 1)[1].split(":")
        with StreamClient(host, int(port), timeout=TIMEOUT) as client:
            assert (client.rate, client.every) == (500.0, 2)
            client.command({"joint0": 0.2})
            state = client.next_state()
            # a state carries the first tick of its tick's call: an even one, unless a late
            # tick folded the next (even) one in -- as on a loaded machine
            assert state["steps"] == state["tick"] * 2
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "commands_applied" in out and "late_ticks" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("argv, field", [
    (["--udp", "0", "--every", "0"], "every"),
    (["--udp", "0", "--rate", "-5"], "rate"),
    (["--udp", "70000"], "udp"),
    (["--udp", "0", "--watchdog", "0"], "watchdog"),
    (["--rate", "100"], "rate"),
    (["--udp", "0", "--unix", "/tmp/x.sock"], "udp"),
])
def test_cli_mistakes_give_one_line_and_status_2(capsys, argv, field):
    assert cli.main(["serve", "arm", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err


def test_states_carry_the_imu_readings(arm_server):
    server = arm_server(imus=["link1", ("link0", (0.0, 0.0, 0.1))])
    with connect(server) as client:
        assert [s["name"] for s in client.sensors] == ["imu:link1", "imu:link0@0,0,0.1"]
        client.command({"joint0": 0.9})
        server.run(ticks=3)
        drain(client)
        # the next tick sends the state as it is now (before that tick's steps)
        gyro, accel = server.sim.imu("link1")
        server.run(ticks=1)
        state = drain(client)[-1]
        assert (bits(state["sensors"]["imu:link1"]) == bits(np.concatenate([gyro, accel]))).all()
        assert state["sensors"]["imu:link0@0,0,0.1"].shape == (6,)
