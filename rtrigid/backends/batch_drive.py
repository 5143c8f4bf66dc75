"""A Batch's parallel driver: every copy's row stepped by the scheme's kernel, on every core.

The kernel is called by its address (:func:`rtrigid._jit.call_step`), so this is compiled once
for every scheme and model, and numba caches it like any kernel."""
from numba import prange

from rtrigid._jit import call_step, jit


@jit(parallel=True)
def drive(kernel, k, dt, F, I, controls, feedback, status):
    """Step every copy k steps of the kernel at address ``kernel`` (``call_step``: one
    compile of this for every kernel) under the ``controls`` (U, u_time, c0, lo, hi): U (kt, n,
    nu) (u_time: one row per step, else U[0] held), clamped to [lo, hi] and written at
    column c0 of a copy's row; or, when the ``feedback`` (K, u0, xref, xidx) has gains,
    under u = u0[i] - K[i] (x - xref[i]), x = F[i, xidx].  (Plain tuples: numba reads a
    named tuple's type from a Python call ~1 us slower.)  A failed copy stops (its status
    set, rolled back by its kernel)."""
    U, u_time, c0, lo, hi = controls
    K, u0, xref, xidx = feedback
    n = F.shape[0]
    nu = hi.shape[0]
    nx = xidx.shape[0]
    feedback = K.shape[1] > 0
    for i in prange(n):
        Fi = F[i]
        Ii = I[i]
        if nu == 0 or (U.shape[0] == 0 and not feedback):
            st = call_step(kernel, k, dt, Fi, Ii)
            status[i] = st
            continue
        if not feedback and not u_time:  # held controls: one call of k steps
            for a in range(nu):
                Fi[c0 + a] = min(max(U[0, i, a], lo[a]), hi[a])
            status[i] = call_step(kernel, k, dt, Fi, Ii)
            continue
        Ki = K[i] if K.shape[0] == n else K[0]
        for s in range(k):
            for a in range(nu):
                if feedback:
                    u = u0[i, a]
                    for j in range(nx):
                        u -= Ki[a, j] * (Fi[xidx[j]] - xref[i, j])
                else:
                    u = U[s if u_time else 0, i, a]
                Fi[c0 + a] = min(max(u, lo[a]), hi[a])
            st = call_step(kernel, 1, dt, Fi, Ii)
            status[i] |= st
            if st & 3:
                break
