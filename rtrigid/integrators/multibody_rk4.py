"""``nullspace_rk4`` for jointed systems: classical RK4 on the null-space equations.

The unknowns are the generalized coordinates Qg (positions, with a unit quaternion per free
body and per spherical joint) and the independent rates nu of :mod:`rtrigid.multibody`.  The
right-hand side is Qg' from nu (quaternions by 002 (42), qdot = 1/2 q o (0, Omega)) and nu'
from the articulated-body recursion, which solves the reduced equations
(T^T M T) nu' = T^T (f - M Tdot nu) in O(number of bodies) without forming T (002 §5 builds
the same T by pull-back; the recursion is its tree-structured form).  After each step every
quaternion is normalised (002 (63)); the joints hold at position level by construction and
at velocity level exactly, so ``constraint_error()`` stays at round-off.
"""
from rtrigid._jit import jit
from rtrigid.integrators.common import NONFINITE, OK, STAT_STEPS, all_finite
from rtrigid.multibody import (
    accelerations,
    carve,
    coordinate_rates,
    normalize_coordinates,
    open_buffers,
    refresh_bodies,
    state_views,
)
from rtrigid.multibody import work_size as _mb_work_size

RK4_WEIGHTS = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


def work_size(nb, nq, nv):
    return _mb_work_size(nb, nq, nv)


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel convention of integrators/common)."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    f_app = A[0:3 * nb].reshape((nb, 3))
    t_app = A[3 * nb:6 * nb].reshape((nb, 3))
    scratch = carve(work, nb, nq, nv)
    Q0, nu0, kQ, knu, Qs, nus = scratch[14:20]
    for _ in range(n):
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        for i in range(nq):
            Q0[i] = Qg[i]
        for i in range(nv):
            nu0[i] = nu[i]
        for st in range(4):
            if st == 0:
                for i in range(nq):
                    Qs[i] = Q0[i]
                for i in range(nv):
                    nus[i] = nu0[i]
            else:
                c = dt if st == 3 else 0.5 * dt
                for i in range(nq):
                    Qs[i] = Q0[i] + c * kQ[st - 1, i]
                for i in range(nv):
                    nus[i] = nu0[i] + c * knu[st - 1, i]
            coordinate_rates(ti, Qs, nus, kQ[st])
            if not accelerations(gravity, tf, pf, ti, pi, Qs, nus, x, q, f_app, t_app, scratch,
                                 knu[st]):
                for i in range(S.shape[0]):
                    S[i] = S_prev[i]
                return NONFINITE
        for i in range(nq):
            Qg[i] = Q0[i] + dt * (RK4_WEIGHTS[0] * kQ[0, i] + RK4_WEIGHTS[1] * kQ[1, i]
                                  + RK4_WEIGHTS[2] * kQ[2, i] + RK4_WEIGHTS[3] * kQ[3, i])
        for i in range(nv):
            nu[i] = nu0[i] + dt * (RK4_WEIGHTS[0] * knu[0, i] + RK4_WEIGHTS[1] * knu[1, i]
                                   + RK4_WEIGHTS[2] * knu[2, i] + RK4_WEIGHTS[3] * knu[3, i])
        normalize_coordinates(ti, Qg)
        refresh_bodies(tf, ti, Qg, nu, x, q, v, w, L, scratch)
        if not all_finite(S):
            for i in range(S.shape[0]):  # S_prev holds the whole consistent state
                S[i] = S_prev[i]
            return NONFINITE
        stats[STAT_STEPS] += 1
    return OK
