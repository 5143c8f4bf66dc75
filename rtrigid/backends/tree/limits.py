"""Joint limits of revolute and prismatic joints: the pieces both tree schemes share.

A limit is a unilateral constraint on one coordinate c: lower <= c <= upper.  The schemes
keep it in two moves (how each uses them is in its module and in the README):

- position: a joint that ends a step beyond a limit is put on it -- ``nullspace_rk4`` clamps
  the coordinate after its explicit step (:func:`clamp_limits`); ``energy_momentum`` redoes
  the step with the coordinate's increment fixed so that it lands on the limit, the limit's
  reaction taking the place of that joint's equation (``energy_momentum._solve_with_limits``);
- velocity: the joints put on a limit get an impulse in joint space, Δν = K⁻¹ Sᵀ λ with
  K = TᵀMT the joint-space inertia, that sets their rates to the targets (0, or the
  restitution's rebound): :func:`limit_impulse`.  For one joint the kinetic energy changes by
  (target² − ν²) / (2 (K⁻¹)_jj), never up while |target| <= |ν|.

The scratch is the kernels' (``carve``): ``Lv`` rows hold, per active joint a, its rate
index, its away sign (+1 at a lower limit, -1 at an upper one), its target rate and a spare;
``Lc[a]`` the column K⁻¹ e_a, ``La`` the k x k matrix of those columns' active rows.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.maths.linalg import solve_inplace
from rtrigid.backends.tree.kinematics import (
    I_KIND,
    PRISMATIC,
    REVOLUTE,
    T_BOUNCE,
    T_HI,
    T_LO,
    articulated_solve,
)
from rtrigid.backends.tree.layout import one_coordinate


@jit
def has_limits(tf, ti):
    """True when some joint of the tree has a finite limit."""
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if (kind == REVOLUTE or kind == PRISMATIC) and (
                tf[b, T_LO] > -np.inf or tf[b, T_HI] < np.inf):
            return True
    return False


@jit
def clamp_limits(tf, ti, Qg, nu, Lv):
    """Put every coordinate beyond a limit on it; returns k, the joints so put, recorded in
    Lv with the target rate -e nu (restitution e: the rebound of the rate it arrived with)
    and, in Lv[3], how far beyond the limit the coordinate was."""
    k = 0
    for b in range(ti.shape[0]):
        o, ov = one_coordinate(ti, b)
        if o < 0:
            continue
        if Qg[o] < tf[b, T_LO]:
            Lv[3, k] = Qg[o] - tf[b, T_LO]
            Qg[o] = tf[b, T_LO]
            sign = 1.0
        elif Qg[o] > tf[b, T_HI]:
            Lv[3, k] = Qg[o] - tf[b, T_HI]
            Qg[o] = tf[b, T_HI]
            sign = -1.0
        else:
            continue
        Lv[0, k] = ov
        Lv[1, k] = sign
        Lv[2, k] = -tf[b, T_BOUNCE] * nu[ov] if sign * nu[ov] < 0.0 else nu[ov]
        k += 1
    return k


@jit
def response_columns(ti, passes, Lc, Lv, k, out):
    """Lc[a] <- K⁻¹ e_i for the k rates i = Lv[0, a] (K the joint-space inertia, with what
    the articulated factor of ``passes`` holds besides: armature, implicit dampers); the
    factor must be current, its cb, pA, tau and acc are overwritten; ``out``: a rate vector."""
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    nb = ti.shape[0]
    for a in range(k):
        for i in range(tau.shape[0]):
            tau[i] = 0.0
        tau[int(Lv[0, a])] = 1.0
        for b in range(nb):
            for r in range(6):
                cb[b, r] = 0.0
                pA[b, r] = 0.0
        articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, out)
        for i in range(out.shape[0]):
            Lc[a, i] = out[i]


@jit
def limit_impulse(ti, passes, limits, k, rates):
    """dnu <- K⁻¹ Sᵀ λ with λ such that (rates + dnu) at the k active rates of Lv equals their
    targets; the articulated factor (IA, U, Dinv, W of ``passes``, the recursion's arrays) of
    the configuration must be current.  ``limits``: (Lc, La, Lv, dnu) of ``limit_arrays``.
    Returns False if the k x k matrix is singular."""
    Lc, La, Lv, dnu = limits
    nv = dnu.shape[0]
    response_columns(ti, passes, Lc, Lv, k, dnu)
    for a in range(k):
        for c in range(k):
            La[a, c] = Lc[c, int(Lv[0, a])]
        Lv[3, a] = Lv[2, a] - rates[int(Lv[0, a])]
    # La lam = the rate changes wanted (symmetric positive definite)
    for a in range(k):
        dnu[a] = Lv[3, a]
    if not solve_inplace(La, dnu, k):
        return False
    for a in range(k):
        Lv[3, a] = dnu[a]
    for i in range(nv):
        s = 0.0
        for a in range(k):
            s += Lv[3, a] * Lc[a, i]
        dnu[i] = s
    return True
