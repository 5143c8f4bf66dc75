"""The streaming client: :class:`StreamClient` commands a
:class:`~rtrigid.io.hil.stream.StreamServer` over UDP and receives its states (specification:
"Streaming over UDP" in ``docs/hil/protocol.md``)."""

from __future__ import annotations

import collections
import socket
import struct
import sys
import time
from typing import Any, Mapping

from numpy.typing import ArrayLike

from rtrigid.io.hil.protocol import (
    COMMAND,
    COMMAND_HEAD,
    DESCRIBE,
    ERROR,
    ERROR_HEAD,
    HEADER,
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
    ServerError,
    datagram,
)
from rtrigid.io.hil.records import (
    Described,
    pack_controls,
    pack_joint_forces,
    pack_loads,
    read_description,
    read_state,
)
from rtrigid.validate import as_scalar

_KEPT_STATES = 4096  # states received while waiting for a reply, kept for next_state()
_SO_TIMESTAMPNS = 35  # Linux: a datagram's receive time as a struct timespec (CLOCK_REALTIME)
_TIMESPEC = struct.Struct("@qq")


class StreamClient(Described):
    """Command a streaming server and receive its states.

    ``StreamClient(host, port)`` asks the server to DESCRIBE the simulation (``retries``
    tries, ``timeout`` seconds each: a datagram may be lost); then :attr:`names`,
    :attr:`joints`, :attr:`actuators`, :attr:`sensors`, :attr:`nq`, :attr:`nv`, :attr:`dt`,
    :attr:`scenario` describe it as for :class:`~rtrigid.io.hil.client.Client`, and
    :attr:`rate`, :attr:`every`, :attr:`watchdog`, :attr:`on_silence` the stream.
    :meth:`command` sends a command (the next sequence number, or the one given),
    :meth:`next_state` returns the next state received, :meth:`stats` the server's figures.

    ``timestamps=True`` (Linux): each state also has ``received_ns``, when the kernel
    received its datagram, on the ``time.perf_counter_ns`` clock -- its arrival on time,
    apart from when this process woke to read it.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        *,
        timeout: float = 1.0,
        retries: int = 5,
        timestamps: bool = False,
    ) -> None:
        if port is None:
            raise ValueError("port: required")
        if timestamps and not sys.platform.startswith("linux"):
            raise ValueError("timestamps: the kernel's receive times are read on Linux only")
        self.timestamps = bool(timestamps)
        self._received_ns = 0  # when the kernel received the last datagram read
        self.timeout = as_scalar(timeout, "timeout", positive=True)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.connect((host, int(port)))  # datagrams from anywhere else are not read
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        if self.timestamps:
            self._sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        self.seq = 0  # the last command's sequence number
        self._request_seq = 0
        self._states: collections.deque[dict[str, Any]] = collections.deque(maxlen=_KEPT_STATES)
        self._buf = bytearray(65536)
        try:
            for attempt in range(max(int(retries), 1)):
                try:
                    payload = self._ask(DESCRIBE)
                    break
                except TimeoutError:
                    if attempt == max(int(retries), 1) - 1:
                        raise TimeoutError(
                            f"no DESCRIBE reply from udp {host}:{port} in "
                            f"{retries} tries of {timeout} s"
                        ) from None
            info, at = read_description(payload)
        except BaseException:
            self._sock.close()
            raise
        self.take_description(info)
        self.rate, self.every, self.watchdog, silence, self.max_payload = STREAM_INFO.unpack_from(
            payload, at
        )
        self.on_silence = ON_SILENCE[silence]

    @property
    def address(self) -> tuple[str, int]:
        """This client's own address (where the server sends the states)."""
        return self._sock.getsockname()[:2]

    def close(self) -> None:
        """Close the socket."""
        self._sock.close()

    def __enter__(self) -> StreamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending -----------------------------------------------------------------------------
    def packet(
        self,
        seq: int,
        controls: Mapping[int | str, float] | ArrayLike | None = None,
        joint_forces: Mapping[int | str, ArrayLike] | None = None,
        forces: Mapping[int | str, Any] | None = None,
    ) -> bytes:
        """A COMMAND datagram with sequence number ``seq`` (0 .. 2**32-1), arguments as
        :meth:`Client.step <rtrigid.io.hil.client.Client.step>`'s; send it with
        :meth:`send` (e.g. out of order, on purpose)."""
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= 0xFFFFFFFF:
            raise ValueError(f"seq: expected an integer in [0, 2**32-1], got {seq!r}")
        loads = pack_loads(forces or {}, self.names)
        us = pack_controls(controls, self.actuator_names)
        jfs = pack_joint_forces(joint_forces or {}, self.joints)
        return datagram(
            COMMAND,
            seq,
            COMMAND_HEAD.pack(len(loads), len(us), len(jfs)) + b"".join(loads + us + jfs),
        )

    def command(
        self,
        controls: Mapping[int | str, float] | ArrayLike | None = None,
        *,
        joint_forces: Mapping[int | str, ArrayLike] | None = None,
        forces: Mapping[int | str, Any] | None = None,
    ) -> int:
        """Send a command with the next sequence number; returns that number.  It is in
        force from the server's next tick until a newer one arrives (loads included)."""
        seq = self.seq + 1
        self.send(self.packet(seq, controls, joint_forces, forces))
        self.seq = seq
        return seq

    def send(self, packet: bytes) -> None:
        """Send a datagram as it is."""
        self._sock.send(packet)

    def subscribe(self) -> None:
        """Receive the states without commanding (the states go to the last sender of a
        command or SUBSCRIBE); also starts a new command sequence for this address."""
        self._sock.send(datagram(SUBSCRIBE, 0))
        self.seq = 0

    # -- receiving ---------------------------------------------------------------------------
    def next_state(self, timeout: float | None = None) -> dict[str, Any]:
        """The next state received (a state dict as the lock-step client's, with ``tick``,
        ``command_seq``: the command in force, and ``watchdog``: True once the watchdog has
        acted); ``TimeoutError`` if none comes within ``timeout`` seconds."""
        if self._states:
            return self._states.popleft()
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            kind, seq, payload = self._receive(deadline)
            if kind == STREAM_STATE:
                return self._state(payload)

    def _state(self, payload: bytes) -> dict[str, Any]:
        tick, command_seq, status = STREAM_STATE_HEAD.unpack_from(payload)
        state = read_state(payload, self.sensors, self.names, STREAM_STATE_HEAD.size)
        state.update(tick=tick, command_seq=command_seq, watchdog=bool(status & STATUS_WATCHDOG))
        if self.timestamps:
            state["received_ns"] = self._received_ns
        return state

    def stats(self) -> dict[str, Any]:
        """The server's figures now: its deadline statistics (ticks, late ticks, folded ticks,
        worst lateness, worst step) and its packet counts (applied, superseded, dropped
        stale, reordered, invalid; states sent; watchdog trips)."""
        values = STATS_PAYLOAD.unpack(self._ask(STATS))
        return dict(zip(STATS_COUNTS + STATS_TIMES, values))

    def _ask(self, kind: int) -> bytes:
        self._request_seq = self._request_seq % 0xFFFFFFFF + 1
        seq = self._request_seq
        self._sock.send(datagram(kind, seq))
        deadline = time.monotonic() + self.timeout
        while True:
            rkind, rseq, payload = self._receive(deadline)
            if rkind == STREAM_STATE:
                self._states.append(self._state(payload))
            elif rkind == kind | REPLY and rseq == seq:
                return payload

    def _receive(self, deadline: float) -> tuple[int, int, bytes]:
        """The next datagram from the server: (kind, seq, payload); raises its ERROR."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no datagram from the server within the timeout")
            self._sock.settimeout(left)
            try:
                if self.timestamps:
                    size = self._receive_stamped()
                else:
                    size = self._sock.recv_into(self._buf)
            except socket.timeout:
                raise TimeoutError("no datagram from the server within the timeout") from None
            except ConnectionRefusedError:
                raise ConnectionError("nothing listens at the server's address") from None
            if size < HEADER.size:
                continue
            magic, version, kind, _, seq, length = HEADER.unpack_from(self._buf)
            if magic != STREAM_MAGIC or version != STREAM_VERSION or length != size - HEADER.size:
                continue  # not a datagram of this protocol
            payload = bytes(self._buf[HEADER.size : size])
            if kind == ERROR:
                (code,) = ERROR_HEAD.unpack_from(payload)
                raise ServerError(code, payload[ERROR_HEAD.size :].decode("utf-8", "replace"))
            return kind, seq, payload

    def _receive_stamped(self) -> int:
        """recv_into that also keeps the kernel's receive time, moved to the perf_counter
        clock by the two clocks' offset read just after."""
        size, ancillary, _, _ = self._sock.recvmsg_into([self._buf], 64)
        offset = time.time_ns() - time.perf_counter_ns()
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
                seconds, nanoseconds = _TIMESPEC.unpack_from(data)
                self._received_ns = seconds * 1_000_000_000 + nanoseconds - offset
        return size
