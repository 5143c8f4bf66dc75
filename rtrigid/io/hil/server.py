"""The lock-step server: one thread serving every connection in time-sliced turns, each
connection stepping a copy of the served Simulation (specification: ``docs/hil/protocol.md``)."""

from __future__ import annotations

import collections
import errno
import math
import os
import selectors
import socket
import threading
import time
import warnings
from typing import Iterable, cast

import numpy as np

from rtrigid.io.hil.connection import Connection, close_quietly
from rtrigid.io.hil.handlers import RequestsMixin
from rtrigid.io.hil.limits import check_limits
from rtrigid.io.hil.protocol import (
    CONTROL,
    E_FULL,
    E_IDLE,
    E_INTERNAL,
    E_KIND,
    E_MAGIC,
    E_SESSION,
    E_SIZE,
    E_TOO_LONG,
    E_TRUNCATED,
    E_VALUE,
    E_VERSION,
    HEADER,
    HELLO,
    HELLO_LIMITS,
    HELLO_SESSION,
    JOINT_FORCE,
    KEEPALIVE,
    LOAD,
    MAGIC,
    OBSERVE,
    REPLY,
    RESET,
    RESUME,
    SET_STATE,
    SET_STATE_HEAD,
    STATE,
    STEP,
    STEP_HEAD,
    VERSION,
    as_spin,
    error,
    message,
)
from rtrigid.io.hil.served import (
    ImuSpec,
    StatePacker,
    actuator_rows,
    describe,
    imu_sensors,
    joint_rows,
    replica,
    unix_listener,
)
from rtrigid.io.hil.requests import Refusal
from rtrigid.io.hil.sessions import Sessions
from rtrigid.simulation import Simulation, SimulationError


_ACCEPTS_PER_TURN = 64  # a flood of connections still lets requests through between batches
_OUT_HIGH = 1 << 16  # a turn stops producing replies once this many bytes wait to be sent
_SPARE_SIMS = 8  # simulations of closed connections kept for the next ones


class Server(RequestsMixin):
    """Serve a Simulation to lock-step clients (protocol in ``docs/hil/protocol.md``).

    ``port=0`` picks a free port; :attr:`address` tells which.  ``unix=PATH`` listens on a
    Unix-domain socket at PATH instead of TCP (``host`` and ``port`` are then ignored;
    :attr:`address` is the path, removed again by :meth:`stop`).  ``spin``: seconds to
    busy-poll for the next request before sleeping.  ``max_clients``, ``idle_timeout``,
    ``partial_timeout``, ``send_timeout``, ``time_slice`` and ``max_steps_per_request``: see
    Limits and Turns in ``docs/hil/protocol.md``.  :meth:`start` runs the server in a daemon
    thread (tests, embedding), :meth:`serve_forever` in the caller's; :meth:`stop` ends
    either and closes every socket.  Each connection steps its own copy of ``sim`` as it is
    now; ``sim`` itself is never stepped.  :attr:`counts`: what the server has done.
    ``imus``: bodies (or (body, point_body) pairs) whose IMU readings every state reply
    carries (see Sensors in ``docs/hil/protocol.md``).  ``session_grace``: seconds a
    connection's simulation waits, after the connection closes, for a client to RESUME it
    with its session token (0: it is freed at once; see Sessions in the specification).
    """

    def __init__(
        self,
        sim: Simulation,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        scenario: str = "",
        max_steps_per_request: int = 100_000,
        partial_timeout: float = 2.0,
        send_timeout: float = 1.0,
        idle_timeout: float = 60.0,
        max_clients: int = 256,
        time_slice: float = 0.002,
        unix: str | os.PathLike[str] | None = None,
        spin: float = 0.0,
        imus: Iterable[ImuSpec] = (),
        session_grace: float = 120.0,
    ) -> None:
        if not isinstance(sim, Simulation):
            raise ValueError(f"sim: expected an rtrigid Simulation, got {type(sim).__name__}")
        self.spin = as_spin(spin)
        limits = check_limits(
            max_clients=max_clients,
            idle_timeout=idle_timeout,
            partial_timeout=partial_timeout,
            send_timeout=send_timeout,
            time_slice=time_slice,
            max_steps_per_request=max_steps_per_request,
            session_grace=session_grace,
        )
        self.max_clients = limits["max_clients"]
        self.idle_timeout = limits["idle_timeout"]
        self.partial_timeout = limits["partial_timeout"]
        self.send_timeout = limits["send_timeout"]
        self.time_slice = limits["time_slice"]
        self.max_steps_per_request = limits["max_steps_per_request"]
        self.session_grace = limits["session_grace"]
        self._sessions = Sessions(self.session_grace, self.max_clients)
        self.sim = sim
        self.scenario = str(scenario)
        self._initial = sim.snapshot()
        first = replica(sim)
        first.restore(self._initial)  # refuses here, not per connection, if the copy differs
        self._spare = [first]
        self._own_loads = {
            b: sim.applied(b) for b in range(sim.nb) if any(np.any(a) for a in sim.applied(b))
        }
        self._joints = joint_rows(sim)
        self._actuators = actuator_rows(sim)
        self._imus = imu_sensors(sim, imus)
        self._joint_nv = [row[7] for row in self._joints]
        self._max_payload = max(
            STEP_HEAD.size
            + LOAD.size * sim.nb
            + CONTROL.size * len(self._actuators)
            + sum(JOINT_FORCE.size + 8 * nv for nv in self._joint_nv),
            SET_STATE_HEAD.size + 8 * (sim.nq + sim.nv),
        )
        self._hello = self._describe()
        self._packer = StatePacker(sim, self._imus)
        # compile before serving: numba compiles a kernel on its first call (tens of seconds on
        # a cold cache), and the first client's first STEP must not wait for it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a fallback or a failure is the client's to see
            try:
                first.step(1)
            except SimulationError:
                pass
        self._pack_state(first)
        first.restore(self._initial)
        backlog = min(self.max_clients + 16, socket.SOMAXCONN)
        if unix is not None:
            self._listener = unix_listener(unix, backlog)
            self.address: str | tuple[str, int] = os.fspath(unix)
            self._unix_path: str | None = self.address
        else:
            self._listener = socket.create_server((host, port), backlog=backlog)
            self.address = self._listener.getsockname()[:2]
            self._unix_path = None
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._conns: dict[int, Connection] = {}
        self._runq: collections.deque[Connection] = collections.deque()
        self._again: Connection | None = None  # whose turn just ended, still with work
        self._next_check = math.inf  # no deadline of any connection is earlier than this
        self._cost: float | None = None  # seconds per step, measured on the last chunk
        self._accept_paused: bool | float = False  # or when to try accepting again
        self.counts = dict.fromkeys(
            (
                "accepted",
                "refused_full",
                "closed_idle",
                "closed_partial",
                "closed_send",
                "send_stalled",
                "requests",
                "preempted",
                "resumed",
                "expired",
            ),
            0,
        )

    def _describe(self) -> bytes:
        """The HELLO reply's payload (:mod:`.protocol`)."""
        # after the rows: the limits (a client that reads only the rows ignores them)
        return describe(
            self.sim,
            self.scenario,
            self.max_steps_per_request,
            self._joints,
            self._actuators,
            self._imus,
        ) + HELLO_LIMITS.pack(
            self._max_payload,
            self.max_clients,
            self.idle_timeout,
            self.partial_timeout,
            self.send_timeout,
            self.time_slice,
        )

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> Server:
        """Serve in a daemon thread; returns the server."""
        self._thread = threading.Thread(target=self.serve_forever, name="rtrigid-hil", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (from any thread) and close every socket; waits for the server's
        thread if :meth:`start` made one."""
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop`."""
        sel = self._sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        spin_until = 0.0  # busy-poll (select without blocking) until then
        try:
            while not self._stopping:
                if self._runq or self._again is not None:
                    timeout: float | None = 0  # work waits: only look for what else came in
                else:
                    now = time.monotonic()
                    if now < spin_until:
                        timeout = 0
                    elif self._accept_paused:
                        timeout = 0.05  # out of files: try accepting again soon
                    elif self._next_check == math.inf:
                        timeout = None
                    else:
                        timeout = max(self._next_check - now, 0.0)
                events = sel.select(timeout)
                again, self._again = self._again, None
                for key, mask in events:
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        self._wake_r.recv(64)
                    elif mask & selectors.EVENT_WRITE:
                        self._flush(key.data)
                        self._settle(key.data)
                    elif key.data.events == selectors.EVENT_READ and not (
                        key.data.queued or key.data.job or key.data.closing
                    ):
                        self._read(key.data)
                    # else: a connection with work waiting; its bytes are read once it is done
                if again is not None and not again.dead:
                    # behind whatever came in during its turn: a new request waits for at
                    # most one turn of each connection that already had work
                    self._runq.append(again)
                if self._accept_paused and not self._stopping:
                    self._resume_accepting()
                if self._runq:
                    conn = self._runq.popleft()
                    conn.queued = False
                    if not conn.dead:
                        self._turn(conn)
                        if self.spin:
                            spin_until = time.monotonic() + self.spin
                if time.monotonic() >= self._next_check:
                    self._expire()
        finally:
            for conn in list(self._conns.values()):
                self._drop(conn)
            sel.close()
            for s in (self._listener, self._wake_r, self._wake_w):
                try:
                    s.close()
                except OSError:
                    pass
            if self._unix_path is not None:
                try:
                    os.unlink(self._unix_path)
                except OSError:
                    pass

    # -- connections -------------------------------------------------------------------------
    def _accept(self) -> None:
        for _ in range(_ACCEPTS_PER_TURN):
            try:
                sock, _ = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # the pending connection stays readable on the listener: stop watching it
                    # for a while instead of waking up for it again and again
                    self._sel.unregister(self._listener)
                    self._accept_paused = time.monotonic() + 0.05
                return  # else the peer gave up before we got to it
            sock.setblocking(False)
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if len(self._conns) >= self.max_clients:
                self._reap()  # a peer that has closed frees its slot now, not at its next turn
            if len(self._conns) >= self.max_clients:
                self.counts["refused_full"] += 1
                try:
                    sock.send(
                        error(
                            0,
                            E_FULL,
                            f"{self.max_clients} clients already "
                            "connected (max_clients); try again later",
                        )
                    )
                except OSError:
                    pass
                close_quietly(sock)
                continue
            self.counts["accepted"] += 1
            conn = Connection(sock, time.monotonic(), Sessions.new_token())
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)
            self._settle(conn)

    def _reap(self) -> None:
        """Drop the connections whose peer has closed with nothing left unread (their end of
        file may not have been seen yet, when a client closes and reconnects at once)."""
        for conn in list(self._conns.values()):
            if conn.dead or conn.queued or conn.job is not None or conn.closing:
                continue
            try:
                data = conn.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data and not conn.buf:
                self._drop(conn)

    def _resume_accepting(self) -> None:
        if time.monotonic() >= self._accept_paused:
            self._sel.register(self._listener, selectors.EVENT_READ, "listen")
            self._accept_paused = False

    def _drop(self, conn: Connection) -> None:
        if conn.dead:
            return
        conn.dead = True
        self._conns.pop(conn.sock.fileno(), None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        close_quietly(conn.sock)
        self._sessions.unobserve(conn)
        if conn.observing is None:
            if conn.job is not None:  # its STEP is undone: the session resumes before it
                sim = cast(Simulation, conn.sim)  # a connection with a STEP has its simulation
                sim.restore(conn.job.before)
                self._loads_back(sim, conn.job)
            for sim in self._sessions.close(conn.token, conn.sim, time.monotonic()):
                self._recycle(sim)
            self._next_check = min(self._next_check, self._sessions.next_expiry())
        conn.sim = conn.job = None

    def _recycle(self, sim: Simulation) -> None:
        if len(self._spare) < _SPARE_SIMS:
            self._spare.append(sim)  # restored to the start before it is used again

    def _last_words(self, conn: Connection, code: int, text: str) -> None:
        """Queue an error that answers no request, then close once it is sent."""
        conn.out += error(0, code, text)
        conn.closing = True
        self._flush(conn)
        self._settle(conn)

    def _read(self, conn: Connection) -> None:
        if conn.dead:  # dropped earlier in the same batch of events
            return
        try:
            data = conn.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            self._drop(conn)
            return
        if not data:
            if conn.buf or conn.skip:
                self._last_words(
                    conn, E_TRUNCATED, f"connection closed {len(conn.buf)} bytes into a message"
                )
            else:
                self._drop(conn)
            return
        if conn.skip:
            dropped = min(conn.skip, len(data))
            conn.skip -= dropped
            data = data[dropped:]
            if not data:
                self._settle(conn)
                return
        if not conn.buf:
            conn.since = time.monotonic()  # the first byte of a message
        conn.buf += data
        self._settle(conn)

    def _ready(self, conn: Connection) -> bool:
        """Whether ``conn.buf`` starts with a message to serve (or a header to refuse)."""
        buf = conn.buf
        if len(buf) < HEADER.size:
            return False
        magic, _, _, _, _, length = HEADER.unpack_from(buf)
        return magic != MAGIC or length > self._max_payload or len(buf) >= HEADER.size + length

    def _settle(self, conn: Connection, later: bool = False) -> None:
        """Put ``conn`` where its state says: run queue, waiting to write, or waiting to read
        (then with the deadline of an idle connection or of a partial message).  ``later``:
        it has just had its turn, and joins the run queue only after the next look at the
        sockets."""
        if conn.dead:
            return
        if conn.out:  # its socket is full (or it is being closed): write when it can take more
            events, deadline, why = selectors.EVENT_WRITE, conn.since + self.send_timeout, "send"
        elif conn.closing:
            self._drop(conn)
            return
        elif conn.job is not None or self._ready(conn):
            events, deadline, why = selectors.EVENT_READ, math.inf, None
            if not conn.queued:
                conn.queued = True
                if later:
                    self._again = conn
                else:
                    self._runq.append(conn)
        elif conn.buf or conn.skip:
            events, deadline, why = (
                selectors.EVENT_READ,
                conn.since + self.partial_timeout,
                "partial",
            )
        elif conn.observing is not None:  # an observer waits for states, not requests
            events, deadline, why = selectors.EVENT_READ, math.inf, None
        else:
            events, deadline, why = (selectors.EVENT_READ, conn.since + self.idle_timeout, "idle")
        if events != conn.events:
            self._sel.modify(conn.sock, events, conn)
            conn.events = events
        conn.deadline, conn.why = deadline, why
        if deadline < self._next_check:
            self._next_check = deadline

    def _flush(self, conn: Connection) -> None:
        """Send what the socket takes now; never wait for it."""
        if not conn.out or conn.dead:
            return
        try:
            sent = conn.sock.send(conn.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._drop(conn)
            return
        if sent == len(conn.out):
            conn.out.clear()
            conn.since = time.monotonic()  # idle from here (or partial, if more is in)
        else:
            if conn.events != selectors.EVENT_WRITE:
                conn.since = time.monotonic()  # stuck from here: send_timeout counts
                self.counts["send_stalled"] += 1
            del conn.out[:sent]

    def _expire(self) -> None:
        now = time.monotonic()
        self._next_check = math.inf
        for conn in list(self._conns.values()):
            if conn.deadline <= now:
                if conn.why == "send":
                    self.counts["closed_send"] += 1
                    self._drop(conn)
                    continue
                if conn.why == "partial":
                    self.counts["closed_partial"] += 1
                    self._last_words(
                        conn,
                        E_TRUNCATED,
                        f"message incomplete {self.partial_timeout:g} s after its first byte",
                    )
                elif conn.why == "idle":
                    self.counts["closed_idle"] += 1
                    self._last_words(conn, E_IDLE, f"no request for {self.idle_timeout:g} s")
            if not conn.dead and conn.deadline < self._next_check:
                self._next_check = conn.deadline
        for token, sim in self._sessions.expire(now):
            self.counts["expired"] += 1
            self._recycle(sim)
            for watcher in list(self._sessions.watchers(token)):
                self._last_words(
                    watcher,
                    E_SESSION,
                    "the session observed ended: its client "
                    f"did not resume it within {self.session_grace:g} s",
                )
        self._next_check = min(self._next_check, self._sessions.next_expiry())

    # -- turns ---------------------------------------------------------------------------------
    def _turn(self, conn: Connection) -> None:
        """Serve ``conn`` for at most one time slice: its STEP in progress, then its next
        requests, until the slice is used, a STEP is left unfinished, or replies pile up."""
        end = time.perf_counter() + self.time_slice
        while not conn.closing:
            if conn.job is None:
                if not self._ready(conn):
                    break
                self._serve_next(conn)
            if conn.job is not None:
                self._work(conn, end)
                if conn.job is not None:
                    self.counts["preempted"] += 1
                    break
            if len(conn.out) >= _OUT_HIGH or time.perf_counter() >= end:
                break
        if conn.buf and not conn.closing:
            conn.since = time.monotonic()  # the next message's partial_timeout counts from now
        self._flush(conn)
        self._settle(conn, later=True)

    def _serve_next(self, conn: Connection) -> None:
        buf = conn.buf
        magic, version, kind, flags, seq, length = HEADER.unpack_from(buf)
        if magic != MAGIC:
            self._last_words_for(conn, seq, E_MAGIC, f"magic {bytes(magic)!r}, expected {MAGIC!r}")
            return
        if length > self._max_payload:
            # the header says where the next message starts: the payload is discarded as it
            # arrives, and the connection and its simulation stay
            self.counts["requests"] += 1
            conn.out += error(
                seq,
                E_TOO_LONG,
                f"length {length} over the limit "
                f"{self._max_payload} (max_payload in HELLO); payload discarded",
            )
            have = len(buf) - HEADER.size
            if have >= length:
                del buf[: HEADER.size + length]
            else:
                conn.skip = length - have
                buf.clear()
            return
        payload = bytes(buf[HEADER.size : HEADER.size + length])
        del buf[: HEADER.size + length]
        self.counts["requests"] += 1
        if version != VERSION:
            # in the request's own version: an ERROR reads the same in every version, so an
            # older client shows this message instead of failing on the header
            conn.out += error(
                seq,
                E_VERSION,
                f"protocol version {version}; this server speaks "
                f"version {VERSION} only (joints, actuators and sensors): use "
                f"a client of version {VERSION} (rtrigid.io.hil.Client)",
                version,
            )
            return
        try:
            if flags:
                raise Refusal(E_VALUE, f"flags {flags:#x}; must be 0")
            if conn.observing is not None and kind not in (HELLO, KEEPALIVE):
                raise Refusal(
                    E_SESSION,
                    "an observer steps and asks nothing (HELLO and "
                    "KEEPALIVE aside): it receives the states of the session",
                )
            if kind in (RESUME, OBSERVE):
                self._join(conn, seq, kind, payload)
                return
            if kind == STEP:
                n, loads, controls, forces = self._parse_step(payload)
                self._begin_step(conn, seq, n, loads, controls, forces)
                return
            if kind == SET_STATE:
                self._set_state(conn, payload)
                self._reply_state(conn, SET_STATE, seq)
                return
            if kind not in (HELLO, STATE, RESET, KEEPALIVE):
                raise Refusal(E_KIND, f"unknown kind {kind}")
            if payload:
                raise Refusal(E_SIZE, f"kind {kind} takes no payload, got {len(payload)} bytes")
            if kind == HELLO:
                conn.out += message(
                    HELLO | REPLY,
                    seq,
                    self._hello
                    + HELLO_SESSION.pack(conn.observing or conn.token, self.session_grace),
                )
                return
            if kind == KEEPALIVE:  # resets the idle timeout, as any request does
                conn.out += message(KEEPALIVE | REPLY, seq)
                return
            sim = self._sim_of(conn)
            if kind == RESET:
                sim.restore(self._initial)
            self._reply_state(conn, kind, seq)
        except Refusal as exc:
            conn.out += error(seq, exc.code, str(exc))
        except Exception as exc:  # the server outlives any request
            conn.out += error(seq, E_INTERNAL, f"{type(exc).__name__}: {exc}")

    def _last_words_for(self, conn: Connection, seq: int, code: int, text: str) -> None:
        conn.out += error(seq, code, text)
        conn.closing = True
