"""The kernel contract every backend keeps: two buffers, their sections, status and counters.

A step kernel is ``step(n, dt, F, I) -> status``: ``n`` steps of size ``dt`` in one compiled
call, on one float64 buffer ``F`` and one int64 buffer ``I``.  Two buffers rather than many
arrays, because numba's dispatcher pays for every array it unboxes (measured here: a tuple of
~40 arrays ~4 us per call, eight arrays 1.4 us, two arrays well under 1 us).  Their sections,
in this order (the one table of the layout; :func:`sections` carves it, in Python and in the
kernels alike):

    F = [model floats | S state | S_prev | A applied loads | solver | work]
    I = [model ints | stats]

model:   the backend's frozen model; its first entries tell its sizes, so a kernel finds
         where the model ends (see each backend's ``open_buffers``)
S:       the state; its layout is the backend's (``STATE_FIELDS`` in each backend)
S_prev:  the state at the start of the last step (render interpolation reads it; a failed
         step is rolled back from it)
A:       applied loads, (6 nb,): (nb, 3) world force at the centre of mass, (nb, 3) world
         torque; the tree backend adds (nv,) generalized forces held on the joint rates;
         constant over a call
solver:  [max_iter, max_halvings] of implicit schemes
work:    scratch, sized by the kernel module's ``work_size``
stats:   int64 counters STAT_*
status:  OK, or FAILED / NONFINITE with the state rolled back to the start of the failed
         step; USED_FALLBACK or-ed in if any step needed the sub-step fallback.
"""
import hashlib

import numpy as np

from rtrigid._jit import jit, jit_inline

OK = 0
FAILED = 1
NONFINITE = 2
USED_FALLBACK = 4  # or-ed into the status when an implicit step needed its sub-step fallback

STAT_STEPS = 0
STAT_ITERS = 1
STAT_MAX_ITERS = 2
STAT_FALLBACKS = 3
N_STATS = 4

SOLVER_MAX_ITER = 0
SOLVER_HALVINGS = 1
N_SOLVER = 2


@jit_inline
def sections(F, I, nf_model, ni_model, n_state, n_applied):
    """(S, S_prev, A, solver, stats, work) views of the buffers, in the order above."""
    o = nf_model
    S = F[o:o + n_state]
    o += n_state
    S_prev = F[o:o + n_state]
    o += n_state
    A = F[o:o + n_applied]
    o += n_applied
    solver = F[o:o + N_SOLVER]
    o += N_SOLVER
    return S, S_prev, A, solver, I[ni_model:ni_model + N_STATS], F[o:]


def allocate(mf, mi, n_state, n_applied, n_work):
    """The two buffers holding model ``mf``/``mi`` and zeroed sections of the given sizes."""
    F = np.zeros(len(mf) + 2 * n_state + n_applied + N_SOLVER + n_work)
    I = np.zeros(len(mi) + N_STATS, dtype=np.int64)
    F[:len(mf)] = mf
    I[:len(mi)] = mi
    return F, I


def model_digest(mf, mi):
    """A digest of a frozen model's two arrays: what makes two simulations the same model."""
    return hashlib.sha256(mf.tobytes() + mi.tobytes()).digest()


def field_offsets(fields, count):
    """{name: (start, stop)} of a field-major layout: each (name, width) field holds
    ``count`` rows of ``width`` entries, one field after the other."""
    out, o = {}, 0
    for name, width in fields:
        out[name] = (o, o + width * count)
        o += width * count
    return out


@jit
def all_finite(a):
    """True when no entry of the flat array ``a`` is NaN or infinite."""
    for i in range(a.shape[0]):
        if not np.isfinite(a[i]):
            return False
    return True
