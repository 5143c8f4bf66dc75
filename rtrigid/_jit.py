"""The one place numba is configured.

Every compiled kernel in rtrigid is declared with :data:`jit`, an ``numba.njit`` with the
on-disk cache switched on, so a second process pays no compile time.  Set
``RTRIGID_NO_CACHE=1`` to compile without touching the cache (useful when profiling the
compiler or on a read-only install).  The pure-Python body of any kernel stays reachable as
``kernel.py_func``; the tests run both.
"""
import functools
import os

import numba

CACHE = os.environ.get("RTRIGID_NO_CACHE", "") not in ("1", "true", "yes")

jit = functools.partial(numba.njit, cache=CACHE, fastmath=False, error_model="numpy")

# Hot helpers that take many arrays are inlined into their caller at the numba-IR level: a
# real call updates a reference count for every array argument, which cost ~30 ns per array
# per call here (a 17-array right-hand side call: ~0.5 us) -- more than the arithmetic.
jit_inline = functools.partial(jit, inline="always")
