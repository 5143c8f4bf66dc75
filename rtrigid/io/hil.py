"""Lock-step stepping over TCP: a server that owns a Simulation, and a client that drives it.

    with Server(rtrigid.scenarios.build("gyro_top"), port=0).start() as server:
        with Client(*server.address) as client:
            r = client.step(10, forces={"top": ((0, 0, 0), (0, 0, 1e-3))})
            r["t"], r["poses"], r["velocities"]

``rtrigid serve SCENARIO --host 127.0.0.1 --port P`` runs the server as a process.  The
simulation only moves when a client asks it to, so a rig or another program can keep it in
lock-step with its own clock.  Stepping through the server gives bit-for-bit the states of
the same calls made in process: float64 values travel as raw IEEE 754 bytes.

Protocol, version 1
-------------------
A stream socket: TCP (``TCP_NODELAY`` on both ends), or a Unix-domain stream socket for a
client on the same host (``Server(unix=PATH)``, ``rtrigid serve --unix PATH``,
``Client(unix=PATH)``); the messages are the same on both.  Every message, either way, is a
16-byte header followed by ``length`` bytes of payload; all integers and floats
little-endian::

    offset  size  field
    0       4     magic    b"RTRG"
    4       1     version  1
    5       1     kind     request: 1 HELLO, 2 STEP, 3 STATE, 4 RESET
                           reply: request kind | 0x80, or 0xFF ERROR
    6       2     flags    0 (reserved)
    8       4     seq      chosen by the client, echoed in the reply
    12      4     length   payload bytes that follow

The header layout is the same in every version, so a server can answer a request of a version
it does not speak with an error and carry on.  One reply per request, in order.

Requests
    HELLO (empty)  -> HELLO reply: ``u32 n_bodies, f64 dt, u32 max_steps_per_request``, then
                      the strings integrator, scenario and the n_bodies body names, each as
                      ``u16 byte count`` + UTF-8.
    STEP           ``u32 n_steps, u32 n_loads``, then ``n_loads`` records of 52 bytes:
                   ``u32 body, f64 fx, fy, fz, f64 tx, ty, tz``.  -> STATE reply after the steps.
    STATE (empty)  -> STATE reply: the state now.
    RESET (empty)  -> STATE reply: the state after a return to the server's initial snapshot.

STATE reply: ``f64 t, u64 steps_taken, u32 n_bodies``, then per body 13 f64:
``x, y, z, q0, q1, q2, q3`` (:meth:`Simulation.pose`: world centre of mass and the unit
quaternion body -> world, scalar first) and ``vx, vy, vz, wx, wy, wz``
(:meth:`Simulation.velocity`: world centre-of-mass velocity and world angular velocity).

ERROR reply: ``u16 code`` + a UTF-8 message.  Codes (:data:`ERRORS`): 1 bad magic, 2 bad
version, 3 unknown kind, 4 length over the server's limit, 5 truncated message, 6 payload of
the wrong size, 7 bad value (non-finite load, unknown or repeated body, n_steps out of range,
flags not 0), 8 step failed (the simulation raised; the state is put back), 9 internal error.
After codes 1, 4 and 5 the server cannot find the next message boundary and closes the
connection; after the others the connection stays usable.  A refused request changes
nothing: validation happens before anything is applied, and a STEP that fails part-way is
rolled back to a snapshot taken before it.

Loads of a STEP
    Each record adds a world force at the body's centre of mass and a world torque, held
    constant for the ``n_steps`` steps of that request only (a zero-order hold).  In process
    that is ``sim.apply_force(b, f); sim.apply_torque(b, tau)`` for every record in order,
    ``sim.step(n_steps)``, then every loaded body's applied force and torque set back to what
    they were before the request (loads the server's simulation carries itself stay; the
    ``rtrigid serve`` simulation has none, so there it is ``sim.clear_applied()``).  A STEP
    without records steps with no extra load.  A body may appear once per request.

Limits: a request may ask for at most ``max_steps_per_request`` steps (bounds the time one
request holds the server); a message must be complete within ``partial_timeout`` seconds of
its first byte; a client whose unread replies fill the socket buffers is disconnected after
``send_timeout`` seconds.  The server checks a header's magic and length as soon as the
header is in, before waiting for the payload.  It handles all connections in one thread,
one complete request at a time, so a stalled client cannot hold up the others (one that
stops reading, for at most ``send_timeout``).

Busy-polling (``spin``)
    Neither end has to spin; the protocol does not depend on it.  By default the server
    sleeps in ``select`` between requests and the client sleeps in ``recv`` while its request
    is served; each wake-up costs the scheduler's (and, in a virtual machine, the host's)
    wake-up latency, which is where a round trip's tail comes from on a loaded machine.
    ``Server(spin=S)`` / ``rtrigid serve --spin S``: after each request the server polls its
    sockets without blocking for up to ``S`` seconds before it sleeps again, so a client that
    sends its next request within ``S`` finds it awake; a client at 1 kHz needs ``S`` a little
    over 1 ms, and then the server keeps one core 100 % busy for as long as the client runs.
    ``Client(spin=S)``: after sending, the client polls for the reply for up to ``S`` seconds
    before it sleeps in ``recv``; the reply of a one-step request takes tens of microseconds,
    so ``S`` of a few hundred microseconds covers it and costs only that much CPU per request;
    after ``S`` it sleeps for at most its ``timeout``.  Spin only with server and client on
    different cores (``taskset``, ``os.sched_setaffinity``): on one core the spinning process
    holds the CPU the other one needs, and under SCHED_FIFO it does not let it run at all
    until the spin ends.  Both only change when the process waits, never what it sends or
    computes.
"""
from __future__ import annotations

import math
import os
import selectors
import socket
import stat
import struct
import threading
import time

import numpy as np


MAGIC = b"RTRG"
VERSION = 1
HELLO, STEP, STATE, RESET = 1, 2, 3, 4
REPLY = 0x80
ERROR = 0xFF
HEADER = struct.Struct("<4sBBHII")
STEP_HEAD = struct.Struct("<II")
LOAD = struct.Struct("<I6d")  # body, force xyz, torque xyz: 52 bytes
STATE_HEAD = struct.Struct("<dQI")
HELLO_HEAD = struct.Struct("<IdI")
ERROR_HEAD = struct.Struct("<H")
STATE_WIDTH = 13

ERRORS = {1: "bad magic", 2: "bad version", 3: "unknown kind", 4: "too long", 5: "truncated",
          6: "bad size", 7: "bad value", 8: "step failed", 9: "internal error"}
(E_MAGIC, E_VERSION, E_KIND, E_TOO_LONG, E_TRUNCATED, E_SIZE, E_VALUE, E_STEP,
 E_INTERNAL) = range(1, 10)
_FATAL = (E_MAGIC, E_TOO_LONG, E_TRUNCATED)


class ServerError(RuntimeError):
    """The server refused a request (``code`` is a key of :data:`ERRORS`)."""

    def __init__(self, code, message):
        super().__init__(f"server error {code} ({ERRORS.get(code, '?')}): {message}")
        self.code = code


class _Refusal(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _message(kind, seq, payload=b""):
    return HEADER.pack(MAGIC, VERSION, kind, 0, seq, len(payload)) + payload


def _error(seq, code, text):
    return _message(ERROR, seq, ERROR_HEAD.pack(code) + text.encode("utf-8", "replace")[:1000])


def _pack_strings(strings):
    out = bytearray()
    for s in strings:
        raw = s.encode("utf-8")
        out += struct.pack("<H", len(raw)) + raw
    return bytes(out)


def _unpack_strings(buf, offset, count):
    out = []
    for _ in range(count):
        (size,) = struct.unpack_from("<H", buf, offset)
        offset += 2
        out.append(bytes(buf[offset:offset + size]).decode("utf-8"))
        offset += size
    return out


def _finite3(value, name):
    """Three finite floats from a sequence, or ValueError naming ``name``."""
    try:
        x, y, z = (float(c) for c in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected 3 numbers, got {value!r}") from None
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        raise ValueError(f"{name}: must be finite, got {[x, y, z]}")
    return x, y, z


def _set_timeouts(sock, recv=None, send=None):
    """Blocking socket whose recv/send give up after the given seconds (None: never).

    The kernel enforces them (SO_RCVTIMEO / SO_SNDTIMEO), so a call costs one system call;
    Python's own socket timeout would add a poll() before every recv and send.  A recv that
    times out raises ``BlockingIOError``.
    """
    sock.settimeout(None)
    for opt, seconds in ((socket.SO_RCVTIMEO, recv), (socket.SO_SNDTIMEO, send)):
        if seconds is not None:
            sec = int(seconds)
            usec = max(int(round((seconds - sec) * 1e6)), 1 if sec == 0 else 0)
            sock.setsockopt(socket.SOL_SOCKET, opt, struct.pack("ll", sec, usec))


def _as_spin(spin):
    try:
        value = float(spin)
    except (TypeError, ValueError):
        raise ValueError(f"spin: expected seconds >= 0, got {spin!r}") from None
    if not (math.isfinite(value) and 0.0 <= value <= 10.0):
        raise ValueError(f"spin: expected seconds in [0, 10], got {spin!r}")
    return value


def _unix_listener(path):
    """A listening Unix-domain stream socket at ``path``; a stale socket file there is replaced,
    anything else at that path is refused."""
    path = os.fspath(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(mode):
            raise ValueError(f"unix: {path!r} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # nobody listens: left over from a server that did not stop
        else:
            raise ValueError(f"unix: a server already listens on {path!r}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


class _Connection:
    __slots__ = ("sock", "buf", "deadline")

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()
        self.deadline = None


class Server:
    """Serve one Simulation to lock-step clients (protocol in the module docstring).

    ``port=0`` picks a free port; :attr:`address` tells which.  ``unix=PATH`` listens on a
    Unix-domain socket at PATH instead of TCP (``host`` and ``port`` are then ignored;
    :attr:`address` is the path, removed again by :meth:`stop`).  ``spin``: seconds to
    busy-poll for the next request before sleeping (module docstring).  :meth:`start` runs the
    server in a daemon thread (tests, embedding), :meth:`serve_forever` in the caller's;
    :meth:`stop` ends either and closes every socket.  The simulation belongs to the server
    while it runs: touch it only through a client.
    """

    def __init__(self, sim, host="127.0.0.1", port=0, *, scenario="",
                 max_steps_per_request=100_000, partial_timeout=2.0, send_timeout=1.0,
                 max_clients=16, unix=None, spin=0.0):
        self.spin = _as_spin(spin)
        self.sim = sim
        self.scenario = str(scenario)
        self.max_steps_per_request = int(max_steps_per_request)
        self.partial_timeout = float(partial_timeout)
        self.send_timeout = float(send_timeout)
        self.max_clients = int(max_clients)
        self._initial = sim.snapshot()
        self._own_loads = {b: sim.applied(b) for b in range(sim.nb)
                           if any(np.any(a) for a in sim.applied(b))}
        self._max_payload = STEP_HEAD.size + LOAD.size * sim.nb
        self._hello = HELLO_HEAD.pack(sim.nb, sim.dt, self.max_steps_per_request) + _pack_strings(
            [sim.integrator, self.scenario, *sim.names])
        self._state = np.empty((sim.nb, STATE_WIDTH))
        if unix is not None:
            self._listener = _unix_listener(unix)
            self.address = self._unix_path = os.fspath(unix)
        else:
            self._listener = socket.create_server((host, port))
            self.address = self._listener.getsockname()[:2]
            self._unix_path = None
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._thread = None
        self._conns = {}

    # -- life cycle ------------------------------------------------------------------------
    def start(self):
        self._thread = threading.Thread(target=self.serve_forever, name="rtrigid-hil",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def serve_forever(self):
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        spin_until = 0.0  # busy-poll (select without blocking) until then
        try:
            while not self._stopping:
                if time.monotonic() < spin_until:
                    events = sel.select(0)
                    if not events:
                        continue
                else:
                    deadlines = [c.deadline for c in self._conns.values()
                                 if c.deadline is not None]
                    timeout = (None if not deadlines
                               else max(min(deadlines) - time.monotonic(), 0.0))
                    events = sel.select(timeout)
                for key, _ in events:
                    if key.data == "listen":
                        self._accept(sel)
                    elif key.data == "wake":
                        self._wake_r.recv(64)
                    else:
                        self._on_readable(sel, key.data)
                        if self.spin:
                            spin_until = time.monotonic() + self.spin
                now = time.monotonic()
                for conn in list(self._conns.values()):
                    if conn.deadline is not None and now >= conn.deadline:
                        self._drop(sel, conn, _error(0, E_TRUNCATED, "message incomplete "
                                                     f"after {self.partial_timeout:g} s"))
        finally:
            for conn in list(self._conns.values()):
                self._drop(sel, conn)
            sel.close()
            for s in (self._listener, self._wake_r, self._wake_w):
                s.close()
            if self._unix_path is not None:
                try:
                    os.unlink(self._unix_path)
                except OSError:
                    pass

    # -- connections -------------------------------------------------------------------------
    def _accept(self, sel):
        try:
            sock, _ = self._listener.accept()
        except OSError:
            return
        if len(self._conns) >= self.max_clients:
            sock.close()
            return
        _set_timeouts(sock, send=self.send_timeout)  # reads happen only when readable
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(sock)
        self._conns[sock.fileno()] = conn
        sel.register(sock, selectors.EVENT_READ, conn)

    def _drop(self, sel, conn, last_words=None):
        if last_words is not None:
            try:
                conn.sock.sendall(last_words)
            except OSError:
                pass
        self._conns.pop(conn.sock.fileno(), None)
        try:
            sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _on_readable(self, sel, conn):
        try:
            data = conn.sock.recv(1 << 16)
        except OSError:
            self._drop(sel, conn)
            return
        if not data:
            self._drop(sel, conn, _error(0, E_TRUNCATED, f"connection closed {len(conn.buf)} "
                                         "bytes into a message") if conn.buf else None)
            return
        buf = conn.buf
        buf += data
        while len(buf) >= HEADER.size:
            magic, version, kind, flags, seq, length = HEADER.unpack_from(buf)
            if magic != MAGIC:
                self._drop(sel, conn, _error(seq, E_MAGIC, f"magic {bytes(magic)!r}, "
                                             f"expected {MAGIC!r}"))
                return
            if length > self._max_payload:
                self._drop(sel, conn, _error(seq, E_TOO_LONG, f"length {length} over the "
                                             f"limit {self._max_payload}"))
                return
            if len(buf) < HEADER.size + length:
                break
            payload = bytes(buf[HEADER.size:HEADER.size + length])
            del buf[:HEADER.size + length]
            reply = self._reply(version, kind, flags, seq, payload)
            try:
                conn.sock.sendall(reply)
            except OSError:
                self._drop(sel, conn)
                return
        conn.deadline = time.monotonic() + self.partial_timeout if buf else None

    # -- requests ------------------------------------------------------------------------------
    def _reply(self, version, kind, flags, seq, payload):
        try:
            if version != VERSION:
                raise _Refusal(E_VERSION, f"version {version}; this server speaks {VERSION}")
            if flags:
                raise _Refusal(E_VALUE, f"flags {flags:#x}; must be 0")
            if kind == STEP:
                self._step(*self._parse_step(payload))
            elif kind in (HELLO, STATE, RESET):
                if payload:
                    raise _Refusal(E_SIZE, f"kind {kind} takes no payload, got {len(payload)} "
                                   "bytes")
                if kind == HELLO:
                    return _message(HELLO | REPLY, seq, self._hello)
                if kind == RESET:
                    self.sim.restore(self._initial)
            else:
                raise _Refusal(E_KIND, f"unknown kind {kind}")
            return _message(kind | REPLY, seq, self._pack_state())
        except _Refusal as exc:
            return _error(seq, exc.code, str(exc))
        except Exception as exc:  # the server outlives any request
            return _error(seq, E_INTERNAL, f"{type(exc).__name__}: {exc}")

    def _parse_step(self, payload):
        if len(payload) < STEP_HEAD.size:
            raise _Refusal(E_SIZE, f"STEP payload of {len(payload)} bytes; needs at least "
                           f"{STEP_HEAD.size}")
        n, n_loads = STEP_HEAD.unpack_from(payload)
        want = STEP_HEAD.size + LOAD.size * n_loads
        if len(payload) != want:
            raise _Refusal(E_SIZE, f"STEP with {n_loads} loads needs {want} bytes, got "
                           f"{len(payload)}")
        if n > self.max_steps_per_request:
            raise _Refusal(E_VALUE, f"n_steps {n} over max_steps_per_request "
                           f"{self.max_steps_per_request}")
        loads = list(LOAD.iter_unpack(payload[STEP_HEAD.size:]))
        bodies = [record[0] for record in loads]
        for b in bodies:
            if b >= self.sim.nb:
                raise _Refusal(E_VALUE, f"body {b} out of range (n_bodies {self.sim.nb})")
        if len(set(bodies)) != len(bodies):
            raise _Refusal(E_VALUE, f"body repeated in {bodies}")
        for record in loads:
            if not all(map(math.isfinite, record[1:])):
                raise _Refusal(E_VALUE, f"loads of body {record[0]} must be finite, got "
                               f"{list(record[1:])}")
        return n, loads

    def _step(self, n, loads):
        sim = self.sim
        before = sim.snapshot()
        try:
            for b, fx, fy, fz, tx, ty, tz in loads:
                sim.apply_force(b, (fx, fy, fz))
                sim.apply_torque(b, (tx, ty, tz))
            sim.step(n)
        except Exception as exc:
            sim.restore(before)
            raise _Refusal(E_STEP, f"{type(exc).__name__}: {exc}") from None
        # back to the simulation's own loads; they never change while it is served (the
        # initial snapshot that RESET restores holds the same ones)
        for record in loads:
            b = record[0]
            sim.clear_applied(b)
            if b in self._own_loads:
                force, torque = self._own_loads[b]
                sim.apply_force(b, force)
                sim.apply_torque(b, torque)

    def _pack_state(self):
        sim, out = self.sim, self._state
        for b in range(sim.nb):
            out[b, 0:3], out[b, 3:7] = sim.pose(b)
            out[b, 7:10], out[b, 10:13] = sim.velocity(b)
        return STATE_HEAD.pack(sim.t, sim.steps_taken, sim.nb) + out.tobytes()


class Client:
    """Drive a :class:`Server`: ``step``, ``state``, ``reset``; each returns a state dict.

    ``Client(host, port)`` over TCP, or ``Client(unix=PATH)`` to a server on a Unix-domain
    socket; ``spin``: seconds to busy-poll for each reply before sleeping (module docstring).
    A state dict holds ``t`` (float), ``steps`` (int), ``poses`` (``(n_bodies, 7)``:
    ``x, y, z, q0, q1, q2, q3``), ``velocities`` (``(n_bodies, 6)``: world ``v`` then world
    angular velocity) and ``names``.  After :meth:`__init__`, :attr:`names`, :attr:`dt`,
    :attr:`integrator` and :attr:`scenario` describe the served simulation.
    """

    def __init__(self, host="127.0.0.1", port=None, timeout=5.0, *, unix=None, spin=0.0):
        self.spin = _as_spin(spin)
        self._spin_ns = int(round(self.spin * 1e9))
        if unix is not None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self._sock.settimeout(timeout)
                self._sock.connect(os.fspath(unix))
            except BaseException:
                self._sock.close()
                raise
        else:
            if port is None:
                raise ValueError("port: required (or unix=PATH)")
            self._sock = socket.create_connection((host, int(port)), timeout=timeout)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        _set_timeouts(self._sock, recv=timeout, send=timeout)
        self._seq = 0
        self._buf = bytearray(1 << 16)  # replies are read into this, then copied out
        self._view = memoryview(self._buf)
        try:
            hello = self._request(HELLO)
        except BaseException:
            self._sock.close()
            raise
        nb, self.dt, self.max_steps_per_request = HELLO_HEAD.unpack_from(hello)
        self.integrator, self.scenario, *self.names = _unpack_strings(
            hello, HELLO_HEAD.size, nb + 2)
        self.nb = nb

    def close(self):
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def step(self, n=1, forces=None) -> dict:
        """Run ``n`` steps with ``forces`` held over them; return the state after.

        ``forces`` maps a body (name or index) to ``(force, torque)``, both world-frame
        3-vectors (force at the centre of mass), or to ``{"force": f, "torque": tau}`` with
        either key optional.  They act for these ``n`` steps only.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not (
                0 <= n <= self.max_steps_per_request):
            raise ValueError(f"n: expected an integer in [0, {self.max_steps_per_request}], "
                             f"got {n!r}")
        records = self._pack_loads(forces or {})
        payload = STEP_HEAD.pack(int(n), len(records)) + b"".join(records)
        return self._state_dict(self._request(STEP, payload))

    def state(self) -> dict:
        return self._state_dict(self._request(STATE))

    def reset(self) -> dict:
        """Return the server's simulation to its initial state."""
        return self._state_dict(self._request(RESET))

    def _body(self, body):
        if isinstance(body, str):
            if body in self.names:
                return self.names.index(body)
            raise ValueError(f"forces: no body named {body!r}; known: {self.names}")
        if isinstance(body, (int, np.integer)) and not isinstance(body, bool) and (
                0 <= body < self.nb):
            return int(body)
        raise ValueError(f"forces: body {body!r} is neither a name nor an index < {self.nb}")

    def _pack_loads(self, forces):
        if not hasattr(forces, "items"):
            raise ValueError(f"forces: expected a mapping body -> (force, torque), got "
                             f"{type(forces).__name__}")
        records = []
        seen = set()
        for body, value in forces.items():
            b = self._body(body)
            if b in seen:
                raise ValueError(f"forces: body {self.names[b]!r} given twice")
            seen.add(b)
            if isinstance(value, dict):
                unknown = set(value) - {"force", "torque"}
                if unknown:
                    raise ValueError(f"forces[{body!r}]: unknown keys {sorted(unknown)}")
                force, torque = value.get("force", (0, 0, 0)), value.get("torque", (0, 0, 0))
            else:
                try:
                    force, torque = value
                except (TypeError, ValueError):
                    raise ValueError(f"forces[{body!r}]: expected (force, torque), got "
                                     f"{value!r}") from None
            records.append(LOAD.pack(b, *_finite3(force, f"forces[{body!r}] force"),
                                     *_finite3(torque, f"forces[{body!r}] torque")))
        return records

    def _recv_some(self, got, deadline_ns):
        """recv_into the buffer from ``got``; busy-polls until ``deadline_ns``, then blocks."""
        view = self._view[got:]
        while time.perf_counter_ns() < deadline_ns:
            try:
                k = self._sock.recv_into(view, 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            break
        else:
            try:
                k = self._sock.recv_into(view)
            except BlockingIOError:
                self.close()  # a late reply would be taken for the next one
                raise TimeoutError(f"no reply within {self.timeout} s; connection closed") from None
        if not k:
            raise ConnectionError("server closed the connection")
        return got + k

    def _request(self, kind, payload=b""):
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        self._sock.sendall(_message(kind, self._seq, payload))
        deadline = time.perf_counter_ns() + self._spin_ns if self._spin_ns else 0
        got = 0
        while got < HEADER.size:
            got = self._recv_some(got, deadline)
        magic, version, rkind, _, seq, length = HEADER.unpack_from(self._buf)
        if magic != MAGIC or version != VERSION or seq != self._seq or length > 1 << 24:
            self.close()
            raise ConnectionError(f"unexpected reply header (magic {magic!r}, version "
                                  f"{version}, seq {seq} for {self._seq}, length {length})")
        end = HEADER.size + length
        if end > len(self._buf):
            self._buf.extend(bytes(end - len(self._buf)))  # no view of it is held here
            self._view = memoryview(self._buf)
        while got < end:
            got = self._recv_some(got, deadline)
        if got > end:  # one request, one reply: nothing may follow it
            self.close()
            raise ConnectionError(f"{got - end} unexpected bytes after a reply")
        body = bytearray(self._view[HEADER.size:end])
        if rkind == ERROR:
            (code,) = ERROR_HEAD.unpack_from(body)
            raise ServerError(code, bytes(body[ERROR_HEAD.size:]).decode("utf-8", "replace"))
        if rkind != kind | REPLY:
            self.close()
            raise ConnectionError(f"reply kind {rkind} to a request of kind {kind}")
        return body

    def _state_dict(self, body):
        t, steps, nb = STATE_HEAD.unpack_from(body)
        values = np.frombuffer(body, dtype="<f8", offset=STATE_HEAD.size).reshape(nb, STATE_WIDTH)
        # views of a copy made for this reply alone: nothing else holds it
        return {"t": t, "steps": steps, "poses": values[:, :7], "velocities": values[:, 7:],
                "names": self.names}


def serve_main(args):
    """``rtrigid serve``: build the scenario and serve it until interrupted."""
    import signal

    from rtrigid import scenarios

    sim = scenarios.build(args.scenario, integrator=args.integrator, dt=args.dt,
                          **dict(args.set or []))
    sim.step(0)  # load the compiled kernel before the first client waits on it
    if args.rt_priority:
        from rtrigid.io.realtime import set_fifo_priority

        set_fifo_priority(args.rt_priority)
    unix = getattr(args, "unix", None)
    server = Server(sim, args.host, args.port, scenario=args.scenario, unix=unix,
                    spin=getattr(args, "spin", 0.0))
    where = f"unix:{server.address}" if unix is not None else "{}:{}".format(*server.address)
    print(f"rtrigid serve: {args.scenario} ({sim.integrator}, dt={sim.dt:g}) on {where}",
          flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
