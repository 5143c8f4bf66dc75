"""A lock-step client's connection as the server keeps it, a STEP in progress, and closing a
socket without a reset."""

from __future__ import annotations

import math
import selectors
import socket
from typing import Any

from rtrigid.simulation import Simulation, Snapshot


class Connection:
    """One client: its bytes in and out, its request in progress, its simulation."""

    __slots__ = (
        "sock",
        "buf",
        "out",
        "sim",
        "job",
        "closing",
        "dead",
        "queued",
        "events",
        "since",
        "deadline",
        "why",
        "skip",
        "token",
        "observing",
    )

    def __init__(self, sock: socket.socket, now: float, token: bytes) -> None:
        self.sock = sock
        self.buf = bytearray()  # received, not yet served: whole messages, then a partial one
        self.out = bytearray()  # replies not yet taken by the socket
        self.sim: Simulation | None = None  # made on the first request that needs one
        self.job: Job | None = None  # the STEP in progress
        self.closing = False  # close once ``out`` is sent
        self.dead = False
        self.queued = False  # in the server's run queue
        self.events = selectors.EVENT_READ
        self.since = now  # idle since / first byte of the partial message / stuck since
        self.deadline = math.inf
        self.why: str | None = None  # what the deadline is for: "idle", "partial" or "send"
        self.skip = 0  # bytes still to discard: the payload of a refused long message
        self.token = token  # the session its simulation belongs to (.sessions)
        # the token of the session it observes, if it is an observer
        self.observing: bytes | None = None


class Job:
    """A STEP being served: what is left of it and how to undo it."""

    __slots__ = ("seq", "left", "loads", "before")

    def __init__(self, seq: int, left: int, loads: list[tuple[Any, ...]], before: Snapshot) -> None:
        self.seq, self.left, self.loads, self.before = seq, left, loads, before


def close_quietly(sock: socket.socket) -> None:
    """Close without a reset: what the peer sent and nobody read would make the kernel answer
    with RST, and a peer may then lose the last reply still unread in its buffer."""
    try:
        for _ in range(16):
            if not sock.recv(1 << 16, socket.MSG_DONTWAIT):
                break
    except OSError:
        pass
    sock.close()
