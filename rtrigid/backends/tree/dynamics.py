"""Dynamics queries on a tree in generalized coordinates: mass matrix, bias and inverse
dynamics, point Jacobians, and the rates that carry a given set of body momenta.

Everything works on the tree of :mod:`.kinematics` (joint by joint in its order: the
coordinates Qg and rates nu of its docstring), about each body's joint point in world axes,
like the articulated-body recursion the kernels step with:

- :func:`mass_matrix`: the composite-rigid-body algorithm, O(n · depth) -- each body's
  composite inertia about its joint point gives its own block, and its wrench per unit rate,
  carried up to every ancestor's joint point, the blocks with its ancestors;
- :func:`inverse_dynamics`: the recursive Newton-Euler algorithm, O(n): accelerations root
  to leaves (a_b = X(d) a_p + S nudot + cb, with the velocity-product terms cb of
  :func:`~.kinematics.joint_velocities`), each body's wrench I_J a + (velocity terms) -
  (external loads) (:func:`~.loads.bias_forces`), then leaves to root, projected on
  the joint columns.  With the external loads reduced to gravity and nudot = 0 it gives the
  bias forces (Coriolis, centrifugal and gravity: M nudot + bias = tau);
- :func:`point_jacobian`: the world velocity of a body point per unit rate, [linear;
  angular], from the columns of the joints between the body and the world;
- :func:`momentum_rates`: nu = (T^T M T)^-1 T^T p for body momenta p, and the body
  velocities T nu -- the rates whose generalized momentum is that of p.

A rate's column is a unit turn about an axis through its joint point, or a unit slide (see
:func:`~.layout.col_block`), so a spherical joint's rates are the relative angular
velocity in the child's axes and a free body's are (velocity of the centre of mass in world
axes, angular velocity in body axes), as in :mod:`rtrigid.joints`.
"""
from __future__ import annotations

import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.articulated import (
    articulated_factor,
    articulated_solve,
    joint_point_inertia,
    shift_to_parent,
)
from rtrigid.backends.tree.rotations import cross3, rot_t_vec_b, rot_vec_b
from rtrigid.backends.tree.kinematics import (
    Tree,
    body_rates,
    carry_acceleration,
    geometry,
    joint_velocities,
)
from rtrigid.backends.tree.layout import (
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    NQ,
    NV,
    PRISMATIC,
    REVOLUTE,
    ROW_C,
    ROW_D,
    T_ARM,
    T_MASS,
    base_work_size,
    TreeTables,
    carve,
    pass_arrays,
    col_block,
    nv_of,
    open_buffers,
    state_views,
)
from rtrigid.backends.tree.loads import bias_forces, joint_forces, world_loads


@jit
def mass_matrix(tf, ti, Qg, x, q, R, rj, G, Ic, I6, F6, M):
    """M <- the joint-space mass matrix T^T M T + diag(armature) at Qg (nv x nv, the tree's
    rate order).

    Ic: (nb, 6, 6) scratch for the composite inertias, I6: (6, 6), F6: (6,).
    """
    geometry(tf, ti, Qg, x, q, R, rj, G)
    composite_mass_matrix(tf, ti, R, G, Ic, I6, F6, M)


@jit
def composite_mass_matrix(tf, ti, R, G, Ic, I6, F6, M):
    """M <- the joint-space mass matrix (as :func:`mass_matrix`) of the configuration whose
    geometry R, G is current, by composite inertias."""
    nb = ti.shape[0]
    for b in range(nb):
        joint_point_inertia(tf, b, R, G, Ic)
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            M[i, j] = 0.0
    for i in range(nb - 1, -1, -1):  # leaves first: Ic[b] holds its whole subtree when met
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_VOFF]
        for c in range(nv_of(kind)):
            off = col_block(kind, c)
            # the wrench about b's joint point that one unit of this rate's acceleration needs
            for r in range(6):
                F6[r] = (Ic[b, r, off] * G[b, c, 0] + Ic[b, r, off + 1] * G[b, c, 1]
                         + Ic[b, r, off + 2] * G[b, c, 2])
            for c2 in range(c + 1):  # the joint's own block, mirrored: exactly symmetric
                off2 = col_block(kind, c2)
                s = (G[b, c2, 0] * F6[off2] + G[b, c2, 1] * F6[off2 + 1]
                     + G[b, c2, 2] * F6[off2 + 2])
                M[o + c2, o + c] = s
                M[o + c, o + c2] = s
            j = b
            while ti[j, I_PARENT] >= 0:
                # the same wrench about the parent's joint point: n + d x f
                n = cross3(G[j, ROW_D, 0], G[j, ROW_D, 1], G[j, ROW_D, 2], F6[3], F6[4], F6[5])
                for k in range(3):
                    F6[k] += n[k]
                j = ti[j, I_PARENT]
                kj = ti[j, I_KIND]
                oj = ti[j, I_VOFF]
                for c2 in range(nv_of(kj)):
                    off2 = col_block(kj, c2)
                    s = (G[j, c2, 0] * F6[off2] + G[j, c2, 1] * F6[off2 + 1]
                         + G[j, c2, 2] * F6[off2 + 2])
                    M[oj + c2, o + c] = s
                    M[o + c, oj + c2] = s
        if p >= 0:
            for r in range(6):
                for c in range(6):
                    I6[r, c] = Ic[b, r, c]
            shift_to_parent(I6, G, b, Ic, p)
    for b in range(nb):
        if ti[b, I_KIND] == REVOLUTE or ti[b, I_KIND] == PRISMATIC:
            M[ti[b, I_VOFF], ti[b, I_VOFF]] += tf[b, T_ARM]


@jit
def inverse_dynamics(tables, Qg, nu, nudot, applied, full, x, q, passes, tau):
    """tau <- the generalized force the joints must add to give the accelerations ``nudot``.

    ``full``: the external loads are gravity, the applied forces and torques and the
    point-to-point springs, and the joint springs, dampers and ``held`` forces are taken as
    acting already (so tau is what must be added on top); otherwise the loads are gravity
    alone and nothing else acts (with nudot = 0: the bias forces).  ``tables``: a
    :data:`~.layout.TreeTables`; ``applied``: (f_app, t_app, held); ``passes``: the scratch
    of :func:`~.layout.pass_arrays` (its IA and tau serve as Ib and tp here).
    """
    tf, ti, pf, pi, gravity = tables
    f_app, t_app, held = applied
    R, rj, G, V, cb, Ib, U, Dinv, W, pA, acc, fext, I6, tp = passes
    geometry(tf, ti, Qg, x, q, R, rj, G)
    joint_velocities(ti, G, nu, V, cb)
    nb = ti.shape[0]
    if full:
        world_loads(tf, ti, pf, pi, gravity, x, R, G, f_app, t_app, fext)
    else:
        for b in range(nb):
            m = tf[b, T_MASS]
            n = cross3(G[b, ROW_C, 0], G[b, ROW_C, 1], G[b, ROW_C, 2], m * gravity[0],
                       m * gravity[1], m * gravity[2])
            for k in range(3):
                fext[b, k] = n[k]
                fext[b, 3 + k] = m * gravity[k]
    bias_forces(tf, ti, R, G, V, fext, pA)
    # root to leaves: a_b = X(d) a_p + S nudot + cb, X(d) a = (alpha, a + alpha x d)
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_VOFF]
        carry_acceleration(G, cb, acc, b, p)
        for c in range(nv_of(kind)):
            off = col_block(kind, c)
            for r in range(3):
                acc[b, off + r] += G[b, c, r] * nudot[o + c]
        # the body's own wrench about its joint point: I_J a + velocity terms - loads
        joint_point_inertia(tf, b, R, G, Ib)
        for r in range(6):
            s = pA[b, r]
            for m in range(6):
                s += Ib[b, r, m] * acc[b, m]
            pA[b, r] = s
    # leaves to root: each joint carries its subtree's wrench; its rates take S^T of it
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_VOFF]
        for c in range(nv_of(kind)):
            off = col_block(kind, c)
            tau[o + c] = (G[b, c, 0] * pA[b, off] + G[b, c, 1] * pA[b, off + 1]
                          + G[b, c, 2] * pA[b, off + 2])
        if kind == REVOLUTE or kind == PRISMATIC:
            tau[o] += tf[b, T_ARM] * nudot[o]
        if p >= 0:
            n = cross3(G[b, ROW_D, 0], G[b, ROW_D, 1], G[b, ROW_D, 2], pA[b, 3], pA[b, 4],
                       pA[b, 5])
            for r in range(3):
                pA[p, r] += pA[b, r] + n[r]
                pA[p, 3 + r] += pA[b, 3 + r]
    if full:
        # what acts already: the held forces and the joint springs and dampers
        joint_forces(tf, ti, Qg, nu, held, tp)
        for k in range(tau.shape[0]):
            tau[k] -= tp[k]


@jit
def forward_dynamics(tables, Qg, nu, applied, x, q, passes, nudot):
    """nudot <- the accelerations at (Qg, nu) with every load acting (gravity, applied loads,
    springs, joint springs and dampers, ``held`` joint forces): the articulated-body
    recursion the explicit kernel steps with, O(n).  False if the inertia is singular.
    ``tables``, ``applied`` and ``passes`` as :func:`inverse_dynamics` takes them."""
    tf, ti, pf, pi, gravity = tables
    f_app, t_app, held = applied
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    geometry(tf, ti, Qg, x, q, R, rj, G)
    joint_velocities(ti, G, nu, V, cb)
    world_loads(tf, ti, pf, pi, gravity, x, R, G, f_app, t_app, fext)
    bias_forces(tf, ti, R, G, V, fext, pA)
    joint_forces(tf, ti, Qg, nu, held, tau)
    ok = articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6)
    articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, nudot)
    return ok


@jit
def specific_force(acc, V, R, rj, x, gravity, b, point, out):
    """out <- a - g of body b's point ``point`` (body axes, from its centre of mass), in body
    axes, from its body's (angular acceleration, acceleration of the joint point) ``acc[b]``
    and (angular velocity, ...) ``V[b]``, world: a = a_J + alpha x r + omega x (omega x r)
    with r the point from the joint point."""
    p = rot_vec_b(R, b, point[0], point[1], point[2])
    r = (x[b, 0] + p[0] - rj[b, 0], x[b, 1] + p[1] - rj[b, 1], x[b, 2] + p[2] - rj[b, 2])
    ar = cross3(acc[b, 0], acc[b, 1], acc[b, 2], r[0], r[1], r[2])
    wr = cross3(V[b, 0], V[b, 1], V[b, 2], r[0], r[1], r[2])
    wwr = cross3(V[b, 0], V[b, 1], V[b, 2], wr[0], wr[1], wr[2])
    a = (acc[b, 3] + ar[0] + wwr[0] - gravity[0], acc[b, 4] + ar[1] + wwr[1] - gravity[1],
         acc[b, 5] + ar[2] + wwr[2] - gravity[2])
    f = rot_t_vec_b(R, b, a[0], a[1], a[2])
    for k in range(3):
        out[k] = f[k]


@jit
def point_jacobian(tf, ti, Qg, b, point, x, q, R, rj, G, J):
    """J <- (6, nv): rows [linear; angular] world velocity of body b's point ``point`` (body
    axes, from its centre of mass) per unit rate."""
    geometry(tf, ti, Qg, x, q, R, rj, G)
    for r in range(6):
        for c in range(J.shape[1]):
            J[r, c] = 0.0
    a = rot_vec_b(R, b, point[0], point[1], point[2])
    add_point_columns(ti, G, rj, b, (x[b, 0] + a[0], x[b, 1] + a[1], x[b, 2] + a[2]), 1.0, J)


@jit_inline
def add_point_columns(ti, G, rj, b, pw, sign, J):
    """J (6, nv) += sign [linear; angular] world velocity per unit rate of body b's material
    point at the world point pw (geometry already computed; nothing for the world, b < 0)."""
    j = b
    while j >= 0:
        kind = ti[j, I_KIND]
        o = ti[j, I_VOFF]
        for c in range(nv_of(kind)):
            u = (G[j, c, 0], G[j, c, 1], G[j, c, 2])
            if col_block(kind, c) == 0:  # a turn about the joint point
                lin = cross3(u[0], u[1], u[2], pw[0] - rj[j, 0], pw[1] - rj[j, 1],
                             pw[2] - rj[j, 2])
                for k in range(3):
                    J[k, o + c] += sign * lin[k]
                    J[3 + k, o + c] += sign * u[k]
            else:
                for k in range(3):
                    J[k, o + c] += sign * u[k]
        j = ti[j, I_PARENT]


@jit
def momentum_rates(tf, ti, Qg, v, L, rotor, x, q, passes, nu_out, v_out, w_out):
    """nu_out <- (T^T M T + A)^-1 (T^T p + A r) for the body momenta p = (m v, R L) at Qg (v:
    world centre-of-mass velocities, L: body-axis angular momenta about the centres) and the
    armatures' rotor momenta A r (A = diag(armature), r = ``rotor``: rates, read where a
    joint has an armature, before nu_out is written; it may be nu_out), and v_out,
    w_out <- the bodies' velocities T nu_out (world, body axes).  False if the joint-space
    inertia is singular.  ``passes``: the scratch of :func:`~.layout.pass_arrays`."""
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
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
    for b in range(nb):
        if tf[b, T_ARM] != 0.0:
            tau[ti[b, I_VOFF]] = tf[b, T_ARM] * rotor[ti[b, I_VOFF]]
    articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, nu_out)
    joint_velocities(ti, G, nu_out, V, cb)
    body_rates(ti, R, G, V, v_out, w_out)
    return ok


@jit
def changed(S, seen):
    """True, and seen <- S, when S differs from ``seen`` (a cheap staleness test)."""
    for i in range(S.shape[0]):
        if S[i] != seen[i] or S[i] != S[i]:  # a NaN never matches
            for k in range(S.shape[0]):
                seen[k] = S[k]
            return True
    return False


@jit
def rates_of_momenta(F, I, x, q, nu, v, w):
    """:func:`momentum_rates` of the state in the tree backend's buffers (its bodies'
    momenta: v and L), into nu, v, w; its scratch is the kernels' (x, q: (nb, 3), (nb, 4))."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu_s, x_s, q_s, v_s, w_s, L = state_views(S, nb, nq, nv)
    return momentum_rates(tf, ti, Qg, v_s, L, nu_s, x, q, pass_arrays(carve(work, nb, nq, nv)),
                          nu, v, w)


class Queries:
    """The dynamics queries of one model, with their scratch allocated once.

    Built from the model (its own :class:`~.kinematics.Tree`), so it answers for either
    backend given the coordinates and rates in the tree's order.  Results are new arrays in
    that order.
    """

    def __init__(self, model, closure=None):
        self.tree = tree = Tree(model)
        nb, nq, nv = tree.nb, tree.nq, tree.nv
        self.nv = nv
        self._arrays = TreeTables(tree.tf, tree.ti, tree.pf, tree.pi, tree.gravity)
        self._work = np.zeros(int(base_work_size.py_func(nb, nq, nv)))
        self._scr = carve.py_func(self._work, nb, nq, nv)
        self._x, self._q = np.zeros((nb, 3)), np.zeros((nb, 4))
        self._F6 = np.zeros(6)
        self._zero_loads = np.zeros((nb, 3)), np.zeros((nb, 3)), np.zeros(nv)
        # closed loops: their rows on this tree (rank set by the simulation, see
        # :meth:`motion`) and, after each motion, every loop joint's reaction on its child
        # ``closure``: the class that makes them (:class:`~.loops.LoopClosure`, passed in,
        # since the loops build on this module)
        self.loops = None
        self.loop_wrenches = []
        if getattr(model, "loop_joints", None) or getattr(model, "couplings", None):
            self.loops = closure.for_model(tree, model, self._scr)

    def slots(self, b):
        """(coordinate slice, rate slice) of body b's joint in the tree's order."""
        ti = self.tree.ti
        kind, o, ov = int(ti[b, I_KIND]), int(ti[b, I_QOFF]), int(ti[b, I_VOFF])
        return slice(o, o + int(NQ[kind])), slice(ov, ov + int(NV[kind]))

    def mass_matrix(self, Qg):
        tf, ti = self._arrays.tf, self._arrays.ti
        R, rj, G, IA, I6 = self._scr.R, self._scr.rj, self._scr.G, self._scr.IA, self._scr.I6
        M = np.empty((self.nv, self.nv))
        mass_matrix(tf, ti, Qg, self._x, self._q, R, rj, G, IA, I6, self._F6, M)
        return M

    def inverse_dynamics(self, Qg, nu, nudot, loads=None):
        """tau for nudot; ``loads`` = (f_app, t_app, held) of the simulation, or None for
        gravity alone (then with nudot = 0 this is the bias force)."""
        applied = self._zero_loads if loads is None else loads
        tau = np.empty(self.nv)
        inverse_dynamics(self._arrays, Qg, nu, nudot, applied, loads is not None, self._x,
                         self._q, pass_arrays.py_func(self._scr), tau)
        return tau

    def motion(self, Qg, nu, loads, limits):
        """The motion at the state (Qg, nu) under ``loads`` = (f_app, t_app, held), the joint
        limits acting: (nudot, acc, wrench, V, rj, R); all but nudot are views of the
        scratch, valid until the next query.

        nudot by forward dynamics (:func:`forward_dynamics`), with each joint that sits on a
        limit (``limits``: (rate index, coordinate index, lower, upper) per limited joint)
        and does not move off it pushed by the least force that
        keeps its acceleration off the limit (a small complementarity problem, solved by
        active sets); that force counts among the held ones.  acc: each body's (angular
        acceleration, acceleration of its joint point), world; wrench: (moment about the
        joint point, force) that each joint transmits to its child's subtree, world; V: each
        body's (angular velocity, velocity of the joint point); rj: the joint points; R: the
        bodies' rotations.
        """
        f_app, t_app, held = loads
        passes = pass_arrays.py_func(self._scr)
        R, rj, V, pA, acc = passes.R, passes.rj, passes.V, passes.pA, passes.acc
        nudot = np.empty(self.nv)
        forward_dynamics(self._arrays, Qg, nu, (f_app, t_app, held), self._x, self._q, passes,
                         nudot)
        tree_free = nudot
        if self.loops is not None:  # the limits push against what the loops let through
            nudot = self._loop_free(Qg, nu, loads)
        touching = []
        for ov, o, lo, hi in limits:
            for lim, sign in ((lo, 1.0), (hi, -1.0)):
                if abs(Qg[o] - lim) <= 1e-12 * max(1.0, abs(lim)) and sign * nu[ov] <= 1e-9:
                    touching.append((ov, sign))
        if touching:
            K = np.array(self.mass_matrix(Qg))
            if self.loops is None:
                Minv = np.linalg.inv(K)
            else:  # generalized force -> acceleration with the loops acting
                N = np.linalg.svd(self.loops.jacobian(Qg))[2][self.loops.rank:].T
                Minv = N @ np.linalg.solve(N.T @ K @ N, N.T)
            free = nudot.copy()
            active = [c for c, (ov, sign) in enumerate(touching) if sign * free[ov] < 0.0]
            push = np.zeros(len(touching))
            for _ in range(2 * len(touching) + 1):
                push[:] = 0.0
                if active:
                    idx = [touching[c][0] for c in active]
                    sg = np.array([touching[c][1] for c in active])
                    A = (Minv[np.ix_(idx, idx)] * sg[:, None]) * sg[None, :]
                    push[active] = np.linalg.solve(A, -sg * free[idx])
                gen = np.zeros(self.nv)
                for c, (ov, sign) in enumerate(touching):
                    gen[ov] += sign * push[c]
                nudot = free + Minv @ gen
                pulling = [c for c in active if push[c] < 0.0]
                if pulling:
                    active.remove(min(pulling, key=lambda c: push[c]))
                    continue
                entering = [c for c, (ov, sign) in enumerate(touching)
                            if c not in active and sign * nudot[ov] < -1e-12]
                if not entering:
                    break
                active.append(entering[0])
            held = held + gen
            if self.loops is not None:  # the tree's own accelerations, the limits pushing
                forward_dynamics(self._arrays, Qg, nu, (f_app, t_app, held), self._x, self._q,
                                 passes, tree_free)
        if self.loops is not None:
            nudot, f_app, t_app, held = self._loop_reactions(Qg, nu, (f_app, t_app, held),
                                                             tree_free)
        inverse_dynamics(self._arrays, Qg, nu, nudot, (f_app, t_app, held), True, self._x,
                         self._q, passes, np.empty(self.nv))
        return nudot, acc, pA, V, rj, R

    def _loop_free(self, Qg, nu, loads):
        """The accelerations the loops allow under ``loads``, no limit pushing."""
        lc = self.loops
        if lc.rank is None:
            lc.rank = lc.mobility_at(Qg)[1]
        out = np.empty(self.nv)
        lc.acceleration(Qg, nu, loads, out)
        return out

    def _loop_reactions(self, Qg, nu, loads, free):
        """The loops' part of :meth:`motion`: (nudot, f_app, t_app, held) with nudot the
        accelerations the loops allow (:meth:`~.loops.LoopClosure.acceleration`) and the
        loads plus the loop joints' reactions on the bodies and the couplings' joint forces
        (:meth:`~.loops.LoopClosure.reactions`), so that the tree's recursions see every
        force.  Sets ``loop_wrenches``: per loop joint (force, torque about its child's
        anchor) on its child, world axes."""
        lc = self.loops
        if lc.rank is None:
            lc.rank = lc.mobility_at(Qg)[1]
        nudot = np.empty(self.nv)
        lc.acceleration(Qg, nu, loads, nudot)
        f_app, t_app, held = loads[0].copy(), loads[1].copy(), loads[2].copy()
        self.loop_wrenches = lc.reactions(Qg, nudot - free, f_app, t_app, held)
        return nudot, f_app, t_app, held

    def jacobian(self, Qg, b, point):
        tf, ti = self._arrays.tf, self._arrays.ti
        R, rj, G = self._scr.R, self._scr.rj, self._scr.G
        J = np.empty((6, self.nv))
        point_jacobian(tf, ti, Qg, b, point, self._x, self._q, R, rj, G, J)
        return J
