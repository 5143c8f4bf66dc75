"""Argument checks shared by the model builder and the simulation.

Each returns a clean value or raises ``ValueError`` whose message starts with the name of the
offending field, so a caller can tell the user which argument was wrong.
"""

from __future__ import annotations

import numbers

import numpy as np


def as_vector(value, n, name):
    """Return ``value`` as a finite float64 vector of length ``n`` or raise ``ValueError``.

    Only real numbers count: strings ("1.0") and bools are refused, not converted.
    """
    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iuf":
            raise TypeError
        arr = np.array(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected {n} numbers, got {value!r}") from None
    if arr.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: must be finite, got {arr.tolist()}")
    return arr


def as_scalar(value, name, *, positive=False, nonnegative=False):
    """Return ``value`` as a finite float or raise ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number, got {value!r}") from None
    if not np.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    if positive and x <= 0.0:
        raise ValueError(f"{name}: must be > 0, got {x}")
    if nonnegative and x < 0.0:
        raise ValueError(f"{name}: must be >= 0, got {x}")
    return x


def as_int(value, name, *, minimum=None):
    """Return ``value`` as an int; refuse non-integers (2.5, "2", True) with ``ValueError``.

    A float with an integral value (2.0) is accepted: it is what ``--set n=2.0`` and JSON give.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        k = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        k = int(value)
    else:
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if minimum is not None and k < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {k}")
    return k


def unit_vector(value, name):
    """A non-zero 3-vector scaled to unit length."""
    v = as_vector(value, 3, name)
    n = float(np.linalg.norm(v))
    if n < 1e-12:
        raise ValueError(f"{name}: must be a non-zero vector, got {v.tolist()}")
    return v / n


def as_frame(frame, name="frame"):
    """'world' or 'body'."""
    if frame not in ("world", "body"):
        raise ValueError(f"{name}: expected 'world' or 'body', got {frame!r}")
    return frame


def check_contact(friction, restitution):
    """(friction, restitution) of a body or the ground, checked: friction >= 0,
    restitution in [0, 1]."""
    mu = as_scalar(friction, "friction", nonnegative=True)
    e = as_scalar(restitution, "restitution", nonnegative=True)
    if e > 1.0:
        raise ValueError(f"restitution: must be in [0, 1], got {e}")
    return mu, e


def check_spin_friction(torsional_friction, rolling_friction):
    """(torsional_friction, rolling_friction) of a body or the ground (lengths, m), checked:
    finite and >= 0."""
    return (
        as_scalar(torsional_friction, "torsional_friction", nonnegative=True),
        as_scalar(rolling_friction, "rolling_friction", nonnegative=True),
    )
