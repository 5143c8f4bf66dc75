"""Lock-step stepping over TCP: a server that serves a Simulation, and clients that drive it.

    with Server(rtrigid.scenarios.build("arm"), port=0, imus=["link1"]).start() as server:
        with Client(*server.address) as client:
            r = client.step(10, controls={"shoulder": 0.5}, joint_forces={"elbow": 0.1},
                            forces={"link1": ((0, 0, 0), (0, 0, 1e-3))})
            r["t"], r["qpos"], r["qvel"], r["sensors"]["imu:link1"], r["poses"]

``rtrigid serve SCENARIO --host 127.0.0.1 --port P`` runs the server as a process; SCENARIO
is a scenario name or a model factory ``module:function`` (:func:`rtrigid.scenarios.build`),
``--imu BODY[@x,y,z]`` adds sensors.  The
simulation only moves when a client asks it to, so a rig or another program can keep it in
lock-step with its own clock.  Stepping through the server gives bit-for-bit the states of
the same calls made in process: float64 values travel as raw IEEE 754 bytes.

Protocol, version 2
-------------------
A stream socket: TCP (``TCP_NODELAY`` on both ends), or a Unix-domain stream socket for a
client on the same host (``Server(unix=PATH)``, ``rtrigid serve --unix PATH``,
``Client(unix=PATH)``); the messages are the same on both.  Every message, either way, is a
16-byte header followed by ``length`` bytes of payload; all integers and floats
little-endian::

    offset  size  field
    0       4     magic    b"RTRG"
    4       1     version  2
    5       1     kind     request: 1 HELLO, 2 STEP, 3 STATE, 4 RESET, 5 SET_STATE
                           reply: request kind | 0x80, or 0xFF ERROR
    6       2     flags    0 (reserved)
    8       4     seq      chosen by the client, echoed in the reply
    12      4     length   payload bytes that follow

The header layout is the same in every version, so a server can answer a request of a version
it does not speak with an error and carry on: ERROR 2, in the request's own version (an
ERROR's payload reads the same in every version, so a version-1 client shows the message).
One reply per request, in order.  Strings are ``u16 byte count`` + UTF-8.

Requests
    HELLO (empty)  -> HELLO reply: ``u32 n_bodies, f64 dt, u32 max_steps_per_request,
                      u32 n_joints, u32 n_actuators, u32 n_sensors, u32 nq, u32 nv``; the
                      strings integrator, scenario and the n_bodies body names; then
                      - per joint (handle order, :attr:`Simulation.joint_names`): strings name
                        and kind, ``i32 parent`` (body, -1: the world), ``u32 child, u32
                        qpos_at, u32 nq, u32 qvel_at, u32 nv`` (its entries of qpos / qvel),
                        ``f64 lower, f64 upper`` (its limits; -inf, inf: none);
                      - per actuator (model order): strings name and kind (motor, position,
                        velocity), ``u32 joint, f64 gear, f64 ctrl_lo, ctrl_hi, f64 force_lo,
                        force_hi``;
                      - per sensor: strings name and kind (imu), ``u32 body, f64 px, py, pz``
                        (point in body axes from the centre of mass), ``u32 width`` (values).
    STEP           ``u32 n_steps, u32 n_loads, u32 n_controls, u32 n_joint_forces``, then
                   ``n_loads`` records of 52 bytes ``u32 body, f64 fx, fy, fz, f64 tx, ty,
                   tz``; ``n_controls`` records of 12 bytes ``u32 actuator, f64 control``;
                   ``n_joint_forces`` records ``u32 joint`` + one f64 per rate of that joint.
                   -> STEP reply (a state) after the steps.
    STATE (empty)  -> STATE reply: the state now.
    RESET (empty)  -> STATE reply: the state after a return to the server's initial snapshot
                      (its controls and held joint forces too).
    SET_STATE      ``u32 nq_given, u32 nv_given`` (each 0: leave them, or the full count),
                   then qpos then qvel as f64 (:meth:`Simulation.set_qpos` / ``set_qvel``:
                   quaternions are normalised, a value the simulation refuses changes
                   nothing).  -> SET_STATE reply (a state).

A state (the reply to STEP, STATE, RESET, SET_STATE): ``f64 t, u64 steps_taken, u32
n_bodies, u32 nq, u32 nv, u32 n_sensor_values``, then per body 13 f64: ``x, y, z, q0, q1,
q2, q3`` (:meth:`Simulation.pose`: world centre of mass and the unit quaternion body ->
world, scalar first) and ``vx, vy, vz, wx, wy, wz`` (:meth:`Simulation.velocity`: world
centre-of-mass velocity and world angular velocity); then ``qpos`` (nq f64) and ``qvel`` (nv
f64) as :meth:`Simulation.qpos` / ``qvel`` give them (rates at t); then the sensors'
values in HELLO's order.

Sensors
    ``Server(sim, imus=[body or (body, point_body), ...])`` (``rtrigid serve --imu
    BODY[@x,y,z]``): an IMU named ``imu:BODY`` (``imu:BODY@x,y,z``) whose 6 values are
    :meth:`Simulation.imu`'s gyro and specific force (a - g) at that point, body axes.

ERROR reply: ``u16 code`` + a UTF-8 message.  Codes (:data:`ERRORS`): 1 bad magic, 2 bad
version, 3 unknown kind, 4 length over the server's limit, 5 truncated message, 6 payload of
the wrong size, 7 bad value (non-finite load, control or joint force; unknown or repeated
body, actuator or joint; a joint force on a simulation or joint that takes none; a state the
simulation refuses; n_steps out of range; flags not 0), 8 step failed (the simulation
raised; the state is put back), 9 internal error,
10 server full (sent on connecting, see Limits), 11 idle (see Limits).  After codes 1, 4, 5,
10 and 11 the server closes the connection (after 1, 4 and 5 it cannot find the next message
boundary); after the others the connection stays usable.  An error that answers no request
(5 after a timeout or a half-close, 10, 11) carries seq 0, which a client never uses.  A
refused request changes nothing: validation happens before anything is applied, and a STEP
that fails part-way is rolled back to a snapshot taken before it.

Loads, controls and joint forces of a STEP
    In process a STEP is ``sim.set_control(a, u)`` for each control record,
    ``sim.set_joint_force(j, f)`` for each joint-force record, ``sim.apply_force(b, f);
    sim.apply_torque(b, tau)`` for each load record, ``sim.step(n_steps)``, then every loaded
    body's applied force and torque set back to what they were before the request.  So body
    loads (a world force at the centre of mass and a world torque) act for the steps of that
    request only (a zero-order hold; loads the server's simulation carries itself stay, the
    ``rtrigid serve`` simulation has none), while controls and joint forces are held until a
    later request changes them, as they are in process (and in MuJoCo's ``ctrl``).  A body,
    actuator or joint may appear once per request.

One simulation per connection
    Every connection steps a simulation of its own: a copy of the served one as it was when
    the :class:`Server` was made (state, loads, counters), made when the connection first
    needs it.  RESET returns it there; it ends with the connection, and the next connection
    starts from the beginning again.  The ``Simulation`` given to the Server is never stepped.
    Why: the server takes turns between clients (below), and one client's STEP could not both
    give exactly the state of one uninterrupted ``sim.step(n)`` (what this protocol promises)
    and let another client's STEP be answered in the middle of it, if both stepped the same
    simulation; nor could one client then be kept from pushing or resetting the simulation a
    rig is driving.

Turns and time slices
    One thread serves every connection, in turns, round robin: a turn serves one connection's
    requests for at most ``time_slice`` seconds (default 2 ms), and a STEP that needs longer
    is carried on in that connection's next turn, after every other connection with a request
    waiting has had one.  A long STEP is stepped in chunks (``sim.step(k)`` calls, k such
    that the chunk ends the slice at the dearest cost per step measured recently; a dear step
    is forgotten by a tenth per chunk), and a sliced STEP gives bit for bit the state of one
    ``sim.step(n)`` call: the kernels keep nothing between calls that the state does not hold
    (``tests/test_hil.py`` checks it against uninterrupted calls).  So a request waits at most one slice for every other
    connection that has work, plus its own work; a slice overruns only when the cost per step
    jumps within a chunk (an implicit integrator's sub-step fallback), by at most that chunk.
    One thread rather than one per client: the compiled kernels release the GIL, but the
    Python around them (parsing, packing, the façade) holds it, so threads' turns would be
    whatever the operating system and the GIL give, not bounded slices; a process per client would pay a kernel load and a simulation
    each, on a machine with few cores.  Slices in one thread give a bound this docstring can
    state.  ``max_steps_per_request`` now bounds the size of a request, not the server's time.

Limits
    - ``max_clients`` (default 256): connections served at once.  One more is accepted, sent
      ERROR 10 and closed, so a client can tell a full server from a dead one (the
      :class:`Client` raises :class:`ServerError` with code 10, as for 11 below).
    - ``idle_timeout`` (default 60 s; ``math.inf``: never): a connection with no request in
      progress, no reply unsent and no partial message for that long gets ERROR 11 and is
      closed.
    - ``partial_timeout`` (default 2 s): a message must be complete within that many seconds
      of its first byte (for a message that arrives while the request before it is being
      served: of that request's reply); otherwise ERROR 5 and the connection is closed.
      The server checks a header's magic and length as soon as the header is in, before
      waiting for the payload.
    - ``send_timeout`` (default 1 s): replies are written without blocking; a connection
      whose replies do not all fit its socket buffer gets no further request served, and is
      closed ``send_timeout`` seconds after the first reply that did not fit unless by then
      it has read them all.  The other connections are served meanwhile.
    - ``max_steps_per_request`` (default 100 000, at most 2**32 - 1): steps one STEP may ask for.
    :attr:`Server.counts` counts what happened (accepted, refused, closed for each reason,
    requests, turns that left a STEP unfinished).

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

import collections
import errno
import math
import numbers
import os
import resource
import selectors
import socket
import stat
import struct
import threading
import time
import warnings

import numpy as np

from rtrigid.backends.buffers import SOLVER_HALVINGS, SOLVER_MAX_ITER
from rtrigid.simulation import Simulation, SimulationError
from rtrigid.validate import as_scalar, as_vector


MAGIC = b"RTRG"
VERSION = 2
HELLO, STEP, STATE, RESET, SET_STATE = 1, 2, 3, 4, 5
REPLY = 0x80
ERROR = 0xFF
HEADER = struct.Struct("<4sBBHII")
STEP_HEAD = struct.Struct("<IIII")  # n_steps, n_loads, n_controls, n_joint_forces
LOAD = struct.Struct("<I6d")        # body, force xyz, torque xyz: 52 bytes
CONTROL = struct.Struct("<Id")      # actuator, control: 12 bytes
JOINT_FORCE = struct.Struct("<I")   # joint, then one f64 per rate of that joint
SET_STATE_HEAD = struct.Struct("<II")  # nq given (0 or nq), nv given (0 or nv)
STATE_HEAD = struct.Struct("<dQIIII")  # t, steps, n_bodies, nq, nv, n_sensor_values
HELLO_HEAD = struct.Struct("<IdIIIIII")  # n_bodies, dt, max_steps, joints, actuators,
#                                          sensors, nq, nv
JOINT_ROW = struct.Struct("<iIIIIIdd")  # parent, child, qpos at, nq, qvel at, nv, lower, upper
ACTUATOR_ROW = struct.Struct("<I5d")    # joint, gear, ctrl lo, hi, force lo, hi
SENSOR_ROW = struct.Struct("<I3dI")     # body, point (body axes), values
ERROR_HEAD = struct.Struct("<H")
STATE_WIDTH = 13
IMU_WIDTH = 6

ERRORS = {1: "bad magic", 2: "bad version", 3: "unknown kind", 4: "too long", 5: "truncated",
          6: "bad size", 7: "bad value", 8: "step failed", 9: "internal error",
          10: "server full", 11: "idle"}
(E_MAGIC, E_VERSION, E_KIND, E_TOO_LONG, E_TRUNCATED, E_SIZE, E_VALUE, E_STEP,
 E_INTERNAL, E_FULL, E_IDLE) = range(1, 12)
FATAL = (E_MAGIC, E_TOO_LONG, E_TRUNCATED, E_FULL, E_IDLE)  # the server closes after these
MAX_STEPS_LIMIT = 2 ** 32 - 1  # n_steps is a u32 on the wire


class ServerError(RuntimeError):
    """The server refused a request (``code`` is a key of :data:`ERRORS`)."""

    def __init__(self, code, message):
        super().__init__(f"server error {code} ({ERRORS.get(code, '?')}): {message}")
        self.code = code


class _Refusal(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _message(kind, seq, payload=b"", version=VERSION):
    return HEADER.pack(MAGIC, version, kind, 0, seq, len(payload)) + payload


def _error(seq, code, text, version=VERSION):
    return _message(ERROR, seq, ERROR_HEAD.pack(code) + text.encode("utf-8", "replace")[:1000],
                    version)


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


def _unix_listener(path, backlog=128):
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
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


class _Connection:
    """One client: its bytes in and out, its request in progress, its simulation."""

    __slots__ = ("sock", "buf", "out", "sim", "job", "closing", "dead", "queued", "events",
                 "since", "deadline", "why")

    def __init__(self, sock, now):
        self.sock = sock
        self.buf = bytearray()   # received, not yet served: whole messages, then a partial one
        self.out = bytearray()   # replies not yet taken by the socket
        self.sim = None          # made on the first request that needs one
        self.job = None          # the STEP in progress
        self.closing = False     # close once ``out`` is sent
        self.dead = False
        self.queued = False      # in the server's run queue
        self.events = selectors.EVENT_READ
        self.since = now         # idle since / first byte of the partial message / stuck since
        self.deadline = math.inf
        self.why = None          # what the deadline is for: "idle", "partial" or "send"


class _Job:
    """A STEP being served: what is left of it and how to undo it."""

    __slots__ = ("seq", "left", "loads", "before")

    def __init__(self, seq, left, loads, before):
        self.seq, self.left, self.loads, self.before = seq, left, loads, before


def _seconds(value, name, *, allow_inf=False):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected seconds > 0, got {value!r}")
    x = float(value)
    if not (x > 0.0 and (math.isfinite(x) or (allow_inf and x == math.inf))):
        raise ValueError(f"{name}: expected seconds > 0{' (inf: never)' if allow_inf else ''}"
                         f", got {value!r}")
    return x


def _count(value, name, lo, hi):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name}: expected an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def check_limits(*, max_clients=256, idle_timeout=60.0, partial_timeout=2.0, send_timeout=1.0,
                 time_slice=0.002, max_steps_per_request=100_000):
    """The server's limits, checked (``ValueError`` naming the field); defaults as documented.

    Room for ``max_clients`` connections is made here: the process's soft limit on open files
    is raised towards its hard limit if it is too low, and if that is not enough the value is
    refused, rather than the server failing to accept once it is busy.
    """
    out = {"max_clients": _count(max_clients, "max_clients", 1, 1 << 20),
           "idle_timeout": _seconds(idle_timeout, "idle_timeout", allow_inf=True),
           "partial_timeout": _seconds(partial_timeout, "partial_timeout"),
           "send_timeout": _seconds(send_timeout, "send_timeout"),
           "time_slice": _seconds(time_slice, "time_slice"),
           "max_steps_per_request": _count(max_steps_per_request, "max_steps_per_request", 1,
                                           MAX_STEPS_LIMIT)}
    need = out["max_clients"] + _SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard == resource.RLIM_INFINITY or hard >= need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        else:
            raise ValueError(f"max_clients: {out['max_clients']} connections need about {need} "
                             f"open files; this process may have {hard} (ulimit -n)")
    return out


_SPARE_FDS = 64         # files the process needs besides the connections (listener, modules)
_ACCEPTS_PER_TURN = 64  # a flood of connections still lets requests through between batches
_OUT_HIGH = 1 << 16     # a turn stops producing replies once this many bytes wait to be sent
_SPARE_SIMS = 8         # simulations of closed connections kept for the next ones
_COST_MEMORY = 0.9      # see Server._work


def _replica(sim):
    """A new Simulation that steps exactly like ``sim`` (restore it to one of sim's snapshots;
    the snapshot's fingerprint check refuses the restore if anything that matters differs)."""
    return Simulation(sim.model, sim.integrator, sim.dt, options=sim.options,
                      max_iter=int(sim.backend.solver[SOLVER_MAX_ITER]),
                      max_halvings=int(sim.backend.solver[SOLVER_HALVINGS]),
                      step_budget=sim.step_budget,
                      max_steps_per_advance=sim.max_steps_per_advance)


def _joint_rows(sim):
    """The served simulation's joints in handle order: (name, kind, parent, child, qpos at,
    nq, qvel at, nv, lower, upper), positions in the layout of ``sim.qpos()``/``qvel()``."""
    by_name = {j.name: (b, j) for b, j in enumerate(sim.backend.joints)}
    rows, qat, vat = [], 0, 0
    for name in sim.joint_names:
        child, j = by_name[name]
        nq, nv = len(sim.joint_position(name)), len(sim.joint_velocity(name))
        lower, upper = getattr(j, "limits", None) or (-math.inf, math.inf)
        rows.append((name, j.kind, j.parent, child, qat, nq, vat, nv, lower, upper))
        qat, vat = qat + nq, vat + nv
    return rows


def _actuator_rows(sim):
    """The served simulation's actuators in model order: (name, kind, joint handle, gear,
    ctrl range, force range)."""
    unbounded = (-math.inf, math.inf)
    return [(a.name, a.kind, a.joint, a.gear, *(a.ctrl_range or unbounded),
             *(a.force_range or unbounded)) for a in sim.model.actuators]


def _imus(sim, imus):
    """IMU sensors as (name, body, point_body): ``imus`` lists bodies (name or index) or
    (body, point_body) pairs; each is named ``imu:BODY`` (``imu:BODY@x,y,z`` off the centre)."""
    out, names = [], set()
    for item in imus or ():
        body, point = (item, (0.0, 0.0, 0.0)) if isinstance(item, (str, int, np.integer)) \
            else item
        b = sim.body_index(body)
        point = _finite3(point, f"imus[{body!r}] point")
        name = f"imu:{sim.names[b]}" + ("" if point == (0.0, 0.0, 0.0)
                                        else "@{:g},{:g},{:g}".format(*point))
        if name in names:
            raise ValueError(f"imus: {name} given twice")
        names.add(name)
        out.append((name, b, np.array(point)))
    return out


class Server:
    """Serve a Simulation to lock-step clients (protocol in the module docstring).

    ``port=0`` picks a free port; :attr:`address` tells which.  ``unix=PATH`` listens on a
    Unix-domain socket at PATH instead of TCP (``host`` and ``port`` are then ignored;
    :attr:`address` is the path, removed again by :meth:`stop`).  ``spin``: seconds to
    busy-poll for the next request before sleeping.  ``max_clients``, ``idle_timeout``,
    ``partial_timeout``, ``send_timeout``, ``time_slice`` and ``max_steps_per_request``: see
    Limits and Turns in the module docstring.  :meth:`start` runs the server in a daemon
    thread (tests, embedding), :meth:`serve_forever` in the caller's; :meth:`stop` ends
    either and closes every socket.  Each connection steps its own copy of ``sim`` as it is
    now; ``sim`` itself is never stepped.  :attr:`counts`: what the server has done.
    ``imus``: bodies (or (body, point_body) pairs) whose IMU readings every state reply
    carries (see Sensors in the module docstring).
    """

    def __init__(self, sim, host="127.0.0.1", port=0, *, scenario="",
                 max_steps_per_request=100_000, partial_timeout=2.0, send_timeout=1.0,
                 idle_timeout=60.0, max_clients=256, time_slice=0.002, unix=None, spin=0.0,
                 imus=()):
        if not isinstance(sim, Simulation):
            raise ValueError(f"sim: expected an rtrigid Simulation, got {type(sim).__name__}")
        self.spin = _as_spin(spin)
        limits = check_limits(max_clients=max_clients, idle_timeout=idle_timeout,
                              partial_timeout=partial_timeout, send_timeout=send_timeout,
                              time_slice=time_slice,
                              max_steps_per_request=max_steps_per_request)
        self.max_clients = limits["max_clients"]
        self.idle_timeout = limits["idle_timeout"]
        self.partial_timeout = limits["partial_timeout"]
        self.send_timeout = limits["send_timeout"]
        self.time_slice = limits["time_slice"]
        self.max_steps_per_request = limits["max_steps_per_request"]
        self.sim = sim
        self.scenario = str(scenario)
        self._initial = sim.snapshot()
        first = _replica(sim)
        first.restore(self._initial)  # refuses here, not per connection, if the copy differs
        self._spare = [first]
        self._own_loads = {b: sim.applied(b) for b in range(sim.nb)
                           if any(np.any(a) for a in sim.applied(b))}
        self._joints = _joint_rows(sim)
        self._actuators = _actuator_rows(sim)
        self._imus = _imus(sim, imus)
        self._joint_nv = [row[7] for row in self._joints]
        self._max_payload = max(
            STEP_HEAD.size + LOAD.size * sim.nb + CONTROL.size * len(self._actuators)
            + sum(JOINT_FORCE.size + 8 * nv for nv in self._joint_nv),
            SET_STATE_HEAD.size + 8 * (sim.nq + sim.nv))
        self._hello = self._describe()
        n_sensor_values = IMU_WIDTH * len(self._imus)
        self._state_values = np.empty(STATE_WIDTH * sim.nb + sim.nq + sim.nv + n_sensor_values)
        self._state = self._state_values[:STATE_WIDTH * sim.nb].reshape(sim.nb, STATE_WIDTH)
        self._state_head = (sim.nb, sim.nq, sim.nv, n_sensor_values)
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
            self._listener = _unix_listener(unix, backlog)
            self.address = self._unix_path = os.fspath(unix)
        else:
            self._listener = socket.create_server((host, port), backlog=backlog)
            self.address = self._listener.getsockname()[:2]
            self._unix_path = None
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._thread = None
        self._conns = {}
        self._runq = collections.deque()
        self._again = None           # the connection whose turn just ended, still with work
        self._next_check = math.inf  # no deadline of any connection is earlier than this
        self._cost = None            # seconds per step, measured on the last chunk
        self._accept_paused = False
        self.counts = dict.fromkeys(
            ("accepted", "refused_full", "closed_idle", "closed_partial", "closed_send",
             "send_stalled", "requests", "preempted"), 0)

    def _describe(self):
        """The HELLO reply's payload (module docstring)."""
        sim = self.sim
        out = [HELLO_HEAD.pack(sim.nb, sim.dt, self.max_steps_per_request, len(self._joints),
                               len(self._actuators), len(self._imus), sim.nq, sim.nv),
               _pack_strings([sim.integrator, self.scenario, *sim.names])]
        for name, kind, *row in self._joints:
            out += [_pack_strings([name, kind]), JOINT_ROW.pack(*row)]
        for name, kind, *row in self._actuators:
            out += [_pack_strings([name, kind]), ACTUATOR_ROW.pack(*row)]
        for name, b, point in self._imus:
            out += [_pack_strings([name, "imu"]), SENSOR_ROW.pack(b, *point, IMU_WIDTH)]
        return b"".join(out)

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
        sel = self._sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        spin_until = 0.0  # busy-poll (select without blocking) until then
        try:
            while not self._stopping:
                if self._runq or self._again is not None:
                    timeout = 0  # work waits: only look for what else came in
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
                            key.data.queued or key.data.job or key.data.closing):
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
    def _accept(self):
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
                self.counts["refused_full"] += 1
                try:
                    sock.send(_error(0, E_FULL, f"{self.max_clients} clients already "
                                     "connected (max_clients); try again later"))
                except OSError:
                    pass
                _close(sock)
                continue
            self.counts["accepted"] += 1
            conn = _Connection(sock, time.monotonic())
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)
            self._settle(conn)

    def _resume_accepting(self):
        if time.monotonic() >= self._accept_paused:
            self._sel.register(self._listener, selectors.EVENT_READ, "listen")
            self._accept_paused = False

    def _drop(self, conn):
        if conn.dead:
            return
        conn.dead = True
        self._conns.pop(conn.sock.fileno(), None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        _close(conn.sock)
        if conn.sim is not None and len(self._spare) < _SPARE_SIMS:
            self._spare.append(conn.sim)  # restored to the start before it is used again
        conn.sim = conn.job = None

    def _last_words(self, conn, code, text):
        """Queue an error that answers no request, then close once it is sent."""
        conn.out += _error(0, code, text)
        conn.closing = True
        self._flush(conn)
        self._settle(conn)

    def _read(self, conn):
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
            if conn.buf:
                self._last_words(conn, E_TRUNCATED, f"connection closed {len(conn.buf)} bytes "
                                 "into a message")
            else:
                self._drop(conn)
            return
        if not conn.buf:
            conn.since = time.monotonic()  # the first byte of a message
        conn.buf += data
        self._settle(conn)

    def _ready(self, conn):
        """Whether ``conn.buf`` starts with a message to serve (or a header to refuse)."""
        buf = conn.buf
        if len(buf) < HEADER.size:
            return False
        magic, _, _, _, _, length = HEADER.unpack_from(buf)
        return magic != MAGIC or length > self._max_payload or len(buf) >= HEADER.size + length

    def _settle(self, conn, later=False):
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
        elif conn.buf:
            events, deadline, why = (selectors.EVENT_READ, conn.since + self.partial_timeout,
                                     "partial")
        else:
            events, deadline, why = (selectors.EVENT_READ, conn.since + self.idle_timeout,
                                     "idle")
        if events != conn.events:
            self._sel.modify(conn.sock, events, conn)
            conn.events = events
        conn.deadline, conn.why = deadline, why
        if deadline < self._next_check:
            self._next_check = deadline

    def _flush(self, conn):
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

    def _expire(self):
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
                    self._last_words(conn, E_TRUNCATED, "message incomplete "
                                     f"{self.partial_timeout:g} s after its first byte")
                elif conn.why == "idle":
                    self.counts["closed_idle"] += 1
                    self._last_words(conn, E_IDLE, f"no request for {self.idle_timeout:g} s")
            if not conn.dead and conn.deadline < self._next_check:
                self._next_check = conn.deadline

    # -- turns ---------------------------------------------------------------------------------
    def _turn(self, conn):
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

    def _serve_next(self, conn):
        buf = conn.buf
        magic, version, kind, flags, seq, length = HEADER.unpack_from(buf)
        if magic != MAGIC:
            self._last_words_for(conn, seq, E_MAGIC, f"magic {bytes(magic)!r}, expected "
                                 f"{MAGIC!r}")
            return
        if length > self._max_payload:
            self._last_words_for(conn, seq, E_TOO_LONG, f"length {length} over the limit "
                                 f"{self._max_payload}")
            return
        payload = bytes(buf[HEADER.size:HEADER.size + length])
        del buf[:HEADER.size + length]
        self.counts["requests"] += 1
        if version != VERSION:
            # in the request's own version: an ERROR reads the same in every version, so an
            # older client shows this message instead of failing on the header
            conn.out += _error(seq, E_VERSION, f"protocol version {version}; this server speaks "
                               f"version {VERSION} only (joints, actuators and sensors): use "
                               f"a client of version {VERSION} (rtrigid.io.hil.Client)", version)
            return
        try:
            if flags:
                raise _Refusal(E_VALUE, f"flags {flags:#x}; must be 0")
            if kind == STEP:
                n, loads, controls, forces = self._parse_step(payload)
                self._begin_step(conn, seq, n, loads, controls, forces)
                return
            if kind == SET_STATE:
                self._set_state(conn, payload)
                conn.out += _message(SET_STATE | REPLY, seq, self._pack_state(conn.sim))
                return
            if kind not in (HELLO, STATE, RESET):
                raise _Refusal(E_KIND, f"unknown kind {kind}")
            if payload:
                raise _Refusal(E_SIZE, f"kind {kind} takes no payload, got {len(payload)} bytes")
            if kind == HELLO:
                conn.out += _message(HELLO | REPLY, seq, self._hello)
                return
            sim = self._sim_of(conn)
            if kind == RESET:
                sim.restore(self._initial)
            conn.out += _message(kind | REPLY, seq, self._pack_state(sim))
        except _Refusal as exc:
            conn.out += _error(seq, exc.code, str(exc))
        except Exception as exc:  # the server outlives any request
            conn.out += _error(seq, E_INTERNAL, f"{type(exc).__name__}: {exc}")

    def _last_words_for(self, conn, seq, code, text):
        conn.out += _error(seq, code, text)
        conn.closing = True

    def _sim_of(self, conn):
        if conn.sim is None:
            sim = self._spare.pop() if self._spare else _replica(self.sim)
            sim.restore(self._initial)
            conn.sim = sim
        return conn.sim

    def _parse_step(self, payload):
        if len(payload) < STEP_HEAD.size:
            raise _Refusal(E_SIZE, f"STEP payload of {len(payload)} bytes; needs at least "
                           f"{STEP_HEAD.size}")
        n, n_loads, n_controls, n_forces = STEP_HEAD.unpack_from(payload)
        at = STEP_HEAD.size + LOAD.size * n_loads + CONTROL.size * n_controls
        if len(payload) < at + JOINT_FORCE.size * n_forces:
            raise _Refusal(E_SIZE, f"STEP with {n_loads} loads, {n_controls} controls and "
                           f"{n_forces} joint forces needs more than its {len(payload)} bytes")
        if n > self.max_steps_per_request:
            raise _Refusal(E_VALUE, f"n_steps {n} over max_steps_per_request "
                           f"{self.max_steps_per_request}")
        loads = list(LOAD.iter_unpack(payload[STEP_HEAD.size:STEP_HEAD.size
                                              + LOAD.size * n_loads]))
        _check_records("body", [r[0] for r in loads], self.sim.nb, "n_bodies")
        for record in loads:
            if not all(map(math.isfinite, record[1:])):
                raise _Refusal(E_VALUE, f"loads of body {record[0]} must be finite, got "
                               f"{list(record[1:])}")
        controls = list(CONTROL.iter_unpack(payload[at - CONTROL.size * n_controls:at]))
        _check_records("actuator", [a for a, _ in controls], len(self._actuators),
                       "n_actuators")
        for a, u in controls:
            if not math.isfinite(u):
                raise _Refusal(E_VALUE, f"control of actuator {a} must be finite, got {u}")
        forces = []
        for _ in range(n_forces):  # sizes known once each joint is: checked record by record
            if len(payload) < at + JOINT_FORCE.size:
                raise _Refusal(E_SIZE, f"STEP payload ends inside its joint forces, at byte {at}")
            (j,) = JOINT_FORCE.unpack_from(payload, at)
            if j >= len(self._joints):
                raise _Refusal(E_VALUE, f"joint {j} out of range (n_joints "
                               f"{len(self._joints)})")
            nv = self._joint_nv[j]
            at += JOINT_FORCE.size
            if nv == 0 or len(payload) < at + 8 * nv:
                raise _Refusal(E_VALUE if nv == 0 else E_SIZE,
                               f"joint {j} has no rates to take a force" if nv == 0 else
                               f"STEP payload ends inside the force of joint {j}")
            value = struct.unpack_from(f"<{nv}d", payload, at)
            at += 8 * nv
            if not all(map(math.isfinite, value)):
                raise _Refusal(E_VALUE, f"force on joint {j} must be finite, got {list(value)}")
            forces.append((j, value))
        _check_records("joint", [j for j, _ in forces], len(self._joints), "n_joints")
        if at != len(payload):
            raise _Refusal(E_SIZE, f"STEP payload has {len(payload) - at} bytes after its "
                           "records")
        return n, loads, controls, forces

    def _begin_step(self, conn, seq, n, loads, controls=(), forces=()):
        sim = self._sim_of(conn)
        before = sim.snapshot()
        try:
            for a, u in controls:
                sim.set_control(a, u)
            for j, value in forces:
                sim.set_joint_force(j, value)
            for b, fx, fy, fz, tx, ty, tz in loads:
                sim.apply_force(b, (fx, fy, fz))
                sim.apply_torque(b, (tx, ty, tz))
        except Exception as exc:
            sim.restore(before)
            code = E_VALUE if isinstance(exc, ValueError) else E_STEP
            raise _Refusal(code, f"{type(exc).__name__}: {exc}") from None
        conn.job = _Job(seq, n, loads, before)

    def _set_state(self, conn, payload):
        """SET_STATE: qpos and/or qvel, all or nothing."""
        sim = self._sim_of(conn)
        if len(payload) < SET_STATE_HEAD.size:
            raise _Refusal(E_SIZE, f"SET_STATE payload of {len(payload)} bytes; needs at "
                           f"least {SET_STATE_HEAD.size}")
        nq, nv = SET_STATE_HEAD.unpack_from(payload)
        if nq not in (0, sim.nq) or nv not in (0, sim.nv):
            raise _Refusal(E_VALUE, f"SET_STATE of {nq} coordinates and {nv} rates; this "
                           f"simulation has nq {sim.nq} and nv {sim.nv} (0: leave them)")
        want = SET_STATE_HEAD.size + 8 * (nq + nv)
        if len(payload) != want:
            raise _Refusal(E_SIZE, f"SET_STATE of {nq} + {nv} values needs {want} bytes, got "
                           f"{len(payload)}")
        values = np.frombuffer(payload, "<f8", offset=SET_STATE_HEAD.size)
        before = sim.snapshot()
        try:
            if nq:
                sim.set_qpos(values[:nq])
            if nv:
                sim.set_qvel(values[nq:])
        except ValueError as exc:
            sim.restore(before)
            raise _Refusal(E_VALUE, str(exc)) from None

    def _work(self, conn, end):
        """Step ``conn``'s STEP until it is done or the slice ending at ``end`` is used."""
        job, sim = conn.job, conn.sim
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
                self._cost = max(cost, _COST_MEMORY * self._cost if self._cost else cost, 1e-9)
                if t1 >= end:
                    break
        except Exception as exc:
            sim.restore(job.before)
            conn.job = None
            conn.out += _error(job.seq, E_STEP, f"{type(exc).__name__}: {exc}")
            return
        if job.left:
            return
        conn.job = None
        # back to the simulation's own loads; they never change while it is served (the
        # initial snapshot that RESET restores holds the same ones)
        for record in job.loads:
            b = record[0]
            sim.clear_applied(b)
            if b in self._own_loads:
                force, torque = self._own_loads[b]
                sim.apply_force(b, force)
                sim.apply_torque(b, torque)
        conn.out += _message(STEP | REPLY, job.seq, self._pack_state(sim))

    def _pack_state(self, sim):
        out = self._state
        for b in range(sim.nb):
            out[b, 0:3], out[b, 3:7] = sim.pose(b)
            out[b, 7:10], out[b, 10:13] = sim.velocity(b)
        values = self._state_values
        at = STATE_WIDTH * sim.nb
        values[at:at + sim.nq] = sim.qpos()
        at += sim.nq
        values[at:at + sim.nv] = sim.qvel()
        at += sim.nv
        for _, b, point in self._imus:
            values[at:at + 3], values[at + 3:at + 6] = sim.imu(b, point)
            at += IMU_WIDTH
        return STATE_HEAD.pack(sim.t, sim.steps_taken, *self._state_head) + values.tobytes()


def _check_records(what, indices, count, count_name):
    """Each record's index in range and none repeated, or a refusal naming ``what``."""
    for i in indices:
        if i >= count:
            raise _Refusal(E_VALUE, f"{what} {i} out of range ({count_name} {count})")
    if len(set(indices)) != len(indices):
        raise _Refusal(E_VALUE, f"{what} repeated in {indices}")


def _close(sock):
    """Close without a reset: what the peer sent and nobody read would make the kernel answer
    with RST, and a peer may then lose the last reply still unread in its buffer."""
    try:
        for _ in range(16):
            if not sock.recv(1 << 16, socket.MSG_DONTWAIT):
                break
    except OSError:
        pass
    sock.close()


class Client:
    """Drive a :class:`Server`: ``step``, ``state``, ``reset``, ``set_state``; each returns a
    state dict.

    ``Client(host, port)`` over TCP, or ``Client(unix=PATH)`` to a server on a Unix-domain
    socket; ``spin``: seconds to busy-poll for each reply before sleeping (module docstring).
    A state dict holds ``t`` (float), ``steps`` (int), ``poses`` (``(n_bodies, 7)``:
    ``x, y, z, q0, q1, q2, q3``), ``velocities`` (``(n_bodies, 6)``: world ``v`` then world
    angular velocity), ``qpos`` (nq,), ``qvel`` (nv,) (``Simulation.qpos``/``qvel``),
    ``sensors`` (sensor name -> its readings: ``imu:BODY`` -> gyro xyz, specific force xyz,
    body axes) and ``names``.  After :meth:`__init__`, :attr:`names`, :attr:`dt`,
    :attr:`integrator`, :attr:`scenario`, :attr:`nq`, :attr:`nv` and :attr:`joints`,
    :attr:`actuators`, :attr:`sensors` (lists of dicts) describe the served simulation.  A
    refused request
    raises :class:`ServerError`; so does the server's notice before it hangs up (code 10: full,
    11: idle), after which this client is closed.
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
        self._read_hello(hello)

    def _read_hello(self, hello):
        (nb, self.dt, self.max_steps_per_request, n_joints, n_actuators, n_sensors, self.nq,
         self.nv) = HELLO_HEAD.unpack_from(hello)
        at = HELLO_HEAD.size
        self.integrator, self.scenario, *self.names = _unpack_strings(hello, at, nb + 2)
        at += sum(2 + len(x.encode()) for x in (self.integrator, self.scenario, *self.names))
        self.nb = nb

        def rows(count, row, keys):
            nonlocal at
            out = []
            for _ in range(count):
                name, kind = _unpack_strings(hello, at, 2)
                at += 4 + len(name.encode()) + len(kind.encode())
                out.append({"name": name, "kind": kind,
                            **dict(zip(keys, row.unpack_from(hello, at)))})
                at += row.size
            return out

        self.joints = rows(n_joints, JOINT_ROW, ("parent", "child", "qpos_at", "nq", "qvel_at",
                                                 "nv", "lower", "upper"))
        for j in self.joints:
            j["limits"] = (j.pop("lower"), j.pop("upper"))
        self.actuators = rows(n_actuators, ACTUATOR_ROW, ("joint", "gear", "ctrl_lo", "ctrl_hi",
                                                          "force_lo", "force_hi"))
        for a in self.actuators:
            a["ctrl_range"] = (a.pop("ctrl_lo"), a.pop("ctrl_hi"))
            a["force_range"] = (a.pop("force_lo"), a.pop("force_hi"))
        self.sensors = rows(n_sensors, SENSOR_ROW, ("body", "px", "py", "pz", "width"))
        for sensor in self.sensors:
            sensor["point"] = (sensor.pop("px"), sensor.pop("py"), sensor.pop("pz"))
        self.joint_names = [j["name"] for j in self.joints]
        self.actuator_names = [a["name"] for a in self.actuators]

    def close(self):
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def step(self, n=1, forces=None, *, controls=None, joint_forces=None) -> dict:
        """Run ``n`` steps; return the state after.

        ``forces`` maps a body (name or index) to ``(force, torque)``, both world-frame
        3-vectors (force at the centre of mass), or to ``{"force": f, "torque": tau}`` with
        either key optional; they act for these ``n`` steps only.  ``controls`` maps an
        actuator (name or index) to its control, or lists every actuator's control in model
        order (``Simulation.set_control``/``set_controls``); ``joint_forces`` maps a joint
        (name or handle) to its generalized force (a number, or one per rate:
        ``Simulation.set_joint_force``).  Controls and joint forces are held from this request
        on, until a request changes them, as in process.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not (
                0 <= n <= self.max_steps_per_request):
            raise ValueError(f"n: expected an integer in [0, {self.max_steps_per_request}], "
                             f"got {n!r}")
        loads = self._pack_loads(forces or {})
        controls = self._pack_controls(controls)
        joint_forces = self._pack_joint_forces(joint_forces or {})
        payload = STEP_HEAD.pack(int(n), len(loads), len(controls), len(joint_forces)) \
            + b"".join(loads + controls + joint_forces)
        return self._state_dict(self._request(STEP, payload))

    def set_state(self, qpos=None, qvel=None) -> dict:
        """Set the generalized coordinates and/or rates (``Simulation.set_qpos``/``set_qvel``;
        None leaves them); both are checked before either is set."""
        parts = []
        for name, value, n in (("qpos", qpos, self.nq), ("qvel", qvel, self.nv)):
            if value is None:
                parts.append(np.empty(0))
                continue
            parts.append(as_vector(value, n, name))
        payload = SET_STATE_HEAD.pack(parts[0].size, parts[1].size) \
            + np.concatenate(parts).astype("<f8").tobytes()
        return self._state_dict(self._request(SET_STATE, payload))

    def _index(self, what, key, names):
        """An actuator's or joint's index from its name or index (``what``: the argument)."""
        if isinstance(key, str):
            if key in names:
                return names.index(key)
            raise ValueError(f"{what}: no {what[:-1].replace('joint_force', 'joint')} named "
                             f"{key!r}; known: {names}")
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and (
                0 <= key < len(names)):
            return int(key)
        raise ValueError(f"{what}: {key!r} is neither a name nor an index < {len(names)}")

    def _pack_controls(self, controls):
        if controls is None:
            return []
        if not hasattr(controls, "items"):
            controls = dict(enumerate(as_vector(controls, len(self.actuators), "controls")))
        out, seen = [], set()
        for key, u in controls.items():
            a = self._index("controls", key, self.actuator_names)
            if a in seen:
                raise ValueError(f"controls: actuator {self.actuator_names[a]!r} given twice")
            seen.add(a)
            u = as_scalar(u, f"controls[{key!r}]")
            out.append(CONTROL.pack(a, u))
        return out

    def _pack_joint_forces(self, joint_forces):
        if not hasattr(joint_forces, "items"):
            raise ValueError(f"joint_forces: expected a mapping joint -> force, got "
                             f"{type(joint_forces).__name__}")
        out, seen = [], set()
        for key, value in joint_forces.items():
            j = self._index("joint_forces", key, self.joint_names)
            if j in seen:
                raise ValueError(f"joint_forces: joint {self.joint_names[j]!r} given twice")
            seen.add(j)
            nv = self.joints[j]["nv"]
            if nv == 0:
                raise ValueError(f"joint_forces[{key!r}]: joint {self.joint_names[j]!r} has no "
                                 "rates to take a force")
            if np.ndim(value) == 0:
                value = [value]
            value = as_vector(value, nv, f"joint_forces[{key!r}]")
            out.append(JOINT_FORCE.pack(j) + value.astype("<f8").tobytes())
        return out

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
        self._seq = self._seq % 0xFFFFFFFF + 1  # 1 .. 2**32-1: seq 0 marks the server's notices
        try:
            self._sock.sendall(_message(kind, self._seq, payload))
        except (BrokenPipeError, ConnectionResetError):
            # the server hung up; it may have said why first (a full server, an idle timeout)
            notice = self._notice()
            self.close()
            if notice is not None:
                raise notice from None
            raise
        deadline = time.perf_counter_ns() + self._spin_ns if self._spin_ns else 0
        got = 0
        while got < HEADER.size:
            got = self._recv_some(got, deadline)
        magic, version, rkind, _, seq, length = HEADER.unpack_from(self._buf)
        notice = rkind == ERROR and seq == 0  # the server's last word before it hangs up
        if magic != MAGIC or version != VERSION or (seq != self._seq and not notice) or (
                length > 1 << 24):
            self.close()
            raise ConnectionError(f"unexpected reply header (magic {magic!r}, version "
                                  f"{version}, seq {seq} for {self._seq}, length {length})")
        end = HEADER.size + length
        if end > len(self._buf):
            self._buf.extend(bytes(end - len(self._buf)))  # no view of it is held here
            self._view = memoryview(self._buf)
        while got < end:
            got = self._recv_some(got, deadline)
        if got > end and not notice:  # one request, one reply: nothing may follow it
            self.close()
            raise ConnectionError(f"{got - end} unexpected bytes after a reply")
        body = bytearray(self._view[HEADER.size:end])
        if rkind == ERROR:
            (code,) = ERROR_HEAD.unpack_from(body)
            if notice:
                self.close()  # the server has closed its end; nothing more will come
            raise ServerError(code, bytes(body[ERROR_HEAD.size:]).decode("utf-8", "replace"))
        if rkind != kind | REPLY:
            self.close()
            raise ConnectionError(f"reply kind {rkind} to a request of kind {kind}")
        return body

    def _notice(self):
        """The server's last word (an ERROR with seq 0) if it is already here, else None."""
        try:
            data = self._sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except OSError:
            return None
        if len(data) < HEADER.size:
            return None
        magic, version, kind, _, seq, length = HEADER.unpack_from(data)
        if (magic, version, kind, seq) != (MAGIC, VERSION, ERROR, 0) or (
                len(data) < HEADER.size + length or length < ERROR_HEAD.size):
            return None
        (code,) = ERROR_HEAD.unpack_from(data, HEADER.size)
        return ServerError(code, data[HEADER.size + ERROR_HEAD.size:HEADER.size + length]
                           .decode("utf-8", "replace"))

    def _state_dict(self, body):
        t, steps, nb, nq, nv, _ = STATE_HEAD.unpack_from(body)
        values = np.frombuffer(body, dtype="<f8", offset=STATE_HEAD.size)
        # views of a copy made for this reply alone: nothing else holds it
        bodies = values[:nb * STATE_WIDTH].reshape(nb, STATE_WIDTH)
        at = nb * STATE_WIDTH
        qpos, qvel = values[at:at + nq], values[at + nq:at + nq + nv]
        at += nq + nv
        sensors = {}
        for sensor in self.sensors:
            sensors[sensor["name"]] = values[at:at + sensor["width"]]
            at += sensor["width"]
        return {"t": t, "steps": steps, "poses": bodies[:, :7], "velocities": bodies[:, 7:],
                "qpos": qpos, "qvel": qvel, "sensors": sensors, "names": self.names}


def parse_imu(text):
    """``BODY`` or ``BODY@x,y,z`` (a point in body axes from the centre of mass)."""
    body, at, point = text.partition("@")
    if not at:
        return body
    try:
        point = tuple(float(c) for c in point.split(","))
    except ValueError:
        point = ()
    if len(point) != 3:
        raise ValueError(f"imu: expected BODY or BODY@x,y,z, got {text!r}")
    return body, point


def serve_main(args):
    """``rtrigid serve``: build the scenario and serve it until interrupted."""
    import signal

    from rtrigid import scenarios

    # the limits are checked before the scenario is built: a typo fails at once, in one line
    limits = check_limits(**{k: getattr(args, k) for k in (
        "max_clients", "idle_timeout", "partial_timeout", "send_timeout", "time_slice")
        if hasattr(args, k)})
    spin = _as_spin(getattr(args, "spin", 0.0))
    imus = [parse_imu(text) for text in getattr(args, "imu", None) or ()]
    sim = scenarios.build(args.scenario, integrator=args.integrator, dt=args.dt,
                          **dict(args.set or []))
    sim.step(0)  # compile before a real-time priority is taken (the Server compiles too)
    if args.rt_priority:
        from rtrigid.io.realtime import set_fifo_priority

        set_fifo_priority(args.rt_priority)
    unix = getattr(args, "unix", None)
    server = Server(sim, args.host, args.port, scenario=args.scenario, unix=unix, spin=spin,
                    imus=imus,
                    **limits)
    where = f"unix:{server.address}" if unix is not None else "{}:{}".format(*server.address)
    print(f"rtrigid serve: {args.scenario} ({sim.integrator}, dt={sim.dt:g}) on {where}",
          flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
