"""Streaming over UDP at a fixed rate: the simulation paced to the wall clock, the newest
command applied at every tick, the state sent every tick (specification: "Streaming over UDP"
in ``docs/hil/protocol.md``).

    with StreamServer(rtrigid.scenarios.build("arm"), port=0, rate=1000.0) as server:
        server.start()                      # or server.run(duration=60.0) in this thread
        ...                                 # a rig (StreamClient, the C client) streams
        server.stats()                      # deadline figures and packet counts so far

A :class:`~rtrigid.io.realtime.RealtimeRunner` paces the simulation: each tick it reads every
datagram that has come in (most of them already read while it waited for the release, so that little
stands between the release and the state's departure), applies the newest command (by sequence
number: older ones are dropped and counted), sends the state to the destination (the sender of the
last command or SUBSCRIBE) when the tick is a multiple of ``every``, and steps.  A watchdog holds or
zeroes the commands after ``watchdog`` seconds without one.  With a
:class:`~rtrigid.io.realtime.ManualClock` every tick runs at once, which makes the server
deterministic (the tests and the specification's examples step it tick by tick).
"""

from __future__ import annotations

import math
import os
import signal
import socket
import struct
import sys
import threading
import warnings
from typing import Any, Iterable, cast

import numpy as np

from rtrigid.io.hil.protocol import (
    COMMAND,
    COMMAND_HEAD,
    CONTROL,
    DESCRIBE,
    E_KIND,
    E_MAGIC,
    E_SIZE,
    E_VALUE,
    E_VERSION,
    HEADER,
    JOINT_FORCE,
    LOAD,
    ON_SILENCE,
    REPLY,
    STATS,
    STATS_COUNTS,
    STATS_PAYLOAD,
    STATS_TIMES,
    STATUS_WATCHDOG,
    STREAM_INFO,
    STREAM_MAGIC,
    STREAM_STATE,
    STREAM_STATE_HEAD,
    STREAM_VERSION,
    SUBSCRIBE,
    datagram,
    datagram_error,
)
from rtrigid.io.hil.requests import Refusal, parse_step
from rtrigid.io.hil.served import (
    ImuSpec,
    StatePacker,
    actuator_rows,
    apply_records,
    describe,
    imu_sensors,
    joint_rows,
    replica,
)
from rtrigid.io.realtime import Clock, MonotonicClock, RealtimeRunner, Tick
from rtrigid.simulation import Simulation, SimulationError
from rtrigid.validate import as_scalar

_NO_STEPS = struct.pack("<I", 0)  # parse_step reads a STEP payload: n_steps in front
_SEQUENCES_KEPT = 64  # senders whose last applied command is remembered (stale detection)


class StreamServer:
    """Stream a Simulation over UDP at a fixed rate (``docs/hil/protocol.md``, "Streaming over
    UDP").

    ``port=0`` picks a free port (:attr:`address` tells which).  ``rate``: ticks per second
    (default ``1/sim.dt``: one step per tick); ``every``: a state is sent on every ``every``-th
    tick; ``watchdog``: seconds without a valid command after which ``on_silence`` acts
    (``"hold"``: the last command stays in force; ``"zero"``: every control, joint force and
    load of the commands is set to 0), until the next command.  ``imus`` as for
    :class:`~rtrigid.io.hil.server.Server`.  ``clock``, ``spin``, ``max_steps_per_tick`` and
    ``max_lag`` go to the :class:`~rtrigid.io.realtime.RealtimeRunner`; the default clock
    reads the socket while it waits for a release, so that a tick has only to apply the
    newest command and send the state (taken after the previous tick's steps).
    ``max_packets_per_tick`` bounds the datagrams one read takes.  The server steps a
    copy of ``sim`` as it is now; ``sim`` itself is never stepped (:attr:`sim` is the copy).
    """

    def __init__(
        self,
        sim: Simulation,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        scenario: str = "",
        rate: float | None = None,
        every: int = 1,
        watchdog: float = 0.1,
        on_silence: str = "hold",
        imus: Iterable[ImuSpec] = (),
        clock: Clock | None = None,
        spin: float = 3e-4,
        max_steps_per_tick: int | None = None,
        max_lag: float = 0.1,
        max_packets_per_tick: int = 256,
    ) -> None:
        if not isinstance(sim, Simulation):
            raise ValueError(f"sim: expected an rtrigid Simulation, got {type(sim).__name__}")
        if (
            isinstance(every, bool)
            or not isinstance(every, (int, np.integer))
            or not (1 <= every <= 1_000_000)
        ):
            raise ValueError(f"every: expected an integer in [1, 1000000], got {every!r}")
        self.every = int(every)
        self.watchdog = as_scalar(watchdog, "watchdog", positive=True)
        if on_silence not in ON_SILENCE:
            raise ValueError(f"on_silence: expected one of {ON_SILENCE}, got {on_silence!r}")
        self.on_silence = on_silence
        if (
            isinstance(max_packets_per_tick, bool)
            or not isinstance(max_packets_per_tick, (int, np.integer))
            or max_packets_per_tick < 1
        ):
            raise ValueError(
                f"max_packets_per_tick: expected an integer >= 1, got {max_packets_per_tick!r}"
            )
        self.max_packets_per_tick = int(max_packets_per_tick)
        self.scenario = str(scenario)
        self.sim = replica(sim)
        self.sim.restore(sim.snapshot())
        self._joints = joint_rows(sim)
        self._actuators = actuator_rows(sim)
        self._imus = imu_sensors(sim, imus)
        self._joint_nv = [row[7] for row in self._joints]
        self._own_loads = {
            b: sim.applied(b) for b in range(sim.nb) if any(np.any(a) for a in sim.applied(b))
        }
        self._packer = StatePacker(sim, self._imus)
        self.max_payload = (
            COMMAND_HEAD.size
            + LOAD.size * sim.nb
            + CONTROL.size * len(self._actuators)
            + sum(JOINT_FORCE.size + 8 * nv for nv in self._joint_nv)
        )
        self._runner = RealtimeRunner(
            self.sim,
            self._tick,
            after=self._after,
            rate=rate,
            clock=clock,
            spin=spin,
            max_steps_per_tick=max_steps_per_tick,
            max_lag=max_lag,
        )
        self.rate = self._runner.rate
        self._describe = describe(
            sim, self.scenario, 0, self._joints, self._actuators, self._imus
        ) + STREAM_INFO.pack(
            self.rate, self.every, self.watchdog, ON_SILENCE.index(on_silence), self.max_payload
        )
        # compile before serving (numba compiles a kernel on its first call)
        before = self.sim.snapshot()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self.sim.step(1)
            except SimulationError:
                pass
        self._packer.pack(self.sim)
        self.sim.restore(before)
        self._sock = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM
        )
        try:
            self._sock.bind((host, port))
        except BaseException:
            self._sock.close()
            raise
        self._sock.setblocking(False)
        self.address: tuple[str, int] = self._sock.getsockname()[:2]
        self._buf = bytearray(65536)
        self._view = memoryview(self._buf)
        self._next_tick = 0  # index of the next tick, over every run
        self.destination: Any = None  # where states go
        self._applied: dict[Any, int] = {}  # sender -> seq of its last applied command
        self.command_seq = 0  # seq of the command in force (0: none yet)
        self._last_command_ns: int | None = None
        self._silent = False  # the watchdog has acted since the last command
        self._loaded: set[int] = set()  # bodies the command in force loads
        self._forced: set[int] = set()  # joints a command has given a force
        self._stopping = False
        self._prepared = False  # the packer holds the motion of the state to send next
        self._best: tuple[int, Any, Any] | None = None  # newest command read for the tick
        self._error_sent = False  # an ERROR went out since the last tick
        if clock is None:  # the default clock reads the socket while it waits for a release
            cast(MonotonicClock, self._runner.clock).watch = (self._sock, self._read)
        self._thread: threading.Thread | None = None
        self.counts = dict.fromkeys(STATS_COUNTS[6:], 0)
        self.counts["states_unsent"] = 0  # sendto failed (the kernel's buffer was full)

    # -- life cycle ------------------------------------------------------------------------
    def run(self, duration: float | None = None, ticks: int | None = None) -> dict[str, Any]:
        """Stream for ``duration`` seconds, ``ticks`` ticks, or until :meth:`stop`; returns
        :meth:`stats`.  May be called again (tick indices go on; the deadline figures are
        those of the latest run)."""
        self._prepared = False
        self._runner.run(duration=duration, ticks=ticks)
        return self.stats()

    def start(self, duration: float | None = None) -> StreamServer:
        """Stream in a daemon thread (until :meth:`stop`, or for ``duration`` seconds)."""
        self._thread = threading.Thread(
            target=self.run, args=(duration,), name="rtrigid-udp", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the run after the current tick (from any thread, or a signal handler); waits
        for the thread :meth:`start` made."""
        self._stopping = True
        self._runner.stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def close(self) -> None:
        """Stop and close the socket."""
        self.stop()
        self._sock.close()

    def __enter__(self) -> StreamServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, Any]:
        """The deadline figures of the run so far (:meth:`RealtimeRunner.progress
        <rtrigid.io.realtime.RealtimeRunner.progress>`) and the packet counts since the
        server was made: what a STATS request returns, and ``states_unsent``."""
        return {**self._runner.progress(), **self.counts}

    def runner_stats(self) -> dict[str, Any] | None:
        """The paced runner's full figures of the last finished run (with percentiles)."""
        return self._runner.stats()

    # -- a tick ----------------------------------------------------------------------------
    def _tick(self, sim: Simulation, tick: Tick) -> None:
        if self._stopping:
            self._runner.stop()
        first = self._next_tick
        self._next_tick += tick.ticks
        now = self._runner.clock.now_ns()
        self._receive(now)
        if (
            self._last_command_ns is not None
            and not self._silent
            and now - self._last_command_ns > self.watchdog * 1e9
        ):
            self._silent = True
            self.counts["watchdog_trips"] += 1
            if self.on_silence == "zero":
                self._zero()
        last = first + tick.ticks - 1
        if self.destination is not None and last // self.every * self.every >= first:
            head = STREAM_STATE_HEAD.pack(
                first, self.command_seq, STATUS_WATCHDOG if self._silent else 0
            )
            try:
                packer = self._packer
                body = packer.finish(sim) if self._prepared else packer.pack(sim)
                self._sock.sendto(
                    datagram(STREAM_STATE, first & 0xFFFFFFFF, head + body), self.destination
                )
                self.counts["states_sent"] += 1
            except OSError:
                self.counts["states_unsent"] += 1

    def _after(self, sim: Simulation, tick: Tick) -> None:
        """After the steps: if the next tick sends a state, take it now, while nothing waits
        for it (the commands that tick applies do not change it), so that tick sends it
        as soon as it has read them.  (A tick that folds in a later one whose turn it is to
        send packs the state itself.)"""
        self._prepared = self.destination is not None and self._next_tick % self.every == 0
        if self._prepared:
            self._packer.motion(sim)

    def _receive(self, now: int) -> None:
        """Read what came in since the last read; apply the newest command of the tick."""
        self._read()
        best, self._best = self._best, None
        self._error_sent = False
        if best is not None:
            self._apply(*best, now)

    def _read(self) -> None:
        """Read the datagrams waiting (at most ``max_packets_per_tick``): keep the newest
        command for the tick to apply, answer the rest.  Called by the tick, and while the
        loop waits for the release, so that the tick has little left to read."""
        best = self._best  # (seq, sender, parsed command)
        for _ in range(self.max_packets_per_tick):
            try:
                size, sender = self._sock.recvfrom_into(self._buf)
            except BlockingIOError:
                break
            except OSError:
                continue
            seq = HEADER.unpack_from(self._buf)[4] if size >= HEADER.size else 0
            try:
                kind, seq, payload = self._check(size)
                if kind == COMMAND:
                    command = self._parse(payload)
                    if seq <= self._applied.get(sender, -1):
                        self.counts["dropped_stale"] += 1
                    elif best is not None and best[1] == sender and seq <= best[0]:
                        self.counts["dropped_reordered"] += 1
                    else:
                        if best is not None:
                            self.counts["commands_superseded"] += 1
                        best = (seq, sender, command)
                        self.destination = sender
                elif kind == SUBSCRIBE:
                    if payload:
                        raise Refusal(
                            E_SIZE, f"SUBSCRIBE takes no payload, got {len(payload)} bytes"
                        )
                    self.destination = sender
                    self._applied.pop(sender, None)  # its next command starts a sequence
                    if best is not None and best[1] == sender:
                        best = (-1, sender, best[2])
                elif kind in (STATS, DESCRIBE):
                    if payload:
                        raise Refusal(
                            E_SIZE, f"kind {kind} takes no payload, got {len(payload)} bytes"
                        )
                    self._reply(kind, seq, sender)
                else:
                    raise Refusal(E_KIND, f"unknown kind {kind}")
            except Refusal as exc:
                self.counts["dropped_invalid"] += 1
                if not self._error_sent:  # at most one ERROR a tick
                    self._error_sent = True
                    try:
                        self._sock.sendto(datagram_error(seq, exc.code, str(exc)), sender)
                    except OSError:
                        pass
        self._best = best

    def _check(self, size: int) -> tuple[int, int, bytes]:
        """(kind, seq, payload) of the datagram in the buffer, or a :class:`Refusal`."""
        if size < HEADER.size:
            raise Refusal(E_SIZE, f"a datagram of {size} bytes; the header alone is {HEADER.size}")
        magic, version, kind, flags, seq, length = HEADER.unpack_from(self._buf)
        if magic != STREAM_MAGIC:
            raise Refusal(E_MAGIC, f"magic {bytes(magic)!r}, expected {STREAM_MAGIC!r}")
        if version != STREAM_VERSION:
            raise Refusal(
                E_VERSION, f"stream version {version}; this server speaks {STREAM_VERSION}"
            )
        if flags:
            raise Refusal(E_VALUE, f"flags {flags:#x}; must be 0")
        if length != size - HEADER.size:
            raise Refusal(E_SIZE, f"length {length} but {size - HEADER.size} bytes of payload")
        return kind, seq, bytes(self._view[HEADER.size : size])

    def _parse(self, payload: bytes) -> Any:
        if len(payload) < COMMAND_HEAD.size:
            raise Refusal(
                E_SIZE,
                f"COMMAND payload of {len(payload)} bytes; needs at least {COMMAND_HEAD.size}",
            )
        try:
            _, loads, controls, forces = parse_step(
                _NO_STEPS + payload, self.sim.nb, len(self._actuators), self._joint_nv, 0
            )
        except Refusal as exc:
            raise Refusal(exc.code, str(exc).replace("STEP", "COMMAND")) from None
        return loads, controls, forces

    def _apply(self, seq: int, sender: Any, command: Any, now: int) -> None:
        """The command in force from now on: its controls and joint forces (held, as in a
        STEP), its loads (instead of the previous command's)."""
        loads, controls, forces = command
        sim = self.sim
        before = sim.snapshot()
        try:
            self._unload()
            apply_records(sim, controls, forces, loads)
        except (ValueError, SimulationError) as exc:
            sim.restore(before)
            self.counts["dropped_invalid"] += 1
            try:
                self._sock.sendto(
                    datagram_error(max(seq, 0), E_VALUE, f"{type(exc).__name__}: {exc}"), sender
                )
            except OSError:
                pass
            return
        self._forced.update(j for j, _ in forces)
        self._loaded = {record[0] for record in loads}
        self.counts["commands_applied"] += 1
        if len(self._applied) >= _SEQUENCES_KEPT and sender not in self._applied:
            del self._applied[next(iter(self._applied))]
        self._applied[sender] = max(seq, 0)
        self.command_seq = max(seq, 0)
        self._last_command_ns = now
        self._silent = False

    def _unload(self) -> None:
        """Back to the simulation's own loads on the bodies the command in force loads."""
        sim = self.sim
        for b in self._loaded:
            sim.clear_applied(b)
            if b in self._own_loads:
                force, torque = self._own_loads[b]
                sim.apply_force(b, force)
                sim.apply_torque(b, torque)
        self._loaded = set()

    def _zero(self) -> None:
        """The watchdog's "zero": every control 0, every joint force given 0, no loads."""
        sim = self.sim
        self._unload()
        for a in range(len(self._actuators)):
            sim.set_control(a, 0.0)
        for j in self._forced:
            sim.set_joint_force(j, np.zeros(self._joint_nv[j]))

    def _reply(self, kind: int, seq: int, sender: Any) -> None:
        if kind == STATS:
            stats = self.stats()
            payload = STATS_PAYLOAD.pack(
                *(int(stats[k]) for k in STATS_COUNTS), *(float(stats[k]) for k in STATS_TIMES)
            )
        else:
            payload = self._describe
        try:
            self._sock.sendto(datagram(kind | REPLY, seq, payload), sender)
        except OSError:
            pass


def stream_main(args: Any, sim: Simulation, imus: list[Any]) -> None:
    """``rtrigid serve SCENARIO --udp PORT``: stream until SIGTERM or SIGINT, then print the
    figures (one ``key value`` line each) and exit with status 0."""
    from rtrigid.io.realtime import print_stats

    server = StreamServer(
        sim,
        args.host,
        args.udp,
        scenario=args.scenario,
        rate=args.rate,
        every=args.every,
        watchdog=args.watchdog,
        on_silence=args.on_silence,
        imus=imus,
        spin=args.spin or 3e-4,
    )
    if args.rt_priority:
        from rtrigid.io.realtime import set_fifo_priority

        set_fifo_priority(args.rt_priority)
    print(
        f"rtrigid serve: {args.scenario} ({sim.integrator}, dt={sim.dt:g}) streaming at "
        f"{server.rate:g} Hz on udp {server.address[0]}:{server.address[1]}",
        flush=True,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: server.stop())
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    server.close()
    print_stats(
        {k: v for k, v in server.stats().items() if not (isinstance(v, float) and math.isnan(v))}
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
