"""The lock-step protocol of :mod:`rtrigid.io.hil`: message codes, record layouts, packing.

The specification follows; the server (:mod:`.server`) and the client (:mod:`.client`)
implement it.

Lock-step stepping over TCP: a server that serves a Simulation, and clients that drive it.

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
    (``tests/io/test_hil.py`` checks it against uninterrupted calls).  So a request waits at most one slice for every other
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

import math
import struct


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


def message(kind, seq, payload=b"", version=VERSION):
    return HEADER.pack(MAGIC, version, kind, 0, seq, len(payload)) + payload


def error(seq, code, text, version=VERSION):
    return message(ERROR, seq, ERROR_HEAD.pack(code) + text.encode("utf-8", "replace")[:1000],
                    version)


def pack_strings(strings):
    out = bytearray()
    for s in strings:
        raw = s.encode("utf-8")
        out += struct.pack("<H", len(raw)) + raw
    return bytes(out)


def unpack_strings(buf, offset, count):
    out = []
    for _ in range(count):
        (size,) = struct.unpack_from("<H", buf, offset)
        offset += 2
        out.append(bytes(buf[offset:offset + size]).decode("utf-8"))
        offset += size
    return out


def finite3(value, name):
    """Three finite floats from a sequence, or ValueError naming ``name``."""
    try:
        x, y, z = (float(c) for c in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected 3 numbers, got {value!r}") from None
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        raise ValueError(f"{name}: must be finite, got {[x, y, z]}")
    return x, y, z


def as_spin(spin):
    try:
        value = float(spin)
    except (TypeError, ValueError):
        raise ValueError(f"spin: expected seconds >= 0, got {spin!r}") from None
    if not (math.isfinite(value) and 0.0 <= value <= 10.0):
        raise ValueError(f"spin: expected seconds in [0, 10], got {spin!r}")
    return value
