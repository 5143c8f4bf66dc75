"""What the lock-step server's requests do to a connection's simulation: make it, step it
in slices, set its state, resume or observe a session, and reply with its state.

:class:`RequestsMixin` holds these methods of :class:`~rtrigid.io.hil.server.Server`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterable, cast

import numpy as np

from rtrigid.io.hil.connection import Connection, Job
from rtrigid.io.hil.protocol import (
    E_SESSION,
    E_SIZE,
    E_STEP,
    E_VALUE,
    OBSERVE,
    PUSH,
    REPLY,
    RESUME,
    SET_STATE_HEAD,
    STEP,
    error,
    message,
)
from rtrigid.io.hil.requests import Refusal, StepRequest, parse_step
from rtrigid.io.hil.served import StatePacker, apply_records, replica
from rtrigid.io.hil.sessions import TOKEN_SIZE, Sessions
from rtrigid.simulation import Simulation, Snapshot

COST_MEMORY = 0.9  # see RequestsMixin._work


class RequestsMixin:
    """The request handlers of :class:`~rtrigid.io.hil.server.Server`."""

    if TYPE_CHECKING:  # what the handlers use of the server (set by Server.__init__)
        sim: Simulation
        counts: dict[str, int]
        max_steps_per_request: int
        _sessions: Sessions
        _spare: list[Simulation]
        _initial: Snapshot
        _actuators: list[Any]
        _joint_nv: list[int]
        _own_loads: dict[int, Any]
        _cost: float | None
        _packer: StatePacker

        def _flush(self, conn: Connection) -> None: ...
        def _settle(self, conn: Connection, later: bool = False) -> None: ...
        def _reap(self) -> None: ...
        def _recycle(self, sim: Simulation) -> None: ...

    def _sim_of(self, conn: Connection) -> Simulation:
        if conn.sim is None:
            sim = self._spare.pop() if self._spare else replica(self.sim)
            sim.restore(self._initial)
            conn.sim = sim
            self._sessions.open(conn.token, conn)
        return conn.sim

    def _reply_state(self, conn: Connection, kind: int, seq: int) -> None:
        """Reply to ``conn``'s request with its simulation's state, and send the same state
        to every observer of its session."""
        payload = self._pack_state(cast(Simulation, conn.sim))  # a reply of its simulation
        conn.out += message(kind | REPLY, seq, payload)
        for watcher in self._sessions.watchers(conn.token):
            if not watcher.dead:
                watcher.out += message(PUSH, seq, payload)
                self._flush(watcher)
                self._settle(watcher)

    def _join(self, conn: Connection, seq: int, kind: int, payload: bytes) -> None:
        """RESUME: take over a detached session; OBSERVE: watch a session."""
        if len(payload) != TOKEN_SIZE:
            raise Refusal(
                E_SIZE,
                f"kind {kind} takes a {TOKEN_SIZE}-byte session token, got {len(payload)} bytes",
            )
        if kind == RESUME:
            self._reap()  # the session's old connection, if it has closed but is not seen yet
            found = self._sessions.resume(payload, conn)
            if found is None:
                raise Refusal(
                    E_SESSION,
                    "no session waits for this token (unknown, expired, "
                    "or its connection is still open)",
                )
            token, sim = found
            if conn.sim is not None:  # the connection's own session waits in turn
                for old in self._sessions.close(conn.token, conn.sim, time.monotonic()):
                    self._recycle(old)
            conn.sim, conn.token = sim, token
            self.counts["resumed"] += 1
            self._reply_state(conn, RESUME, seq)
            return
        if conn.sim is not None:
            raise Refusal(E_SESSION, "a connection that steps a simulation cannot observe one")
        token = self._sessions.find(payload)
        sim = (
            None
            if token is None
            else (
                self._sessions.live[token].sim
                if token in self._sessions.live
                else self._sessions.detached[token][0]
            )
        )
        # (a simulation was found, so token is not None)
        if sim is None or not self._sessions.observe(cast(bytes, token), conn):
            raise Refusal(E_SESSION, "no session has this token (unknown or expired)")
        conn.observing = token
        conn.out += message(OBSERVE | REPLY, seq, self._pack_state(sim))

    def _parse_step(self, payload: bytes) -> StepRequest:
        return parse_step(
            payload, self.sim.nb, len(self._actuators), self._joint_nv, self.max_steps_per_request
        )

    def _begin_step(
        self,
        conn: Connection,
        seq: int,
        n: int,
        loads: list[tuple[Any, ...]],
        controls: Iterable[tuple[Any, ...]] = (),
        forces: Iterable[tuple[int, tuple[float, ...]]] = (),
    ) -> None:
        sim = self._sim_of(conn)
        before = sim.snapshot()
        try:
            apply_records(sim, controls, forces, loads)
        except Exception as exc:
            sim.restore(before)
            code = E_VALUE if isinstance(exc, ValueError) else E_STEP
            raise Refusal(code, f"{type(exc).__name__}: {exc}") from None
        conn.job = Job(seq, n, loads, before)

    def _set_state(self, conn: Connection, payload: bytes) -> None:
        """SET_STATE: qpos and/or qvel, all or nothing."""
        sim = self._sim_of(conn)
        if len(payload) < SET_STATE_HEAD.size:
            raise Refusal(
                E_SIZE,
                f"SET_STATE payload of {len(payload)} bytes; needs at least {SET_STATE_HEAD.size}",
            )
        nq, nv = SET_STATE_HEAD.unpack_from(payload)
        if nq not in (0, sim.nq) or nv not in (0, sim.nv):
            raise Refusal(
                E_VALUE,
                f"SET_STATE of {nq} coordinates and {nv} rates; this "
                f"simulation has nq {sim.nq} and nv {sim.nv} (0: leave them)",
            )
        want = SET_STATE_HEAD.size + 8 * (nq + nv)
        if len(payload) != want:
            raise Refusal(
                E_SIZE, f"SET_STATE of {nq} + {nv} values needs {want} bytes, got {len(payload)}"
            )
        values = np.frombuffer(payload, "<f8", offset=SET_STATE_HEAD.size)
        before = sim.snapshot()
        try:
            if nq:
                sim.set_qpos(values[:nq])
            if nv:
                sim.set_qvel(values[nq:])
        except ValueError as exc:
            sim.restore(before)
            raise Refusal(E_VALUE, str(exc)) from None

    def _work(self, conn: Connection, end: float) -> None:
        """Step ``conn``'s STEP until it is done or the slice ending at ``end`` is used."""
        # a connection with a STEP in progress (_turn's call) has both
        job, sim = cast(Job, conn.job), cast(Simulation, conn.sim)
        try:
            while job.left:
                if self._cost is None:
                    k = 1  # the first chunk measures the cost of a step
                else:
                    k = int(max(end - time.perf_counter(), 0.0) / self._cost)
                    k = min(max(k, 1), job.left)
                t0 = time.perf_counter()
                sim.step(k)
                t1 = time.perf_counter()
                job.left -= k
                # a step's cost can jump a hundredfold (Newton's sub-step fallback) and come
                # back: keep the dearest recent cost, forgotten by a tenth per chunk, so that
                # chunks stay small while dear steps keep coming
                cost = (t1 - t0) / k
                self._cost = max(cost, COST_MEMORY * self._cost if self._cost else cost, 1e-9)
                if t1 >= end:
                    break
        except Exception as exc:
            sim.restore(job.before)
            conn.job = None
            conn.out += error(job.seq, E_STEP, f"{type(exc).__name__}: {exc}")
            return
        if job.left:
            return
        conn.job = None
        self._loads_back(sim, job)
        self._reply_state(conn, STEP, job.seq)

    def _loads_back(self, sim: Simulation, job: Job) -> None:
        """Back to the simulation's own loads after ``job``; they never change while it is
        served (the initial snapshot that RESET restores holds the same ones)."""
        for record in job.loads:
            b = record[0]
            sim.clear_applied(b)
            if b in self._own_loads:
                force, torque = self._own_loads[b]
                sim.apply_force(b, force)
                sim.apply_torque(b, torque)

    def _pack_state(self, sim: Simulation) -> bytes:
        return self._packer.pack(sim)
