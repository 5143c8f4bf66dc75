"""The one place numba is configured.

Every compiled kernel in rtrigid is declared with :data:`jit`, an ``numba.njit`` with the
on-disk cache switched on, so a second process pays no compile time.  Set
``RTRIGID_NO_CACHE=1`` to compile without touching the cache (useful when profiling the
compiler or on a read-only install).  The pure-Python body of any kernel stays reachable as
``kernel.py_func``; the tests run both.
"""
import functools
import os
import sys

import numba
import numba.core.event

CACHE = os.environ.get("RTRIGID_NO_CACHE", "") not in ("1", "true", "yes")

jit = functools.partial(numba.njit, cache=CACHE, fastmath=False, error_model="numpy")

# Hot helpers that take many arrays are inlined into their caller at the numba-IR level: a
# real call updates a reference count for every array argument, which cost ~30 ns per array
# per call here (a 17-array right-hand side call: ~0.5 us) -- more than the arithmetic.
jit_inline = functools.partial(jit, inline="always")


class _CompileNotice(numba.core.event.Listener):
    """Says once, on stderr, that numba is compiling (which only happens on a cache miss)."""

    def __init__(self, stream):
        self.stream, self.said = stream, False

    def on_start(self, event):
        if not self.said:
            self.said = True
            where = (os.environ.get("NUMBA_CACHE_DIR")
                     or "__pycache__ folders beside rtrigid's sources")
            if not CACHE:
                where = "nowhere: RTRIGID_NO_CACHE is set"
            print(f"rtrigid: compiling numba kernels on first use (up to about half a minute "
                  f"on 2 cores; cached in {where}) ...", file=self.stream, flush=True)

    def on_end(self, event):
        pass


def compile_notice(stream=None):
    """A context in which the first numba compilation prints one line on ``stream`` (stderr).

    Loading a kernel from the on-disk cache is no compilation and prints nothing.
    """
    return numba.core.event.install_listener("numba:compile",
                                             _CompileNotice(stream or sys.stderr))
