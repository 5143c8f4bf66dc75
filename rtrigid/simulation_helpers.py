"""Helpers the modules of :class:`~rtrigid.simulation.Simulation` share: a numba
dispatcher's compiled entry point, and the overflow-safe normalisation of a quaternion."""
from __future__ import annotations

import numpy as np


def entry_point(kernel, *args):
    """The compiled entry point of the numba dispatcher ``kernel`` for the types of
    ``args``, or ``kernel`` itself when it is no dispatcher or has no such overload."""
    overloads = getattr(kernel, "overloads", None)
    if not overloads:
        return kernel
    import numba

    key = tuple(numba.typeof(a) for a in args)
    for sig, result in overloads.items():
        if tuple(sig) == key:
            return result.entry_point
    return kernel


def unit_quaternion(q, name):
    """q / |q|, computed without overflow (q may hold numbers up to 1e308)."""
    big = float(np.max(np.abs(q)))
    scaled = q / big if big > 0.0 else q
    norm = float(np.linalg.norm(scaled)) * big
    if norm < 1e-12:
        raise ValueError(f"{name}: quaternion of norm {norm:g} cannot be normalised")
    return scaled / np.linalg.norm(scaled)
