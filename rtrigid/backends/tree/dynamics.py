"""Queries on a tree in generalized coordinates that the kernels do not need.

:func:`momentum_rates`: nu = (T^T M T)^-1 T^T p for body momenta p, and the body velocities
T nu -- the rates whose generalized momentum is that of p (the articulated-body recursion
of :mod:`.kinematics` with the momenta as the only, negative, bias; as for an impulse).
"""
from __future__ import annotations

from rtrigid._jit import jit
from rtrigid.backends.tree.kinematics import (
    ROW_C,
    T_MASS,
    articulated_factor,
    articulated_solve,
    body_rates,
    cross3,
    geometry,
    joint_velocities,
    rot_vec_b,
)


@jit
def momentum_rates(tf, ti, Qg, v, L, x, q, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, I6, tau,
                   nu_out, v_out, w_out):
    """nu_out <- (T^T M T)^-1 T^T p for the body momenta p = (m v, R L) at Qg (v: world
    centre-of-mass velocities, L: body-axis angular momenta about the centres), and v_out,
    w_out <- the bodies' velocities T nu_out (world, body axes).  False if the joint-space
    inertia is singular."""
    geometry(tf, ti, Qg, x, q, R, rj, G)
    ok = articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6)
    nb = ti.shape[0]
    for b in range(nb):
        m = tf[b, T_MASS]
        h = rot_vec_b(R, b, L[b, 0], L[b, 1], L[b, 2])
        p = (m * v[b, 0], m * v[b, 1], m * v[b, 2])
        # about the joint point: R L + c x p; the recursion takes it as a negative bias
        n = cross3(G[b, ROW_C, 0], G[b, ROW_C, 1], G[b, ROW_C, 2], p[0], p[1], p[2])
        for k in range(3):
            pA[b, k] = -(h[k] + n[k])
            pA[b, 3 + k] = -p[k]
        for k in range(6):
            cb[b, k] = 0.0
    for k in range(tau.shape[0]):
        tau[k] = 0.0
    articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, nu_out)
    joint_velocities(ti, G, nu_out, V, cb)
    body_rates(ti, R, G, V, v_out, w_out)
    return ok
