"""The lock-step protocol of :mod:`rtrigid.io.hil`: message codes, record layouts, packing.

The specification is ``docs/hil/protocol.md`` (protocol version 2): every message, field,
unit, error code, limit and timeout, with worked examples that ``tests/io/test_hil_spec.py``
runs against a server.  The server (:mod:`.server`) and the client (:mod:`.client`) implement
it; a C reference client ships in ``rtrigid/io/hil/c/``.

In short, for a reader of the code: a stream socket (TCP or Unix-domain); every message is the
16-byte :data:`HEADER` (magic ``RTRG``, version, kind, flags 0, seq, payload length; all
little-endian) and its payload; one reply per request, in order, kind ``request | 0x80`` or
:data:`ERROR` (``u16 code`` + UTF-8 text to the end of the payload; codes in :data:`ERRORS`).
Each connection steps its own copy of the served simulation.  Float64 values travel as raw
IEEE 754 bytes, so stepping through the server is bit-identical to the same calls in process.
"""

from __future__ import annotations

import math
import struct
from typing import Iterable


MAGIC = b"RTRG"
VERSION = 2
HELLO, STEP, STATE, RESET, SET_STATE, KEEPALIVE, RESUME, OBSERVE = 1, 2, 3, 4, 5, 6, 7, 8
REPLY = 0x80
PUSH = 0x89  # a state sent to an observer (no request of kind 9 exists)
ERROR = 0xFF
HEADER = struct.Struct("<4sBBHII")
STEP_HEAD = struct.Struct("<IIII")  # n_steps, n_loads, n_controls, n_joint_forces
LOAD = struct.Struct("<I6d")  # body, force xyz, torque xyz: 52 bytes
CONTROL = struct.Struct("<Id")  # actuator, control: 12 bytes
JOINT_FORCE = struct.Struct("<I")  # joint, then one f64 per rate of that joint
SET_STATE_HEAD = struct.Struct("<II")  # nq given (0 or nq), nv given (0 or nv)
STATE_HEAD = struct.Struct("<dQIIII")  # t, steps, n_bodies, nq, nv, n_sensor_values
HELLO_HEAD = struct.Struct("<IdIIIIII")  # n_bodies, dt, max_steps, joints, actuators,
#                                          sensors, nq, nv
# after HELLO's sensor rows: max_payload, max_clients, idle_timeout (inf: never),
# partial_timeout, send_timeout, time_slice (seconds); a client that reads only the rows
# ignores it
HELLO_LIMITS = struct.Struct("<II4d")
# after the limits: the connection's session token and the grace period (seconds) a session
# waits for RESUME after its connection closes
HELLO_SESSION = struct.Struct("<16sd")
JOINT_ROW = struct.Struct("<iIIIIIdd")  # parent, child, qpos at, nq, qvel at, nv, lower, upper
ACTUATOR_ROW = struct.Struct("<I5d")  # joint, gear, ctrl lo, hi, force lo, hi
SENSOR_ROW = struct.Struct("<I3dI")  # body, point (body axes), values
ERROR_HEAD = struct.Struct("<H")
STATE_WIDTH = 13
IMU_WIDTH = 6

ERRORS = {
    1: "bad magic",
    2: "bad version",
    3: "unknown kind",
    4: "too long",
    5: "truncated",
    6: "bad size",
    7: "bad value",
    8: "step failed",
    9: "internal error",
    10: "server full",
    11: "idle",
    12: "session",
}
(
    E_MAGIC,
    E_VERSION,
    E_KIND,
    E_TOO_LONG,
    E_TRUNCATED,
    E_SIZE,
    E_VALUE,
    E_STEP,
    E_INTERNAL,
    E_FULL,
    E_IDLE,
    E_SESSION,
) = range(1, 13)
FATAL = (E_MAGIC, E_TRUNCATED, E_FULL, E_IDLE)  # the server closes after these
MAX_STEPS_LIMIT = 2**32 - 1  # n_steps is a u32 on the wire


class ServerError(RuntimeError):
    """The server refused a request (``code`` is a key of :data:`ERRORS`)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"server error {code} ({ERRORS.get(code, '?')}): {message}")
        self.code = code


def message(kind: int, seq: int, payload: bytes = b"", version: int = VERSION) -> bytes:
    """A message: the header and ``payload``."""
    return HEADER.pack(MAGIC, version, kind, 0, seq, len(payload)) + payload


def error(seq: int, code: int, text: str, version: int = VERSION) -> bytes:
    """An ERROR reply: ``code`` and ``text`` (UTF-8, cut at 1000 bytes)."""
    return message(
        ERROR, seq, ERROR_HEAD.pack(code) + text.encode("utf-8", "replace")[:1000], version
    )


def pack_strings(strings: Iterable[str]) -> bytes:
    """Each string as a ``u16`` byte count and its UTF-8 bytes."""
    out = bytearray()
    for s in strings:
        raw = s.encode("utf-8")
        out += struct.pack("<H", len(raw)) + raw
    return bytes(out)


def unpack_strings(buf: bytes | bytearray | memoryview, offset: int, count: int) -> list[str]:
    """``count`` strings packed by :func:`pack_strings`, from ``offset`` of ``buf``."""
    out = []
    for _ in range(count):
        (size,) = struct.unpack_from("<H", buf, offset)
        offset += 2
        out.append(bytes(buf[offset : offset + size]).decode("utf-8"))
        offset += size
    return out


def finite3(value: Iterable[float], name: str) -> tuple[float, float, float]:
    """Three finite floats from a sequence, or ValueError naming ``name``."""
    try:
        x, y, z = (float(c) for c in value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected 3 numbers, got {value!r}") from None
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        raise ValueError(f"{name}: must be finite, got {[x, y, z]}")
    return x, y, z


def as_spin(spin: float) -> float:
    """``spin`` (seconds in [0, 10]) as a float; ``ValueError`` naming ``spin`` otherwise."""
    try:
        value = float(spin)
    except (TypeError, ValueError):
        raise ValueError(f"spin: expected seconds >= 0, got {spin!r}") from None
    if not (math.isfinite(value) and 0.0 <= value <= 10.0):
        raise ValueError(f"spin: expected seconds in [0, 10], got {spin!r}")
    return value


# -- streaming over UDP (docs/hil/protocol.md, "Streaming over UDP", stream version 1) -------
# every datagram: HEADER with this magic and version, then exactly `length` bytes of payload
STREAM_MAGIC = b"RTRU"
STREAM_VERSION = 1
COMMAND, SUBSCRIBE, STATS, DESCRIBE = 1, 2, 3, 4  # to the server
STREAM_STATE = COMMAND | REPLY  # a state, sent every `every` ticks to the destination
COMMAND_HEAD = struct.Struct("<III")  # n_loads, n_controls, n_joint_forces
STREAM_STATE_HEAD = struct.Struct("<QII")  # tick, seq of the command in force, status
STATUS_WATCHDOG = 1  # status bit: no command for `watchdog` seconds (held or zeroed)
# after DESCRIBE's rows: rate (Hz), every, watchdog (s), on_silence (0 hold, 1 zero),
# max_payload (the longest datagram payload the server takes)
STREAM_INFO = struct.Struct("<dIdII")
ON_SILENCE = ("hold", "zero")
STATS_COUNTS = (
    "ticks",
    "scheduled_ticks",
    "steps",
    "late_ticks",
    "folded_ticks",
    "overruns",
    "commands_applied",
    "commands_superseded",
    "dropped_stale",
    "dropped_reordered",
    "dropped_invalid",
    "states_sent",
    "watchdog_trips",
)
STATS_TIMES = ("worst_lateness_us", "worst_step_us", "worst_start_lateness_us", "dropped_s")
STATS_PAYLOAD = struct.Struct(f"<{len(STATS_COUNTS)}Q{len(STATS_TIMES)}d")


def datagram(kind: int, seq: int, payload: bytes = b"") -> bytes:
    """A stream datagram: the header (magic ``RTRU``, stream version) and ``payload``."""
    return HEADER.pack(STREAM_MAGIC, STREAM_VERSION, kind, 0, seq, len(payload)) + payload


def datagram_error(seq: int, code: int, text: str) -> bytes:
    """A stream ERROR datagram: ``code`` and ``text`` (UTF-8, cut at 1000 bytes)."""
    return datagram(ERROR, seq, ERROR_HEAD.pack(code) + text.encode("utf-8", "replace")[:1000])
