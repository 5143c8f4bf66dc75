"""The server's limits (connections, timeouts, steps per request), checked before a server
is built: ``rtrigid serve`` refuses a bad value in one line before it builds the scenario."""

from __future__ import annotations

import math
import numbers
import resource
from typing import Any

import numpy as np

from rtrigid.io.hil.protocol import MAX_STEPS_LIMIT

_SPARE_FDS = 64  # files the process needs besides the connections (listener, modules)


def _seconds(value: object, name: str, *, allow_inf: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected seconds > 0, got {value!r}")
    x = float(value)
    if not (x > 0.0 and (math.isfinite(x) or (allow_inf and x == math.inf))):
        raise ValueError(
            f"{name}: expected seconds > 0{' (inf: never)' if allow_inf else ''}, got {value!r}"
        )
    return x


def _count(value: object, name: str, lo: int, hi: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name}: expected an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


def check_limits(
    *,
    max_clients: int = 256,
    idle_timeout: float = 60.0,
    partial_timeout: float = 2.0,
    send_timeout: float = 1.0,
    time_slice: float = 0.002,
    max_steps_per_request: int = 100_000,
    session_grace: float = 120.0,
) -> dict[str, Any]:
    """The server's limits, checked (``ValueError`` naming the field); defaults as documented.

    Room for ``max_clients`` connections is made here: the process's soft limit on open files
    is raised towards its hard limit if it is too low, and if that is not enough the value is
    refused, rather than the server failing to accept once it is busy.
    """
    out: dict[str, Any] = {
        "max_clients": _count(max_clients, "max_clients", 1, 1 << 20),
        "idle_timeout": _seconds(idle_timeout, "idle_timeout", allow_inf=True),
        "partial_timeout": _seconds(partial_timeout, "partial_timeout"),
        "send_timeout": _seconds(send_timeout, "send_timeout"),
        "time_slice": _seconds(time_slice, "time_slice"),
        "max_steps_per_request": _count(
            max_steps_per_request, "max_steps_per_request", 1, MAX_STEPS_LIMIT
        ),
        "session_grace": (
            0.0
            if session_grace == 0 and not isinstance(session_grace, bool)
            else _seconds(session_grace, "session_grace")
        ),
    }
    need = out["max_clients"] + _SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard == resource.RLIM_INFINITY or hard >= need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        else:
            raise ValueError(
                f"max_clients: {out['max_clients']} connections need about {need} "
                f"open files; this process may have {hard} (ulimit -n)"
            )
    return out
