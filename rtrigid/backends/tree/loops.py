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

After each step the coordinates are put back on the constraint manifold by Newton's
method on the residuals with the least K-norm correction, and the rates by the K-orthogonal
projection onto J nu = 0 (both :func:`correction`), so the loop closes to round-off.
"""
from __future__ import annotations

import numpy as np

from rtrigid.backends.tree.kinematics import (
    I_ORDER,
    I_PARENT,
    ROW_D,
    coordinate_rates,
    geometry,
    joint_velocities,
    normalize_coordinates,
)
from rtrigid.backends.tree.dynamics import forward_dynamics, mass_matrix, point_jacobian
from rtrigid.joints import geometry as joint_geometry
from rtrigid.maths import quat

# rows per kind: (translation directions, rotation directions, rotation residual)
_ROWS = {
    "spherical": ((0, 1, 2), (), None),
    "revolute": ((0, 1, 2), (0, 1), "axis"),
    "prismatic": ((0, 1), (0, 1, 2), "frame"),
    "cylindrical": ((0, 1), (0, 1), "axis"),
    "planar": ((2,), (0, 1), "axis"),
    "fixed": ((0, 1, 2), (0, 1, 2), "frame"),
}

RANK_GAP = 1e-9     # a singular value below this fraction of the largest is round-off
SINGULAR = 1e-6     # one between RANK_GAP and this is a near-singular configuration
CLOSED = 1e-13      # position projection stops below this residual (m, rad)


def _cross(a, b):
    """a x b of two 3-vectors (np.cross costs ~20 us a call on small vectors)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def count_rows(kind):
    t, r, _ = _ROWS[kind]
    return len(t) + len(r)


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
        self.trans, self.rots, self.rot_kind = _ROWS[joint.kind]
        self.m = len(self.trans) + len(self.rots)


class LoopClosure:
    """The loop constraints of a model on its tree (:class:`~.kinematics.Tree`): residuals,
    Jacobian, acceleration terms, constrained accelerations and projections."""

    def __init__(self, tree, loop_joints, scratch):
        self.tree = tree
        self.loops = [Loop(j) for j in loop_joints]
        self.m = sum(lp.m for lp in self.loops)
        self.nv = tree.nv
        nb = tree.nb
        self._x, self._q = np.zeros((nb, 3)), np.zeros((nb, 4))
        self._scr = scratch
        self._J6 = np.zeros((6, tree.nv))
        self._M = np.zeros((tree.nv, tree.nv))
        self._F6 = np.zeros(6)
        self._acc = np.zeros((nb, 6))
        self._dQ = np.zeros(tree.nq)
        self.rank = None  # the mechanism's constraint rank, fixed by :meth:`assemble`

    # -- kinematics of the cut joints -------------------------------------------------------
    def _pose(self, b):
        if b < 0:
            return np.zeros(3), np.eye(3)
        R = self._scr[0]
        return self._x[b], R[b]

    def _geometry(self, Qg):
        R, rj, G = self._scr[:3]
        geometry(self.tree.tf, self.tree.ti, Qg, self._x, self._q, R, rj, G)

    def _world_rows(self, lp):
        """(anchor p_C, separation d, parent frame rows in world axes, child axis, error
        quaternion) at the current geometry."""
        xp, Rp = self._pose(lp.parent)
        xc, Rc = self._pose(lp.child)
        pc = xc + Rc @ lp.anchor_child
        d = pc - (xp + Rp @ lp.anchor_parent)
        frame = lp.frame @ Rp.T  # rows e1, e2, u in world axes
        return pc, d, frame, Rc @ lp.axis_child

    def residual(self, Qg):
        """Phi(Qg): every loop's residual rows (see the module's table)."""
        self._geometry(Qg)
        out = np.empty(self.m)
        k = 0
        for lp in self.loops:
            pc, d, frame, uc = self._world_rows(lp)
            for i in lp.trans:
                out[k] = frame[i] @ d
                k += 1
            if lp.rot_kind == "axis":
                out[k] = -frame[1] @ uc
                out[k + 1] = frame[0] @ uc
                k += 2
            elif lp.rot_kind == "frame":
                qp = self._q[lp.parent] if lp.parent >= 0 else np.array([1.0, 0.0, 0.0, 0.0])
                e = quat.mul(self._q[lp.child], quat.conj(quat.mul(qp, lp.r0)))
                vec = 2.0 * np.sign(e[0] if e[0] != 0.0 else 1.0) * e[1:]
                for i in lp.rots:
                    out[k] = frame[i] @ vec
                    k += 1
        return out

    def _point_jacobian(self, b, point_world):
        """(6, nv) [linear; angular] world velocity of body b's material point at a world
        point, per unit rate (zero for the world)."""
        J = np.zeros((6, self.nv))
        if b < 0:
            return J
        R, rj, G = self._scr[:3]
        local = R[b].T @ (point_world - self._x[b])
        point_jacobian(self.tree.tf, self.tree.ti, self._Q, b, local, self._x, self._q, R, rj,
                       G, J)
        return J

    def jacobian(self, Qg):
        """J(Qg): (m, nv), J nu = the rows' rates."""
        self._geometry(Qg)
        self._Q = Qg
        J = np.empty((self.m, self.nv))
        k = 0
        for lp in self.loops:
            pc, d, frame, uc = self._world_rows(lp)
            dJ = self._point_jacobian(lp.child, pc) - self._point_jacobian(lp.parent, pc)
            for i in lp.trans:
                J[k] = frame[i] @ dJ[:3]
                k += 1
            for i in lp.rots:
                J[k] = frame[i] @ dJ[3:]
                k += 1
        return J

    def _motion_at_rest(self, Qg, nu):
        """Per body (omega, velocity of the joint point) and (alpha, acceleration of the
        joint point) with nu' = 0, world axes."""
        ti = self.tree.ti
        R, rj, G, V, cb = self._scr[:5]
        geometry(self.tree.tf, ti, Qg, self._x, self._q, R, rj, G)
        joint_velocities(ti, G, nu, V, cb)
        acc = self._acc
        for i in range(ti.shape[0]):
            b = ti[i, I_ORDER]
            p = ti[b, I_PARENT]
            acc[b] = cb[b]
            if p >= 0:
                acc[b, :3] += acc[p, :3]
                acc[b, 3:] += acc[p, 3:] + _cross(acc[p, :3], G[b, ROW_D])
        return V, acc, rj

    def gamma(self, Qg, nu):
        """gamma(Qg, nu): the rows' second derivatives at nu' = 0 (J nu' = -gamma)."""
        V, acc, rj = self._motion_at_rest(Qg, nu)
        out = np.empty(self.m)
        k = 0
        zero = np.zeros(3)
        for lp in self.loops:
            pc, d, frame, uc = self._world_rows(lp)
            sides = []
            for b in (lp.child, lp.parent):
                if b < 0:
                    sides.append((zero, zero, zero, zero))
                    continue
                r = pc - rj[b]
                om, al = V[b, :3], acc[b, :3]
                vel = V[b, 3:] + _cross(om, r)
                a = acc[b, 3:] + _cross(al, r) + _cross(om, _cross(om, r))
                sides.append((om, vel, al, a))
            (oc, vc, alc, ac), (op, vp, alp, ap) = sides
            dv, da, dw, dal = vc - vp, ac - ap, oc - op, alc - alp
            for i in lp.trans:
                t = frame[i]
                out[k] = t @ da + 2.0 * _cross(op, t) @ dv
                k += 1
            for i in lp.rots:
                r = frame[i]
                out[k] = r @ dal + _cross(op, r) @ dw
                k += 1
        return out

    def mass_matrix(self, Qg):
        R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6 = self._scr[:13]
        mass_matrix(self.tree.tf, self.tree.ti, Qg, self._x, self._q, R, rj, G, IA, I6,
                    self._F6, self._M)
        return self._M

    # -- the null space ---------------------------------------------------------------------
    def split(self, J):
        """(V_r, S_r, U_r, N) of J truncated at the mechanism's rank."""
        U, s, Vt = np.linalg.svd(J)
        r = self.rank
        return Vt[:r].T, s[:r], U[:, :r], Vt[r:].T

    def acceleration(self, Qg, nu, loads, out):
        """out <- nu' = p + N (N^T K N)^-1 N^T K (a_f - p) (the module's docstring); False
        if the tree's inertia is singular."""
        tree = self.tree
        f_app, t_app, held = loads
        R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = self._scr[:14]
        ok = forward_dynamics(tree.tf, tree.ti, tree.pf, tree.pi, tree.gravity, Qg, nu, f_app,
                              t_app, held, self._x, self._q, R, rj, G, V, cb, IA, U, Dinv, W,
                              pA, acc, fext, I6, tau, out)
        gam = self.gamma(Qg, nu)
        J = self.jacobian(Qg)
        K = self.mass_matrix(Qg)
        Vr, sr, Ur, N = self.split(J)
        p = Vr @ ((Ur.T @ -gam) / sr)
        if N.shape[1]:
            KN = K @ N
            y = np.linalg.solve(N.T @ KN, KN.T @ (out - p))
            out[:] = p + N @ y
        else:
            out[:] = p
        return ok

    def correction(self, J, K, defect, free=None):
        """The least K-norm change delta of the free rates (all if ``free`` is None) with
        J delta = -defect, in the least-squares sense at the mechanism's rank."""
        delta = np.zeros(self.nv)
        if free is None:
            free = slice(None)
        Jf, Kf = J[:, free], K[free][:, free]
        L = np.linalg.cholesky(Kf)
        A = np.linalg.solve(L, Jf.T).T  # J L^-T
        delta[free] = np.linalg.solve(L.T, -np.linalg.pinv(A, rcond=RANK_GAP) @ defect)
        return delta

    def retract(self, Qg, delta):
        """Qg moved by the rate-space increment delta (first order), quaternions normalised."""
        coordinate_rates(self.tree.ti, Qg, delta, self._dQ)
        Qg += self._dQ
        normalize_coordinates(self.tree.ti, Qg)

    def close_positions(self, Qg, free=None, max_iter=12):
        """Newton's method on Phi(Qg) = 0 with least K-norm corrections; the final |Phi|."""
        for _ in range(max_iter):
            phi = self.residual(Qg)
            err = float(np.max(np.abs(phi))) if phi.size else 0.0
            if err <= CLOSED:
                return err
            delta = self.correction(self.jacobian(Qg), self.mass_matrix(Qg), phi, free)
            self.retract(Qg, delta)
        phi = self.residual(Qg)
        return float(np.max(np.abs(phi))) if phi.size else 0.0

    def close_rates(self, Qg, nu, free=None):
        """nu <- its K-orthogonal projection onto J nu = 0 (changing only the free rates);
        the final |J nu|."""
        J = self.jacobian(Qg)
        nu += self.correction(J, self.mass_matrix(Qg), J @ nu, free)
        r = J @ nu
        return float(np.max(np.abs(r))) if r.size else 0.0

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
    :mod:`rtrigid.backends`, on the backend's buffers; written with numpy around the
    compiled tree passes (dense rows and a small SVD per stage)."""

    WEIGHTS = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)
    NODES = (0.0, 0.5, 0.5, 1.0)

    def __init__(self, backend, closure):
        self.be = backend
        self.closure = closure
        nq, nv = backend.tree.nq, backend.tree.nv
        self._Q0, self._nu0 = np.zeros(nq), np.zeros(nv)
        self._Qs, self._nus = np.zeros(nq), np.zeros(nv)
        self._dQ, self._dnu = np.zeros(nq), np.zeros(nv)
        self._sQ, self._snu = np.zeros(nq), np.zeros(nv)

    def __call__(self, n, dt, F, I):
        from rtrigid.backends.buffers import NONFINITE, OK, STAT_STEPS

        be, closure = self.be, self.closure
        ti = be.tree.ti
        loads = be.loads()
        Q0, nu0, Qs, nus = self._Q0, self._nu0, self._Qs, self._nus
        dQ, dnu, sQ, snu = self._dQ, self._dnu, self._sQ, self._snu
        for _ in range(n):
            be.S_prev[:] = be.S
            Q0[:], nu0[:] = be.Qg, be.nu
            dQ[:], dnu[:] = 0.0, 0.0
            ok = True
            try:
                with np.errstate(all="raise"):
                    for c, wt in zip(self.NODES, self.WEIGHTS):
                        np.add(Q0, c * dt * dQ, out=Qs)
                        np.add(nu0, c * dt * dnu, out=nus)
                        coordinate_rates(ti, Qs, nus, dQ)
                        ok &= closure.acceleration(Qs, nus, loads, dnu)
                        if c == 0.0:
                            sQ[:], snu[:] = wt * dQ, wt * dnu
                        else:
                            sQ += wt * dQ
                            snu += wt * dnu
                    be.Qg[:] = Q0 + dt * sQ
                    be.nu[:] = nu0 + dt * snu
                    normalize_coordinates(ti, be.Qg)
                    ok &= closure.close_positions(be.Qg) <= 1e-9
                    closure.close_rates(be.Qg, be.nu)
                    be._sync(teleport=False)
            except (FloatingPointError, np.linalg.LinAlgError):
                ok = False
            if not (ok and np.all(np.isfinite(be.S))):
                be.S[:] = be.S_prev
                return NONFINITE
            be.stats[STAT_STEPS] += 1
        return OK


class LoopEnergyMomentum:
    """``energy_momentum`` (and, composed, ``energy_momentum4``) on a tree of revolute,
    prismatic, cylindrical and planar joints with loop joints: a discrete-gradient step in the
    tree's coordinates Q and momenta P = K(Q) nu, the loops held at t_{n+1} by the solve.

    H(Q, P) = 1/2 P^T K(Q)^-1 P + V(Q), V gravity, springs, the applied forces at the centres
    and the held joint forces as potentials.  One step (Gonzalez's discrete gradient, the
    bar; z = (Q, P), mid = (z0 + z1)/2):

        Q1 - Q0 = h dH_bar/dP,   P1 - P0 = -h dH_bar/dQ + Phi_bar^T lambda,   Phi(Q1) = 0,

    dH_bar = dH(mid) + (H(z1) - H(z0) - dH(mid).dz) dz / |dz|^2 (so dH_bar.dz = H1 - H0
    exactly) and Phi_bar likewise row by row (so Phi_bar dQ = Phi(Q1) - Phi(Q0) = 0).  Then
    H1 - H0 = lambda . (Phi(Q1) - Phi(Q0)) / h = 0: the reactions do no work.  The multipliers
    are eliminated by the discrete null space: the momentum equation is projected onto the
    null space of Phi_bar (its rank truncated at the mechanism's, so redundant rows are
    harmless), and the overdetermined, consistent system is solved by Gauss-Newton with a
    rank-revealing least-squares step.  dH(mid) by central differences; the Newton matrix
    by forward differences, kept across steps while it still converges within 8 iterations
    (a chord iteration; a stalled one forms it afresh at the step's predictor).  Rates at t_{n+1}:
    nu1 = K(Q1)^-1 P1, which meets J nu = 0 only to O(h^2) (as the tree scheme's).
    Applied torques enter as the generalized force of the mean configuration (their work is
    then not exact).
    """

    def __init__(self, backend, closure, weights=(1.0,)):
        self.be, self.lc = backend, closure
        self.weights = weights
        tree = backend.tree
        self.n = tree.nv
        self._pinv = {}  # h -> pseudo-inverse of the Newton matrix, kept across steps

    # -- the Hamiltonian ---------------------------------------------------------------------
    def _potential(self, Q, loads):
        """V(Q): gravity, point springs, applied forces at the centres, held forces."""
        from rtrigid.backends.tree.kinematics import spring_point

        tree, lc = self.be.tree, self.lc
        f_app, t_app, held = loads
        lc._geometry(Q)
        x, R = lc._x, lc._scr[0]
        g = tree.gravity
        V = -float(np.sum(tree.tf[:, 0] * (x @ g))) - float(np.sum(f_app * x)) - float(held @ Q)
        for s in range(tree.ns):
            a, b = tree.pi[s]
            pa = np.array(spring_point(tree.pf, s, 0, a, x, R))
            pb = np.array(spring_point(tree.pf, s, 3, b, x, R))
            V += 0.5 * tree.pf[s, 6] * (np.linalg.norm(pb - pa) - tree.pf[s, 7]) ** 2
        return V

    def _hamiltonian(self, Q, P, loads):
        K = self.lc.mass_matrix(Q)
        return 0.5 * P @ np.linalg.solve(K, P) + self._potential(Q, loads)

    def _torque_force(self, Q, t_app):
        """The applied torques' generalized force at Q."""
        out = np.zeros(self.n)
        lc = self.lc
        for b in np.flatnonzero(np.any(t_app != 0.0, axis=1)):
            lc._geometry(Q)
            lc._Q = Q
            J = lc._point_jacobian(int(b), lc._x[b])
            out += J[3:].T @ t_app[b]
        return out

    def _residual(self, h, Q0, P0, H0, phi0, z1, loads):
        n, lc = self.n, self.lc
        Q1, P1 = z1[:n], z1[n:]
        Qm, Pm = 0.5 * (Q0 + Q1), 0.5 * (P0 + P1)
        K = lc.mass_matrix(Qm).copy()
        gP = np.linalg.solve(K, Pm)
        gQ = np.empty(n)
        for i in range(n):
            eps = 1e-6 * max(1.0, abs(Qm[i]))
            Qa, Qb = Qm.copy(), Qm.copy()
            Qa[i] += eps
            Qb[i] -= eps
            gQ[i] = (self._hamiltonian(Qa, Pm, loads)
                     - self._hamiltonian(Qb, Pm, loads)) / (2.0 * eps)
        dQ, dP = Q1 - Q0, P1 - P0
        dz2 = dQ @ dQ + dP @ dP
        if dz2 > 0.0:
            c = (self._hamiltonian(Q1, P1, loads) - H0 - gQ @ dQ - gP @ dP) / dz2
            gQ, gP = gQ + c * dQ, gP + c * dP
        phi1 = lc.residual(Q1)
        Jm = lc.jacobian(Qm)
        dq2 = dQ @ dQ
        if dq2 > 0.0:
            Jm = Jm + np.outer(phi1 - phi0 - Jm @ dQ, dQ) / dq2
        a = dP + h * gQ - h * self._torque_force(Qm, loads[1])
        U, s, Vt = np.linalg.svd(Jm)
        Vr = Vt[:lc.rank].T
        return np.concatenate([dQ - h * gP, a - Vr @ (Vr.T @ a), phi1])

    def _solve_step(self, h, Q0, P0, z1, loads, max_iter, stats):
        from rtrigid.backends.buffers import STAT_ITERS, STAT_MAX_ITERS

        n = self.n
        H0 = self._hamiltonian(Q0, P0, loads)
        phi0 = self.lc.residual(Q0)
        res = lambda z: self._residual(h, Q0, P0, H0, phi0, z, loads)  # noqa: E731
        r = res(z1)
        for fresh in (False, True):
            if fresh or h not in self._pinv:
                A = np.empty((r.size, 2 * n))
                for k in range(2 * n):
                    eps = 1e-7 * max(1.0, abs(z1[k]))
                    zk = z1.copy()
                    zk[k] += eps
                    A[:, k] = (res(zk) - r) / eps
                self._pinv[h] = np.linalg.pinv(A, rcond=RANK_GAP)
                fresh = True
            pinv = self._pinv[h]
            last = np.inf
            # a matrix kept from earlier steps gets a few iterations, a fresh one all
            for it in range(1, (max_iter if fresh else 8) + 1):
                dz = -pinv @ r
                z1 = z1 + dz
                r = res(z1)
                size = float(np.max(np.abs(dz)) / max(1.0, float(np.max(np.abs(z1)))))
                norm = float(np.max(np.abs(r)))
                if size <= 1e-15 or (norm >= 0.9 * last and size <= 1e-13):
                    stats[STAT_ITERS] += it
                    stats[STAT_MAX_ITERS] = max(stats[STAT_MAX_ITERS], it)
                    return z1, True
                if not np.isfinite(norm) or (norm > last and not fresh):
                    break
                last = norm
            if fresh:
                return z1, False
        return z1, False

    def __call__(self, n_steps, dt, F, I):
        from rtrigid.backends.buffers import FAILED, OK, SOLVER_MAX_ITER, STAT_STEPS

        be, lc, n = self.be, self.lc, self.n
        loads = be.loads()
        max_iter = int(be.solver[SOLVER_MAX_ITER])
        for _ in range(n_steps):
            be.S_prev[:] = be.S
            Q, nu = be.Qg.copy(), be.nu.copy()
            P = lc.mass_matrix(Q) @ nu
            ok = True
            try:
                with np.errstate(all="raise"):
                    for wt in self.weights:
                        h = wt * dt
                        z1 = np.concatenate([Q + h * nu, P])  # explicit predictor
                        z1, ok = self._solve_step(h, Q, P, z1, loads, max_iter, be.stats)
                        if not ok:
                            break
                        Q, P = z1[:n].copy(), z1[n:].copy()
                        nu = np.linalg.solve(lc.mass_matrix(Q), P)
            except (FloatingPointError, np.linalg.LinAlgError):
                ok = False
            if not ok or not np.all(np.isfinite(Q)) or not np.all(np.isfinite(nu)):
                be.S[:] = be.S_prev
                return FAILED
            be.Qg[:], be.nu[:] = Q, nu
            be._sync(teleport=False)
            be.stats[STAT_STEPS] += 1
        return OK


def stepper(integrator, options, backend):
    """The step callable (kernel signature) of ``integrator`` for a tree with loop joints;
    ``ValueError`` naming ``integrator`` for a model its loop scheme cannot step."""
    closure = backend.loops
    if integrator == "nullspace_rk4":
        return LoopStepper(backend, closure)
    quaternions = [j.name for j in backend.joints if j.kind in ("free", "spherical")]
    if quaternions:
        raise ValueError(f"integrator: {integrator} steps loops on trees of revolute, "
                         f"prismatic, cylindrical and planar joints only (joint "
                         f"{quaternions[0]!r} has a quaternion); use nullspace_rk4")
    if integrator == "energy_momentum":
        return LoopEnergyMomentum(backend, closure)
    from rtrigid.backends.compositions import COMPOSITIONS

    return LoopEnergyMomentum(backend, closure, COMPOSITIONS[options["composition"]])
