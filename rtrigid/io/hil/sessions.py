"""Sessions of the lock-step server: a token per simulation, simulations kept for a grace
period after their connection closes, and observers.

Every connection's simulation belongs to a session named by a 16-byte random token, which
HELLO reports.  When the connection closes (the client paused, its network dropped), the
simulation is kept, as it was, for ``grace`` seconds: a new connection that sends RESUME with
the token takes it over and steps on exactly where it stopped.  An observer (OBSERVE with the
token) receives every state the session's stepping client receives, in order, and can step
nothing.  Without the token nobody resumes or observes a session: tokens come from
:func:`secrets.token_bytes` and are compared in constant time.
"""

from __future__ import annotations

import hmac
import math
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rtrigid.simulation import Simulation

TOKEN_SIZE = 16


class Sessions:
    """The server's sessions: which token a live connection's simulation has, the detached
    simulations waiting for their client, and who observes what.

    ``grace``: seconds a detached simulation waits (0: none waits; the simulation is freed
    when its connection closes, as without sessions).  ``most``: the most detached
    simulations kept (the one closest to its expiry is freed first when more detach).
    """

    def __init__(self, grace: float, most: int) -> None:
        self.grace = grace
        self.most = most
        self.live: dict[bytes, Any] = {}  # token -> the connection stepping it
        # token -> (simulation, expiry time)
        self.detached: dict[bytes, tuple[Simulation, float]] = {}
        self.observers: dict[bytes, list[Any]] = {}  # token -> [connections observing it]

    @staticmethod
    def new_token() -> bytes:
        """A new random session token."""
        return secrets.token_bytes(TOKEN_SIZE)

    def find(self, token: bytes) -> bytes | None:
        """The known token equal to ``token`` (live or detached), compared in constant time,
        or None."""
        found = None
        for known in (*self.live, *self.detached):
            if hmac.compare_digest(known, token):
                found = known
        return found

    def open(self, token: bytes, conn: Any) -> None:
        """``conn`` steps the session ``token`` from now on."""
        self.live[token] = conn

    def close(self, token: bytes, sim: Simulation | None, now: float) -> list[Simulation]:
        """The session's connection closed: keep ``sim`` for the grace period.  Returns the
        simulations freed (this one when there is no grace; else any evicted by the cap)."""
        self.live.pop(token, None)
        if sim is None:
            self._forget(token)
            return []
        if self.grace <= 0.0:
            self._forget(token)
            return [sim]
        self.detached[token] = (sim, now + self.grace)
        freed = []
        while len(self.detached) > self.most:
            oldest = min(self.detached, key=lambda k: self.detached[k][1])
            freed.append(self.detached.pop(oldest)[0])
        return freed

    def resume(self, token: bytes, conn: Any) -> tuple[bytes, Simulation] | None:
        """(the session's own token, its detached simulation), now stepped by ``conn``; None
        if the token names no detached session (unknown, expired, or stepped by a live
        connection)."""
        known = self.find(token)
        if known is None or known not in self.detached:
            return None
        sim, _ = self.detached.pop(known)
        self.live[known] = conn
        return known, sim

    def observe(self, token: bytes, conn: Any) -> bool:
        """Make ``conn`` an observer of the session ``token``; False if there is none."""
        known = self.find(token)
        if known is None:
            return False
        self.observers.setdefault(known, []).append(conn)
        return True

    def watchers(self, token: bytes) -> list[Any]:
        """The connections observing the session ``token``."""
        return self.observers.get(token, [])

    def unobserve(self, conn: Any) -> None:
        """``conn`` observes nothing any more."""
        for token, conns in list(self.observers.items()):
            if conn in conns:
                conns.remove(conn)
                if not conns:
                    del self.observers[token]

    def next_expiry(self) -> float:
        """When the first detached session expires (inf: none waits)."""
        return min((expiry for _, expiry in self.detached.values()), default=math.inf)

    def expire(self, now: float) -> list[tuple[bytes, Simulation]]:
        """End the detached sessions whose grace is over: [(token, simulation)]."""
        out = [(t, sim) for t, (sim, expiry) in self.detached.items() if expiry <= now]
        for token, _ in out:
            del self.detached[token]
        return out

    def _forget(self, token: bytes) -> None:
        self.detached.pop(token, None)
