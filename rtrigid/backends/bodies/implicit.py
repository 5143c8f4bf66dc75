"""The one step loop of the bodies' implicit schemes, with the sub-step fallback.

Each scheme supplies ``advance_body(model arrays, f_app, t_app, b, h, m, S, S_prev, max_iter,
work, stats) -> bool``, which moves body b through m equal sub-steps of size h/m and returns False
when a Newton solve fails.  The loop here owns the documented fallback: a body whose step
fails is restored from the start of the step and redone as 2, 4, ..., 2**max_halvings
sub-steps; if even that fails the whole step is rolled back and FAILED returned (the
Simulation then raises).  USED_FALLBACK is or-ed into the status when any step needed it.
"""
from rtrigid.backends.bodies.layout import BodiesModel
from rtrigid._jit import jit_inline
from rtrigid.backends.buffers import (
    FAILED,
    OK,
    SOLVER_HALVINGS,
    SOLVER_MAX_ITER,
    STAT_FALLBACKS,
    STAT_STEPS,
    USED_FALLBACK,
)
from rtrigid.backends.bodies.common import open_buffers, restore_body

@jit_inline
def run(n, dt, F, I, advance_body):
    """Advance ``n`` steps of size ``dt`` with the sub-step fallback (common kernel contract)."""
    (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, solver, stats,
     work) = open_buffers(F, I)
    bm = BodiesModel(gravity, bodyf, bodyi, springf, springi)
    nb = bodyi.shape[0]
    max_iter = int(solver[SOLVER_MAX_ITER])
    most = 2 ** int(solver[SOLVER_HALVINGS])
    flags = OK
    for _ in range(n):
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        for b in range(nb):
            m = 1
            while True:
                ok = advance_body(bm, f_app, t_app, b, dt,
                                  m, S, S_prev, max_iter, work, stats)
                if ok or m >= most:
                    break
                restore_body(S, S_prev, nb, b)
                m *= 2
            if not ok:
                for i in range(S.shape[0]):
                    S[i] = S_prev[i]
                return FAILED | flags
            if m > 1:
                stats[STAT_FALLBACKS] += 1
                flags = USED_FALLBACK
        stats[STAT_STEPS] += 1
    return flags
