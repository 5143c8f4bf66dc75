"""Closed loops on the tree: cut-joint constraints on the tree's coordinates, multipliers
eliminated by the null space of their Jacobian (002 §5), projection after each step (002 §6).

A model's loop-closing joints (:meth:`rtrigid.model.Model.add_loop_joint`) are left out of
the spanning tree; each becomes constraint rows on the tree's coordinates Qg and rates nu.
For a cut joint between a parent body P (or the world) and a child body C, let p_C be the
child's anchor (world), d = p_C - p_P the anchors' separation, and take the constrained
directions fixed in the parent (its joint frame e1, e2, u turned by R_P):

=========== =========================== =============================== =====
kind        translation rows (t . d)    rotation rows                   count
=========== =========================== =============================== =====
spherical   e1, e2, u                   --                              3
revolute    e1, e2, u                   -e2 . u_C, e1 . u_C             5
prismatic   e1, e2                      e1, e2, u on 2 vec(e)           5
cylindrical e1, e2                      -e2 . u_C, e1 . u_C             4
planar      u                           -e2 . u_C, e1 . u_C             3
fixed       e1, e2, u                   e1, e2, u on 2 vec(e)           6
=========== =========================== =============================== =====

(u_C the child's axis in world axes, e = q_C o (q_P o r0)^* the rotation error.)  Their
velocity rows are exact:  t . (v_C(p_C) - v_P(p_C)) for a translation row and r . (omega_C -
omega_P) for a rotation row (the rotation residuals have these derivatives on the
constraint manifold, which is what the position projection's Newton iteration needs), so
J(Q) nu = 0, and differentiating once more with nu' = 0 gives the acceleration terms

    gamma_t = t . (a_C(p_C) - a_P(p_C)) + 2 (omega_P x t) . (v_C(p_C) - v_P(p_C)),
    gamma_r = r . (alpha_C - alpha_P) + (omega_P x r) . (omega_C - omega_P),

with J nu' = -gamma.  The constrained acceleration is the tree's free acceleration a_f
(articulated-body recursion) projected in the metric of the joint-space mass matrix K onto
that affine set: with the singular value decomposition J = U S V^T truncated at the rank r
the mechanism has (rank-revealing: a planar four-bar of spatial revolute joints has five
rows of rank two), N = V[:, r:] spans the null space, p = V_r S_r^-1 U_r^T (-gamma) meets the
rows, and

    nu' = p + N (N^T K N)^-1 N^T K (a_f - p)                     (002 (7)-(11) on the tree).

That is the K-orthogonal projection of a_f onto the affine set, computed without the SVD and
without allocating (:func:`k_correction`): nu' = a_f - K^-1 J^T lambda with
(J K^-1 J^T) lambda = J a_f + gamma, K by Cholesky and J K^-1 J^T by Cholesky with diagonal
pivoting stopped at the rank (redundant rows drop out; J^T lambda is unique although lambda
is not).

After each step the coordinates are put back on the constraint manifold by Newton's
method on the residuals with the least K-norm correction, and the rates by the K-orthogonal
projection onto J nu = 0 (both :func:`least_k_norm`), so the loop closes to round-off.

Under ``energy_momentum`` (:class:`LoopEnergyMomentum`) a spin-free link -- one on ball joints
all anchored on a line through its centre, its inertia symmetric about that line, like the
delta robot's rods -- has its spin about that line charted as a cyclic coordinate
(:func:`spin_links`, :func:`spin_chart`): its momentum is held, the spin is no unknown of the
Newton solve, and energy and closure stay exact.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from rtrigid._jit import jit
from rtrigid.backends.tree.kinematics import (
    actuator_loads,
    actuator_views,
    applied_views,
    carve,
    coordinate_rates,
    normalize_coordinates,
    open_buffers,
    refresh_bodies,
    rk4_stage_input,
    state_views,
)
from rtrigid.backends.tree.layout import I_VOFF, TreeState, TreeTables, pass_arrays
from rtrigid.backends.buffers import NONFINITE, OK, STAT_STEPS, all_finite, view
from rtrigid.backends.tree.limits import clamp_limits, has_limits
from rtrigid.backends.tree.nullspace_rk4 import RK4_WEIGHTS
from rtrigid.backends.tree.dynamics import mass_matrix
from rtrigid.joints import geometry as joint_geometry
from rtrigid.maths.dense import RANK_GAP, LoopWork
from rtrigid.backends.tree.loops_rows import (
    LI_WIDTH,
    L_AC,
    L_AP,
    L_CHILD,
    L_FRAME,
    L_NT,
    L_PARENT,
    L_R0,
    L_ROT,
    L_ROW,
    L_T,
    L_UC,
    L_WIDTH,
    ROT_AXIS,
    ROT_COUPLE,
    ROT_FRAME,
    ROT_NONE,
    close_positions,
    close_rates,
    constrained_acceleration,
    LoopTables,
    MassWork,
    RowWork,
    hold_loop_limits,
    loop_rows,
)

# rows per kind: (translation directions, rotation directions, rotation residual)
_ROWS = {
    "spherical": ((0, 1, 2), (), None),
    "revolute": ((0, 1, 2), (0, 1), "axis"),
    "prismatic": ((0, 1), (0, 1, 2), "frame"),
    "cylindrical": ((0, 1), (0, 1), "axis"),
    "planar": ((2,), (0, 1), "axis"),
    "fixed": ((0, 1, 2), (0, 1, 2), "frame"),
}
SINGULAR = 1e-6     # one between RANK_GAP and this is a near-singular configuration
STALLED = 1e-10     # an EM loop step whose residual stalls below this has converged
REFORMS = 3         # Newton matrices formed afresh in one EM loop step, past the first


@jit
def rk4_steps(n, dt, tables, S, S_prev, state, applied, drive, passes, Lv, lp):
    """n RK4 steps with the loops (see :class:`LoopStepper`); the number of steps taken (a
    failed step leaves the state of the step before it).  The actuators act at every stage
    with the stage's coordinates and rates (``lp.loads``: the held joint forces plus theirs);
    their work is RK4's quadrature of their power, as on trees.  ``tables``: a
    :data:`~.layout.TreeTables`; ``state``: the state's views (kinematics.state_views);
    ``applied``: (f_app, t_app, held); ``drive``: (act, ctrl, awork); ``passes``: the
    scratch of :func:`~.layout.pass_arrays`, Lv the limits'; ``lp``: the loop scratch
    (:func:`carve_loop`)."""
    tf, ti = tables.tf, tables.ti
    Qg, nu, x, q, v, w, L = state
    f_app, t_app, held = applied
    act, ctrl, awork = drive
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    (lf, li, rank, ws, F6, K, E, J6, phi, J, gam, acc2, Lnew, Q0, nu0, Qs, nus, dQ, dnu, sQ,
     snu, free, dQr, delta, zero, loads) = lp
    lt = LoopTables(lf, li, rank, ws)
    rw = RowWork(x, q, R, rj, G, V, cb, acc2, E, J6, phi, J, gam)
    mw = MassWork(IA, I6, F6, K)
    limited = has_limits(tf, ti)
    for done in range(n):
        S_prev[:] = S
        Q0[:] = Qg
        nu0[:] = nu
        ok = True
        for st in range(4):
            rk4_stage_input(st, dt, Q0, nu0, dQ, dnu, Qs, nus)
            coordinate_rates(ti, Qs, nus, dQ)
            loads[:] = held
            if act.shape[0]:
                actuator_loads(act, ctrl, Qs, nus, loads, awork, dt * RK4_WEIGHTS[st])
            ok &= constrained_acceleration(tables, Qs, nus, (f_app, t_app, loads), lt, passes,
                                           rw, mw, dnu)
            wt = RK4_WEIGHTS[st]
            for i in range(Qg.shape[0]):
                sQ[i] = sQ[i] + wt * dQ[i] if st > 0 else wt * dQ[i]
            for i in range(nu.shape[0]):
                snu[i] = snu[i] + wt * dnu[i] if st > 0 else wt * dnu[i]
        for i in range(Qg.shape[0]):
            Qg[i] = Q0[i] + dt * sQ[i]
        for i in range(nu.shape[0]):
            nu[i] = nu0[i] + dt * snu[i]
        normalize_coordinates(ti, Qg)
        k = clamp_limits(tf, ti, Qg, nu, Lv) if limited else 0
        if k == 0:
            err = close_positions(tf, ti, Qg, lt, free, 12, rw, mw, dQr, delta, zero)
            ok &= close_rates(tf, ti, Qg, nu, lt, free, rw, mw, delta) < np.inf
        else:
            err = hold_loop_limits(tf, ti, Qg, nu, drive, lt, k, (Lv, Lnew), free, rw, mw,
                                   (dQr, delta, zero, Qs))
        refresh_bodies(tf, ti, state, R, rj, G, V, cb)
        if not (ok and err <= 1e-9 and all_finite(S)):
            S[:] = S_prev
            return done
    return n


XI_HEAD = 3  # the loop scratch's int part starts with m (rows), the loops' count, the rank


def loop_scratch_size(nb, nq, nv, m, nl):
    """(float, int) lengths of the loop stepper's scratch (:func:`carve_loop`)."""
    M = m + nb
    nxf = (nl * L_WIDTH + 4 * nv * nv + nv * m + m * m + 2 * m + 3 * nv + 2 * M * nv + M * M
           + 2 * M + 6 + 9 + 6 * nv + 2 * m + m * nv + 6 * nb + 4 * nb + 5 * nq + 7 * nv)
    return nxf, XI_HEAD + nl * LI_WIDTH + m + 3 * nv


# the loop stepper's scratch by name (what :func:`carve_loop` returns)
LoopScratch = namedtuple("LoopScratch", (
    "lf", "li", "rank", "ws", "F6", "K", "E", "J6", "phi", "J", "gam", "acc", "Lnew", "Q0", "nu0",
    "Qs", "nus", "dQ", "dnu", "sQ", "snu", "free", "dQr", "delta", "zero", "loads"))


@jit
def carve_loop(xf, xi, nb, nq, nv):
    """The loop stepper's arrays, views of its float scratch ``xf`` and int scratch ``xi``
    (:func:`loop_scratch_size`): (lf, li, rank, ws, F6, K, E, J6, phi, J, gam, acc, Lnew, Q0,
    nu0, Qs, nus, dQ, dnu, sQ, snu, free, dQr, delta, zero, loads) as :func:`rk4_steps` takes
    them.  ``ws``: :func:`k_correction`'s scratch L, A, G, pivots, lambda, a right side, w,
    the correction, then :func:`least_k_norm`'s (rate indices, L_f, A, U, g, y) and
    :func:`limit_rates`' (the stacked rows, their defect, a mask of every rate), then K_f, for
    up to m + nb rows.  From Python call ``carve_loop.py_func`` (see ``buffers.view``)."""
    m, nl, rank = xi[0], xi[1], xi[2]
    M = m + nb
    lf = view(xf, 0, (nl, L_WIDTH))
    o = nl * L_WIDTH
    square = view(xf, o, (4, nv, nv))
    L, Lf, K, Kf = square[0], square[1], square[2], square[3]
    o += 4 * nv * nv
    A, Gm = view(xf, o, (nv, m)), view(xf, o + nv * m, (m, m))
    o += (nv + m) * m
    by_row = view(xf, o, (4, m))
    lam, bm, phi, gam = by_row[0], by_row[1], by_row[2], by_row[3]
    o += 4 * m
    stacked = view(xf, o, (2, M, nv))
    Af, Ja = stacked[0], stacked[1]
    o += 2 * M * nv
    U, g, dfc = view(xf, o, (M, M)), view(xf, o + M * M, (M,)), view(xf, o + M * M + M, (M,))
    o += M * M + 2 * M
    F6, E = view(xf, o, (6,)), view(xf, o + 6, (3, 3))
    o += 15
    J6, J = view(xf, o, (6, nv)), view(xf, o + 6 * nv, (m, nv))
    o += (6 + m) * nv
    acc, Lnew = view(xf, o, (nb, 6)), view(xf, o + 6 * nb, (4, nb))
    o += 10 * nb
    coords = view(xf, o, (5, nq))
    Q0, Qs, dQ, sQ, dQr = coords[0], coords[1], coords[2], coords[3], coords[4]
    rates = view(xf, o + 5 * nq, (10, nv))
    w, c, y, nu0, nus, dnu, snu, delta, zero, loads = (rates[0], rates[1], rates[2], rates[3],
                                                       rates[4], rates[5], rates[6], rates[7],
                                                       rates[8], rates[9])
    li = view(xi, XI_HEAD, (nl, LI_WIDTH))
    o = XI_HEAD + nl * LI_WIDTH
    piv = view(xi, o, (m,))
    masks = view(xi, o + m, (3, nv))
    idx, every, free = masks[0], masks[1], masks[2]
    ws = LoopWork(L, A, Gm, piv, lam, bm, w, c, idx, Lf, Af, U, g, y, Ja, dfc, every, Kf)
    return LoopScratch(lf, li, rank, ws, F6, K, E, J6, phi, J, gam, acc, Lnew, Q0, nu0, Qs, nus,
                       dQ, dnu, sQ, snu, free, dQr, delta, zero, loads)


@jit
def loop_step(n, dt, F, I, xf, xi):
    """``nullspace_rk4`` with the loops: n steps of :func:`rk4_steps` on the Simulation's
    buffers F, I and the loop scratch xf, xi (:func:`carve_loop`); OK, or NONFINITE with the
    state of the step before the one that failed (a singular factorization, a loop that
    would not close, a non-finite state).  Raises nothing and allocates nothing."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    scr = carve(work, nb, nq, nv)
    done = rk4_steps(n, dt, TreeTables(tf, ti, pf, pi, gravity), S, S_prev,
                     TreeState(Qg, nu, x, q, v, w, L), applied_views(A, nb, nv),
                     actuator_views(F, I), pass_arrays(scr), scr.Lv,
                     carve_loop(xf, xi, nb, nq, nv))
    stats[STAT_STEPS] += done
    return OK if done == n else NONFINITE


LOOP_ROW_SIZES = 2


@jit
def loop_rows_step(n, dt, F, I):
    """:func:`loop_step` as a kernel of the contract on a Batch's longer rows
    (:meth:`LoopStepper.rows`): F = the Simulation's F then the loop scratch xf, I = its I,
    the int scratch xi, then len F and len I."""
    m = I.shape[0] - LOOP_ROW_SIZES
    nf, ni = I[m], I[m + 1]
    return loop_step(n, dt, view(F, 0, (nf,)), view(I, 0, (ni,)),
                     view(F, nf, (F.shape[0] - nf,)), view(I, ni, (m - ni,)))


def _raising(err):
    """err, or ``LinAlgError`` for the inf the compiled projections return when the mass
    matrix is not positive definite on the rates they may change (the Python-side calls
    report it as numpy's factorizations do)."""
    if err == np.inf:
        raise np.linalg.LinAlgError("the joint-space inertia is not positive definite on the "
                                    "free rates")
    return err


class Loop:
    """One cut joint as constraint rows: its kind, bodies and joint frame in the parent."""

    def __init__(self, joint):
        self.joint = joint
        self.name = joint.name
        g = joint_geometry(joint)
        self.parent, self.child = joint.parent, joint.child
        self.anchor_parent, self.anchor_child = g.anchor_parent, g.anchor_child
        self.frame = np.array([g.e1_parent, g.e2_parent, g.axis_parent])  # rows, parent axes
        self.axis_child = g.axis_child
        self.r0 = g.r0
        if joint.kind not in _ROWS:
            raise ValueError(f"loop joint {joint.name!r}: a {joint.kind} joint cannot close a "
                             f"loop (loop joints: {', '.join(_ROWS)})")
        self.trans, self.rots, self.rot_kind = _ROWS[joint.kind]
        self.m = len(self.trans) + len(self.rots)


class CouplingRow:
    """One joint coupling (:class:`rtrigid.model.Coupling`) as a constraint row: the bodies
    whose joints it couples (follower, source), its ratio and offset."""

    m = 1
    joint = None  # not a cut joint

    def __init__(self, coupling, joints):
        self.name = coupling.name
        child = {j.name: j.child for j in joints}
        self.follower, self.source = child[coupling.joint], child[coupling.source]
        self.ratio, self.offset = coupling.ratio, coupling.offset


class LoopClosure:
    """The loop constraints of a model on its tree (:class:`~.kinematics.Tree`): residuals,
    Jacobian, acceleration terms, constrained accelerations and projections.  The loop
    joints' rows come first, then one row per joint coupling (:class:`CouplingRow`)."""

    def __init__(self, tree, loop_joints, scratch, couplings=()):
        self.tree = tree
        self.loops = [Loop(j) for j in loop_joints] + list(couplings)
        self.m = sum(lp.m for lp in self.loops)
        self.nv = tree.nv
        nb = tree.nb
        self._x, self._q = np.zeros((nb, 3)), np.zeros((nb, 4))
        self._scr = scratch
        self._M = np.zeros((tree.nv, tree.nv))
        self._F6 = np.zeros(6)
        self._acc = np.zeros((nb, 6))
        self._dQ = np.zeros(tree.nq)
        self.rank = None  # the mechanism's constraint rank, fixed by :meth:`assemble`
        # the compiled rows' tables (see loop_rows)
        self.lf = np.zeros((len(self.loops), L_WIDTH))
        self.li = np.zeros((len(self.loops), LI_WIDTH), np.int64)
        row = 0
        for k, lp in enumerate(self.loops):
            f, i = self.lf[k], self.li[k]
            i[L_ROW] = row
            row += lp.m
            if lp.joint is None:
                f[L_AP:L_AP + 2] = lp.offset, lp.ratio
                i[L_PARENT], i[L_CHILD], i[L_ROT] = lp.follower, lp.source, ROT_COUPLE
                continue
            f[L_AP:L_AP + 3], f[L_AC:L_AC + 3] = lp.anchor_parent, lp.anchor_child
            f[L_FRAME:L_FRAME + 9] = lp.frame.ravel()
            f[L_UC:L_UC + 3], f[L_R0:L_R0 + 4] = lp.axis_child, lp.r0
            i[L_PARENT], i[L_CHILD], i[L_NT] = lp.parent, lp.child, len(lp.trans)
            i[L_T:L_T + len(lp.trans)] = lp.trans
            i[L_ROT] = {None: ROT_NONE, "axis": ROT_AXIS, "frame": ROT_FRAME}[lp.rot_kind]
        self._E, self._J6 = np.zeros((3, 3)), np.zeros((6, tree.nv))
        self._phi, self._J, self._gam = np.zeros(self.m), np.zeros((self.m, self.nv)), \
            np.zeros(self.m)
        self._nu0 = np.zeros(tree.nv)
        # the dense solves' scratch (k_correction's, least_k_norm's: carve_loop's ws)
        self.ws = self.scratch()[1].ws

    @classmethod
    def for_model(cls, tree, model, scratch):
        """The closure of a model's loop joints and joint couplings on its tree."""
        couplings = [CouplingRow(c, model.joints) for c in getattr(model, "couplings", ())]
        return cls(tree, model.loop_joints, scratch, couplings)

    def scratch(self):
        """(xf, xi, arrays): a new loop scratch for this closure's tree -- the float and
        int buffers of :func:`carve_loop`, its sizes, tables and rank written in, the masks
        set to every rate -- and the arrays carved from it."""
        tree = self.tree
        nxf, nxi = loop_scratch_size(tree.nb, tree.nq, tree.nv, self.m, len(self.loops))
        xf, xi = np.zeros(nxf), np.zeros(nxi, np.int64)
        xi[:XI_HEAD] = self.m, len(self.loops), -1 if self.rank is None else self.rank
        arrays = carve_loop.py_func(xf, xi, tree.nb, tree.nq, tree.nv)
        arrays.lf[:], arrays.li[:] = self.lf, self.li
        arrays.ws.every[:] = 1
        arrays.free[:] = 1
        return (xf, xi), arrays

    def rows(self, Qg, nu=None, what=7):
        """(phi, J, gamma) at (Qg, nu), computed as ``what`` asks (bits 1, 2, 4; see
        :func:`loop_rows`); views of scratch, valid until the next call."""
        loop_rows(self.tree.tf, self.tree.ti, Qg, self._nu0 if nu is None else nu, self.lf,
                  self.li, self._common()[0], what)
        return self._phi, self._J, self._gam

    # -- kinematics of the cut joints -------------------------------------------------------
    def residual(self, Qg):
        """Phi(Qg): every loop's residual rows (see the module's table); a new array."""
        return self.rows(Qg, what=1)[0].copy()

    def jacobian(self, Qg):
        """J(Qg): (m, nv), J nu = the rows' rates; a new array."""
        return self.rows(Qg, what=2)[1].copy()

    def mass_matrix(self, Qg):
        s = self._scr
        mass_matrix(self.tree.tf, self.tree.ti, Qg, self._x, self._q, s.R, s.rj, s.G, s.IA, s.I6,
                    self._F6, self._M)
        return self._M

    # -- the null space ---------------------------------------------------------------------
    def _free(self, free):
        """The mask of the rates a projection may change, as the kernels take it (int64)."""
        return np.ones(self.nv, np.int64) if free is None else np.asarray(free, np.int64)

    def acceleration(self, Qg, nu, loads, out):
        """out <- nu' = p + N (N^T K N)^-1 N^T K (a_f - p) (the module's docstring, computed
        as :func:`constrained_acceleration` does); False if the tree's inertia is singular."""
        tree = self.tree
        f_app, t_app, held = loads
        return constrained_acceleration(
            TreeTables(tree.tf, tree.ti, tree.pf, tree.pi, tree.gravity), Qg, nu,
            (f_app, t_app, held), LoopTables(self.lf, self.li, self.rank, self.ws),
            pass_arrays.py_func(self._scr), *self._common(), out)

    def retract(self, Qg, delta):
        """Qg moved by the rate-space increment delta (first order), quaternions normalised."""
        coordinate_rates(self.tree.ti, Qg, delta, self._dQ)
        Qg += self._dQ
        normalize_coordinates(self.tree.ti, Qg)

    def _common(self):
        """(RowWork, MassWork) of the Python-side calls: the tree's scratch and this
        closure's own row arrays."""
        s = self._scr
        return (RowWork(self._x, self._q, s.R, s.rj, s.G, s.V, s.cb, self._acc, self._E,
                        self._J6, self._phi, self._J, self._gam),
                MassWork(s.IA, s.I6, self._F6, self._M))

    def close_positions(self, Qg, free=None, max_iter=12):
        """Newton's method on Phi(Qg) = 0 with least K-norm corrections of the free rates
        (a bool mask; None: all); the final |Phi|.  ``LinAlgError`` if the mass matrix is not
        positive definite on the free rates."""
        return _raising(close_positions(self.tree.tf, self.tree.ti, Qg,
                                        LoopTables(self.lf, self.li, -1, self.ws),
                                        self._free(free), max_iter, *self._common(), self._dQ,
                                        np.zeros(self.nv), self._nu0))

    def close_rates(self, Qg, nu, free=None):
        """nu <- its K-orthogonal projection onto J nu = 0 (changing only the free rates);
        the final |J nu|; ``LinAlgError`` as :meth:`close_positions`."""
        return _raising(close_rates(self.tree.tf, self.tree.ti, Qg, nu,
                                    LoopTables(self.lf, self.li, -1, self.ws), self._free(free),
                                    *self._common(), np.zeros(self.nv)))

    def reactions(self, Qg, dnu, f_app, t_app, held):
        """The loop joints' reactions when they change the tree's accelerations by dnu
        (nudot - the tree's own): K dnu = J^T lambda gives the multipliers lambda, the
        least-norm ones where rows are redundant (there the reactions are statically
        indeterminate); each loop's rows are a force lambda_t t at the child's anchor p_C and
        a torque lambda_r r on the child, their opposites on the parent, added to the loads
        f_app (at the centres) and t_app in place; a coupling's row is the joint forces
        lambda on its follower and -ratio lambda on its source, added to the joint forces
        ``held`` in place.  Returns per loop joint (force, torque about p_C) on its child,
        world axes."""
        K = self.mass_matrix(Qg).copy()
        J = self.jacobian(Qg)  # also leaves the bodies' poses in _x and R (scratch)
        lam = np.linalg.lstsq(J.T, K @ dnu, rcond=RANK_GAP)[0]
        x, R = self._x, self._scr.R
        out = []
        row = 0
        ti = self.tree.ti
        for lp in self.loops:
            if lp.joint is None:
                held[ti[lp.follower, I_VOFF]] += lam[row]
                held[ti[lp.source, I_VOFF]] -= lp.ratio * lam[row]
                row += 1
                continue
            pc = x[lp.child] + R[lp.child] @ lp.anchor_child
            E = lp.frame if lp.parent < 0 else lp.frame @ R[lp.parent].T  # rows, world
            nt = len(lp.trans)
            force = lam[row:row + nt] @ E[list(lp.trans)]
            torque = lam[row + nt:row + lp.m] @ E[:lp.m - nt]
            row += lp.m
            out.append((force, torque))
            for b, sign in ((lp.child, 1.0), (lp.parent, -1.0)):
                if b >= 0:
                    f_app[b] += sign * force
                    t_app[b] += sign * (torque + np.cross(pc - x[b], force))
        return out

    # -- mobility -----------------------------------------------------------------------------
    def mobility_at(self, Qg):
        """(singular values of J at Qg, its numerical rank)."""
        s = np.linalg.svd(self.jacobian(Qg), compute_uv=False)
        if s.size == 0 or s[0] == 0.0:
            return s, 0
        return s, int(np.sum(s > RANK_GAP * s[0]))

    def assemble(self, Qg):
        """Close the loops from Qg (in place) and fix the mechanism's rank; ``ValueError``
        if they cannot be closed, if the mechanism is locked (zero mobility) or if Qg is a
        singular configuration (the rank of J differs from that of nearby closed ones)."""
        err = self.close_positions(Qg, max_iter=50)
        if not err <= 1e-9:
            raise ValueError(f"loop joints: cannot close the loops {self.names()} from the "
                             f"initial coordinates (residual {err:.3g}); set joint positions "
                             "near a closed configuration")
        s, r = self.mobility_at(Qg)
        dof = self.nv - r
        if dof == 0:
            raise ValueError(f"loop joints: the mechanism is locked (zero mobility): its "
                             f"{self.nv} tree rates are all fixed by the {self.m} loop rows "
                             f"of {self.names()} (rank {r})")
        near = [v for v in s if SINGULAR * s[0] >= v > RANK_GAP * s[0]]
        # a redundant row stays redundant at nearby closed configurations; a singular
        # configuration is isolated: move along each free direction, close, compare ranks
        N = np.linalg.svd(self.jacobian(Qg))[2][r:].T
        ranks = []
        for k in range(N.shape[1]):
            Qn = Qg.copy()
            self.retract(Qn, 1e-3 * N[:, k] / max(1e-300, np.max(np.abs(N[:, k]))))
            if self.close_positions(Qn, max_iter=50) <= 1e-9:
                ranks.append(self.mobility_at(Qn)[1])
        if near or any(rk != r for rk in ranks):
            raise ValueError(f"loop joints: the configuration is singular for "
                             f"{self.names()} (constraint rank {r} here, "
                             f"{sorted(set(ranks))} nearby; singular values "
                             f"{np.array2string(s / s[0], precision=2)} of the largest); "
                             "start the mechanism away from its dead points")
        self.rank = r
        return dof

    def names(self):
        return [lp.name for lp in self.loops]
class LoopStepper:
    """``nullspace_rk4`` on a tree with loop joints: classical RK4 on (Qg, nu) with the
    constrained accelerations of :meth:`LoopClosure.acceleration` at every stage, then the
    quaternions normalised (002 (63)), the loops closed at position level and the rates
    projected onto J nu = 0.  The kernel signature ``(n, dt, F, I) -> status`` of
    :mod:`rtrigid.backends`, on the backend's buffers and the stepper's loop scratch: one
    compiled call (:func:`loop_step`, :func:`rk4_steps`) runs the n steps, raising nothing
    and allocating nothing (the dense factorizations of :func:`k_correction` and
    :func:`least_k_norm` work in the scratch, carved once; a singular one fails the step:
    NONFINITE, the state of the step before).  Actuators and held joint forces enter every
    stage's constrained acceleration.  Joint limits: a step that ends with a coordinate
    beyond its limit puts it on the limit, closes the loops with it held there, and projects
    the rates onto the loops and the limit's target at once (:func:`hold_loop_limits`)."""

    def __init__(self, backend, closure):
        self.be = backend
        self.closure = closure
        (self._xf, self._xi), _ = closure.scratch()

    def __call__(self, n, dt, F, I):
        return loop_step(n, dt, F, I, self._xf, self._xi)

    def rows(self, F, I):
        """This step as a kernel of the contract on longer rows, for :class:`rtrigid.Batch`:
        ``(step, Fx, Ix)`` with ``step(n, dt, Fx, Ix)`` = :func:`loop_rows_step`, Fx = F
        followed by the loop scratch (the tables lf, the dense solves' scratch, the RK4
        stages), Ix = I followed by the int scratch (sizes, rank, li, pivots, masks) and
        len F, len I.  The same compiled :func:`loop_step` runs on a copy's row as on the
        Simulation's buffers."""
        Fx = np.concatenate([F, self._xf])
        Ix = np.concatenate([I, self._xi, [len(F), len(I)]]).astype(np.int64)
        return loop_rows_step, Fx, Ix
