"""The lock-step client: :class:`Client` drives a :class:`~rtrigid.io.hil.server.Server`
(the specification: ``docs/hil/protocol.md``)."""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any, Mapping

import numpy as np
from numpy.typing import ArrayLike

from rtrigid.io.hil.protocol import (
    ERROR,
    ERROR_HEAD,
    HEADER,
    HELLO,
    HELLO_LIMITS,
    HELLO_SESSION,
    KEEPALIVE,
    MAGIC,
    OBSERVE,
    PUSH,
    REPLY,
    RESET,
    RESUME,
    SET_STATE,
    SET_STATE_HEAD,
    STATE,
    STEP,
    STEP_HEAD,
    VERSION,
    ServerError,
    as_spin,
    message,
)
from rtrigid.io.hil.records import (
    Described,
    pack_controls,
    pack_joint_forces,
    pack_loads,
    read_description,
    read_state,
)
from rtrigid.io.hil.sessions import TOKEN_SIZE
from rtrigid.validate import as_vector


def _set_timeouts(
    sock: socket.socket, recv: float | None = None, send: float | None = None
) -> None:
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


class Client(Described):
    """Drive a :class:`Server`: ``step``, ``state``, ``reset``, ``set_state``; each returns a
    state dict.

    ``Client(host, port)`` over TCP, or ``Client(unix=PATH)`` to a server on a Unix-domain
    socket; ``spin``: seconds to busy-poll for each reply before sleeping
    (``docs/hil/protocol.md``).
    A state dict holds ``t`` (float), ``steps`` (int), ``poses`` (``(n_bodies, 7)``:
    ``x, y, z, q0, q1, q2, q3``), ``velocities`` (``(n_bodies, 6)``: world ``v`` then world
    angular velocity), ``qpos`` (nq,), ``qvel`` (nv,) (``Simulation.qpos``/``qvel``),
    ``sensors`` (sensor name -> its readings: ``imu:BODY`` -> gyro xyz, specific force xyz,
    body axes) and ``names``.  After :meth:`__init__`, :attr:`names`, :attr:`dt`,
    :attr:`integrator`, :attr:`scenario`, :attr:`nq`, :attr:`nv` and :attr:`joints`,
    :attr:`actuators`, :attr:`sensors` (lists of dicts) describe the served simulation, and
    :attr:`limits` (a dict: max_payload, max_clients, idle_timeout, partial_timeout,
    send_timeout, time_slice) the server's limits.  A
    refused request
    raises :class:`ServerError`; so does the server's notice before it hangs up (code 10: full,
    11: idle), after which this client is closed.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        timeout: float = 5.0,
        *,
        unix: str | os.PathLike[str] | None = None,
        spin: float = 0.0,
    ) -> None:
        self.spin = as_spin(spin)
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
        self._pending = bytearray()  # an observer's states received, not yet returned
        self._observing = False
        self._buf = bytearray(1 << 16)  # replies are read into this, then copied out
        self._view = memoryview(self._buf)
        try:
            hello = self._request(HELLO)
        except BaseException:
            self._sock.close()
            raise
        self._read_hello(hello)

    def _read_hello(self, hello: bytearray) -> None:
        info, at = read_description(hello)
        self.take_description(info)
        # the server's limits, after the rows (None from a server that does not send them)
        self.limits: dict[str, float] | None = None
        if len(hello) >= at + HELLO_LIMITS.size:
            self.limits = dict(
                zip(
                    (
                        "max_payload",
                        "max_clients",
                        "idle_timeout",
                        "partial_timeout",
                        "send_timeout",
                        "time_slice",
                    ),
                    HELLO_LIMITS.unpack_from(hello, at),
                )
            )
            at += HELLO_LIMITS.size
        # the session, after the limits (None from a server without sessions)
        self.session = None
        if len(hello) >= at + HELLO_SESSION.size:
            self.session, grace = HELLO_SESSION.unpack_from(hello, at)
            self.limits["session_grace"] = grace  # type: ignore[index]  # (sent before it)

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def step(
        self,
        n: int = 1,
        forces: Mapping[int | str, Any] | None = None,
        *,
        controls: Mapping[int | str, float] | ArrayLike | None = None,
        joint_forces: Mapping[int | str, ArrayLike] | None = None,
    ) -> dict[str, Any]:
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
        if (
            isinstance(n, bool)
            or not isinstance(n, (int, np.integer))
            or not (0 <= n <= self.max_steps_per_request)
        ):
            raise ValueError(
                f"n: expected an integer in [0, {self.max_steps_per_request}], got {n!r}"
            )
        loads = self._pack_loads(forces or {})
        controls = self._pack_controls(controls)
        joint_forces = self._pack_joint_forces(joint_forces or {})
        payload = STEP_HEAD.pack(int(n), len(loads), len(controls), len(joint_forces)) + b"".join(
            loads + controls + joint_forces
        )
        return self._state_dict(self._request(STEP, payload))

    def set_state(
        self, qpos: ArrayLike | None = None, qvel: ArrayLike | None = None
    ) -> dict[str, Any]:
        """Set the generalized coordinates and/or rates (``Simulation.set_qpos``/``set_qvel``;
        None leaves them); both are checked before either is set."""
        parts = []
        for name, value, n in (("qpos", qpos, self.nq), ("qvel", qvel, self.nv)):
            if value is None:
                parts.append(np.empty(0))
                continue
            parts.append(as_vector(value, n, name))
        payload = (
            SET_STATE_HEAD.pack(parts[0].size, parts[1].size)
            + np.concatenate(parts).astype("<f8").tobytes()
        )
        return self._state_dict(self._request(SET_STATE, payload))

    def _pack_controls(self, controls: Any) -> list[bytes]:
        return pack_controls(controls, self.actuator_names)

    def _pack_joint_forces(self, joint_forces: Any) -> list[bytes]:
        return pack_joint_forces(joint_forces, self.joints)

    def state(self) -> dict[str, Any]:
        """The served simulation's state now."""
        return self._state_dict(self._request(STATE))

    def resume(self, session: bytes) -> dict[str, Any]:
        """Take over the session ``session`` (the token :attr:`session` of the connection
        that stepped it, which has since closed) and return its state: the simulation goes on
        exactly where it stopped.  :attr:`session` becomes that token.  ``ServerError`` (code
        12) if no session waits for it (unknown, expired, or its connection still open)."""
        state = self._state_dict(self._request(RESUME, self._token(session)))
        self.session = bytes(session)
        return state

    def observe(self, session: bytes) -> dict[str, Any]:
        """Become an observer of the session ``session``: return its state now; then
        :meth:`next_state` returns every state its stepping client receives, in order.  An
        observer steps nothing."""
        state = self._state_dict(self._request(OBSERVE, self._token(session), keep_rest=True))
        self._observing = True
        return state

    def next_state(self, timeout: float | None = None) -> dict[str, Any]:
        """An observer's next state (blocks up to ``timeout`` seconds, default the client's
        timeout); its ``seq`` is the request of the stepping client it answered."""
        if not self._observing:
            raise ValueError("next_state: only an observer (observe()) receives states")
        _set_timeouts(self._sock, recv=self.timeout if timeout is None else timeout)
        try:
            while (
                len(self._pending) < HEADER.size
                or len(self._pending) < HEADER.size + HEADER.unpack_from(self._pending)[5]
            ):
                data = self._sock.recv(1 << 16)
                if not data:
                    raise ConnectionError("server closed the connection")
                self._pending += data
        except (BlockingIOError, socket.timeout):
            raise TimeoutError("no state within the timeout") from None
        finally:
            _set_timeouts(self._sock, recv=self.timeout)
        magic, version, kind, _, seq, length = HEADER.unpack_from(self._pending)
        body = bytes(self._pending[HEADER.size : HEADER.size + length])
        del self._pending[: HEADER.size + length]
        if kind == ERROR:
            (code,) = ERROR_HEAD.unpack_from(body)
            self.close()
            raise ServerError(code, body[ERROR_HEAD.size :].decode("utf-8", "replace"))
        if (magic, version, kind) != (MAGIC, VERSION, PUSH):
            self.close()
            raise ConnectionError(
                f"unexpected message (magic {magic!r}, version {version}, "
                f"kind {kind}) for an observer"
            )
        state = self._state_dict(bytearray(body))
        state["seq"] = seq
        return state

    @staticmethod
    def _token(session: object) -> bytes:
        if not isinstance(session, (bytes, bytearray)) or len(session) != TOKEN_SIZE:
            raise ValueError(
                f"session: expected the {TOKEN_SIZE}-byte token of Client.session, got {session!r}"
            )
        return bytes(session)

    def keepalive(self) -> None:
        """Tell the server this connection is alive (restarts its idle timeout); changes
        nothing else."""
        self._request(KEEPALIVE)

    def reset(self) -> dict[str, Any]:
        """Return the server's simulation to its initial state."""
        return self._state_dict(self._request(RESET))

    def _pack_loads(self, forces: Any) -> list[bytes]:
        return pack_loads(forces, self.names)

    def _recv_some(self, got: int, deadline_ns: int) -> int:
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

    def _request(self, kind: int, payload: bytes = b"", keep_rest: bool = False) -> bytearray:
        self._seq = self._seq % 0xFFFFFFFF + 1  # 1 .. 2**32-1: seq 0 marks the server's notices
        try:
            self._sock.sendall(message(kind, self._seq, payload))
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
        if (
            magic != MAGIC
            or version != VERSION
            or (seq != self._seq and not notice)
            or (length > 1 << 24)
        ):
            self.close()
            raise ConnectionError(
                f"unexpected reply header (magic {magic!r}, version "
                f"{version}, seq {seq} for {self._seq}, length {length})"
            )
        end = HEADER.size + length
        if end > len(self._buf):
            self._buf.extend(bytes(end - len(self._buf)))  # no view of it is held here
            self._view = memoryview(self._buf)
        while got < end:
            got = self._recv_some(got, deadline)
        if got > end and keep_rest:  # an observer's first states, right behind the reply
            self._pending += self._view[end:got]
        elif got > end and not notice:  # one request, one reply: nothing may follow it
            self.close()
            raise ConnectionError(f"{got - end} unexpected bytes after a reply")
        body = bytearray(self._view[HEADER.size : end])
        if rkind == ERROR:
            (code,) = ERROR_HEAD.unpack_from(body)
            if notice:
                self.close()  # the server has closed its end; nothing more will come
            raise ServerError(code, bytes(body[ERROR_HEAD.size :]).decode("utf-8", "replace"))
        if rkind != kind | REPLY:
            self.close()
            raise ConnectionError(f"reply kind {rkind} to a request of kind {kind}")
        return body

    def _notice(self) -> ServerError | None:
        """The server's last word (an ERROR with seq 0) if it is already here, else None."""
        try:
            data = self._sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except OSError:
            return None
        if len(data) < HEADER.size:
            return None
        magic, version, kind, _, seq, length = HEADER.unpack_from(data)
        if (magic, version, kind, seq) != (MAGIC, VERSION, ERROR, 0) or (
            len(data) < HEADER.size + length or length < ERROR_HEAD.size
        ):
            return None
        (code,) = ERROR_HEAD.unpack_from(data, HEADER.size)
        return ServerError(
            code,
            data[HEADER.size + ERROR_HEAD.size : HEADER.size + length].decode("utf-8", "replace"),
        )

    def _state_dict(self, body: bytearray) -> dict[str, Any]:
        # views of a copy made for this reply alone: nothing else holds it
        return read_state(body, self.sensors, self.names)
