"""The :class:`~rtrigid.simulation.Simulation` of a jointed model (tree kernels).

``Simulation(model, ...)`` returns a :class:`MultibodySimulation` when the model has joints or
springs between bodies; the public API is the same, plus joint-space setters.  The state is
the generalized coordinates and rates of :mod:`rtrigid.multibody`; the bodies' x, q, v, w
views are kept up to date after every step and setter.
"""
from __future__ import annotations

import numpy as np

from rtrigid import joints as jointlib
from rtrigid import quat
from rtrigid.integrators import multibody_em, multibody_rk4
from rtrigid.integrators.common import N_STATS
from rtrigid.model import Model, as_vector
from rtrigid.multibody import (
    FREE6,
    I_KIND,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    NQ,
    NV,
    PRISMATIC,
    REVOLUTE,
    SPHERICAL,
    T_AC,
    T_J,
    T_K,
    T_MASS,
    T_R0,
    T_REST,
    T_UC,
    Tree,
    carve,
    impulse_response,
    refresh_bodies,
    spring_point,
    state_size,
    state_views,
)
from rtrigid.simulation import Simulation

MULTIBODY = {"nullspace_rk4": multibody_rk4, "energy_momentum": multibody_em}


class MultibodySimulation(Simulation):
    """Fixed-step simulation of a jointed model; see :class:`Simulation` for the shared API.

    Joint coordinates: :meth:`joint_position` / :meth:`set_joint_position` and the rate
    counterparts, per joint name (``Model.add_joint(name=...)``, default ``kind_childname``).
    """

    def __init__(self, model: Model, integrator="energy_momentum", dt=0.01, *, max_iter=25,
                 max_halvings=6, max_steps_per_advance=64):
        max_iter, max_halvings = self._settings(model, integrator, MULTIBODY, dt, max_iter,
                                                max_halvings, max_steps_per_advance)
        self.tree = tree = Tree(model)
        if integrator == "energy_momentum":
            for j in tree.joints:
                if j.kind not in multibody_em.SUPPORTED:
                    raise ValueError(f"integrator: energy_momentum does not support {j.kind} "
                                     f"joints yet (joint {j.name!r}); use nullspace_rk4")
                if j.stiffness or j.damping:
                    raise ValueError(f"integrator: energy_momentum does not support joint "
                                     f"springs or dampers yet (joint {j.name!r}); use "
                                     "nullspace_rk4 or a point-to-point spring")
        nb, nq, nv = tree.nb, tree.nq, tree.nv
        module = MULTIBODY[integrator]
        self._kernel = module.step
        mf, mi = tree.model_arrays()
        n_state = state_size(nb, nq, nv)
        o_state = len(mf)
        o_prev = o_state + n_state
        o_applied = o_prev + n_state
        o_solver = o_applied + 6 * nb
        o_work = o_solver + 2
        self._F = np.zeros(o_work + module.work_size(nb, nq, nv))
        self._I = np.zeros(len(mi) + N_STATS, dtype=np.int64)
        self._F[:o_state] = mf
        self._I[:len(mi)] = mi
        self._S = self._F[o_state:o_prev]
        self._S_prev = self._F[o_prev:o_applied]
        self._A = self._F[o_applied:o_solver]
        self._solver = self._F[o_solver:o_work]
        self._solver[:] = (max_iter, max_halvings)
        self._work = self._F[o_work:]
        self._stats = self._I[len(mi):]
        self._tf, self._ti = tree.tf, tree.ti
        (self.Qg, self.nu, self.x, self.q, self.v, self.w, self._L) = state_views(
            self._S, nb, nq, nv)
        self._x_prev, self._q_prev = state_views(self._S_prev, nb, nq, nv)[2:4]
        self._f_app = self._A[:3 * nb].reshape(nb, 3)
        self._t_app = self._A[3 * nb:].reshape(nb, 3)
        self._mass = tree.tf[:, T_MASS].copy()
        self._inertia = tree.tf[:, T_J:T_J + 3].copy()
        self.model_mass, self.model_inertia = self._mass, self._inertia
        self.model_gravity = tree.gravity
        self.joint_names = [j.name for j in tree.joints]
        self.Qg[:] = tree.Q0
        self._sync()

    # -- internal ------------------------------------------------------------------------
    def _scratch(self):
        return carve(self._work, self.tree.nb, self.tree.nq, self.tree.nv)

    def _sync(self, teleport=True):
        """Rewrite the bodies' views from (Qg, nu); a teleport also resets the previous pose."""
        refresh_bodies(self._tf, self._ti, self.Qg, self.nu, self.x, self.q, self.v, self.w,
                       self._L, *self._scratch()[:5])
        if teleport:
            self._S_prev[:] = self._S

    def _joint(self, joint) -> int:
        """Resolve a joint name or index to the index of its child body."""
        if isinstance(joint, (int, np.integer)) and not isinstance(joint, bool):
            if 0 <= joint < self.nb:
                return int(joint)
            raise ValueError(f"joint: index {joint} out of range (0..{self.nb - 1})")
        if isinstance(joint, str) and joint in self.joint_names:
            return self.joint_names.index(joint)
        raise ValueError(f"joint: no joint {joint!r}; known: {self.joint_names}")

    def _coords(self, b):
        kind = int(self._ti[b, I_KIND])
        o, ov = int(self._ti[b, I_QOFF]), int(self._ti[b, I_VOFF])
        return kind, slice(o, o + int(NQ[kind])), slice(ov, ov + int(NV[kind]))

    def _parent_pose(self, b):
        p = int(self._ti[b, I_PARENT])
        if p < 0:
            return np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3)
        return self.x[p], self.q[p], quat.rotate(self.q[p], self.w[p], np.empty(3))

    # -- diagnostics ---------------------------------------------------------------------
    def kinetic_energy(self) -> float:
        t = 0.5 * np.sum(self._mass * np.sum(self.v * self.v, axis=1))
        return float(t + 0.5 * np.sum(self.w * (self._inertia * self.w)))

    def potential_energy(self) -> float:
        tree = self.tree
        v = -float(np.sum(self._mass * (self.x @ tree.gravity)))
        R = self._scratch()[0]
        for s in range(tree.ns):
            a, b = tree.pi[s]
            pa = np.array(spring_point(tree.pf, s, 0, a, self.x, R))
            pb = np.array(spring_point(tree.pf, s, 3, b, self.x, R))
            v += 0.5 * tree.pf[s, 6] * (np.linalg.norm(pb - pa) - tree.pf[s, 7]) ** 2
        for b in range(self.nb):
            kind, qs, _ = self._coords(b)
            if kind in (REVOLUTE, PRISMATIC):
                v += 0.5 * self._tf[b, T_K] * (self.Qg[qs][0] - self._tf[b, T_REST]) ** 2
        return v

    def momentum(self):
        linear = (self._mass[:, None] * self.v).sum(axis=0)
        angular = np.cross(self.x, self._mass[:, None] * self.v).sum(axis=0)
        for b in range(self.nb):
            angular += quat.rotate(self.q[b], self._inertia[b] * self.w[b], np.empty(3))
        return linear, angular

    def constraint_error(self) -> float:
        """Largest joint residual (see :mod:`rtrigid.joints`) or unit-quaternion defect."""
        err = float(np.max(np.abs(np.linalg.norm(self.q, axis=1) - 1.0)))
        r = jointlib.tree_residual(self.tree, self.x, self.q)
        return max(err, float(np.max(np.abs(r)))) if r.size else err

    def joints(self):
        out = []
        for b, j in enumerate(self.tree.joints):
            if j.kind == "free":
                continue
            anchor = self.x[b] + quat.rotate(self.q[b], self._tf[b, T_AC:T_AC + 3], np.empty(3))
            axis = None
            if j.kind in ("revolute", "prismatic", "cylindrical", "planar"):
                axis = quat.rotate(self.q[b], self._tf[b, T_UC:T_UC + 3], np.empty(3))
            out.append({"kind": j.kind, "parent": j.parent, "child": b, "anchor": anchor,
                        "axis": axis, "name": j.name})
        return out

    # -- joint space ---------------------------------------------------------------------
    def joint_position(self, joint):
        """The joint's coordinates (a copy): angle / slide, or the relative quaternion."""
        return self.Qg[self._coords(self._joint(joint))[1]].copy()

    def joint_velocity(self, joint):
        return self.nu[self._coords(self._joint(joint))[2]].copy()

    def set_joint_position(self, joint, value):
        """Set a joint's coordinates; the subtree below it moves along (a teleport)."""
        b = self._joint(joint)
        kind, qs, _ = self._coords(b)
        n = qs.stop - qs.start
        if n == 0:
            raise ValueError(f"joint: {self.joint_names[b]!r} ({self.tree.joints[b].kind}) has "
                             "no coordinates")
        value = as_vector(value, n, "value")
        if kind in (SPHERICAL, FREE6):
            k = 0 if kind == SPHERICAL else 3
            norm = np.linalg.norm(value[k:k + 4])
            if norm < 1e-12:
                raise ValueError("value: the quaternion part cannot be normalised")
            value[k:k + 4] /= norm
        self.Qg[qs] = value
        self._sync()

    def set_joint_velocity(self, joint, value):
        """Set a joint's rates (see the table in :mod:`rtrigid.multibody`)."""
        b = self._joint(joint)
        _, _, vs = self._coords(b)
        n = vs.stop - vs.start
        if n == 0:
            raise ValueError(f"joint: {self.joint_names[b]!r} has no rates")
        self.nu[vs] = as_vector(value, n, "value")
        self._sync()

    # -- body-space setters (free bodies; rotations also for spherical joints) ----------
    def _refuse(self, b, field, allowed):
        kind = self.tree.joints[b].kind
        if kind not in allowed:
            raise ValueError(f"{field}: body {self.names[b]!r} is held by a {kind} joint; set its "
                             "joint coordinates (set_joint_position / set_joint_velocity)")
        return kind

    def set_orientation(self, body, q):
        b = self.body_index(body)
        q = as_vector(q, 4, "q")
        norm = np.linalg.norm(q)
        if norm < 1e-12:
            raise ValueError(f"q: quaternion of norm {norm:g} cannot be normalised")
        kind = self._refuse(b, "q", ("free", "spherical"))
        q = q / norm
        _, qs, _ = self._coords(b)
        if kind == "free":
            self.Qg[qs.start + 3:qs.stop] = q
        else:
            _, qp, _ = self._parent_pose(b)
            base = quat.mul(qp, self._tf[b, T_R0:T_R0 + 4])
            self.Qg[qs] = quat.mul(quat.conj(base), q)
        self._sync()

    def set_angular_velocity(self, body, omega, frame="body"):
        b = self.body_index(body)
        omega = as_vector(omega, 3, "omega")
        if frame not in ("body", "world"):
            raise ValueError(f"frame: expected 'body' or 'world', got {frame!r}")
        kind = self._refuse(b, "omega", ("free", "spherical"))
        world = quat.rotate(self.q[b], omega, np.empty(3)) if frame == "body" else omega
        _, _, vs = self._coords(b)
        if kind == "free":
            self.nu[vs.start + 3:vs.stop] = quat.rotate_inv(self.q[b], world, np.empty(3))
        else:
            _, _, wp = self._parent_pose(b)
            self.nu[vs] = quat.rotate_inv(self.q[b], world - wp, np.empty(3))
        self._sync()

    def set_position(self, body, x):
        b = self.body_index(body)
        x = as_vector(x, 3, "x")
        self._refuse(b, "x", ("free",))
        qs = self._coords(b)[1]
        self.Qg[qs.start:qs.start + 3] = x
        self._sync()

    def set_velocity(self, body, v):
        b = self.body_index(body)
        v = as_vector(v, 3, "v")
        self._refuse(b, "v", ("free",))
        vs = self._coords(b)[2]
        self.nu[vs.start:vs.start + 3] = v
        self._sync()

    # -- impulses ------------------------------------------------------------------------
    def apply_impulse(self, body, impulse_world, point_world):
        """Apply an impulse J at a world point: the rates jump by (T^T M T)^-1 T^T J.

        The joints carry the reaction impulses, so the velocities stay consistent with them.
        Raises ``ValueError`` (state unchanged) if the result would not be finite.
        """
        b = self.body_index(body)
        impulse = as_vector(impulse_world, 3, "impulse_world")
        point = as_vector(point_world, 3, "point_world")
        dnu = np.zeros(self.tree.nv)
        dv = np.zeros((self.nb, 3))
        dw = np.zeros((self.nb, 3))
        x, q = self.x.copy(), self.q.copy()
        ok = impulse_response(self._tf, self._ti, self.Qg, x, q, b, point, impulse,
                              self._scratch(), dnu, dv, dw)
        with np.errstate(over="ignore", invalid="ignore"):
            new_nu, new_v, new_w = self.nu + dnu, self.v + dv, self.w + dw
            ok = ok and all(np.all(np.isfinite(a)) for a in (new_nu, new_v, new_w))
        if not ok:
            raise ValueError(f"impulse_world: {impulse.tolist()} would give non-finite velocities")
        self.nu[:] = new_nu
        self.v[:] = new_v
        self.w[:] = new_w
        self._L[:] = self._inertia * new_w

    def null_space_matrix(self):
        """T(Qg): maps the rates nu to (xdot, pdot) of all bodies, (7 nb, nv); for tests."""
        nv = self.tree.nv
        T = np.zeros((7 * self.nb, nv))
        S = self._S.copy()
        try:
            for j in range(nv):
                self.nu[:] = 0.0
                self.nu[j] = 1.0
                refresh_bodies(self._tf, self._ti, self.Qg, self.nu, self.x, self.q, self.v,
                               self.w, self._L, *self._scratch()[:5])
                for b in range(self.nb):
                    T[7 * b:7 * b + 3, j] = self.v[b]
                    T[7 * b + 3:7 * b + 7, j] = 0.5 * quat.mul(self.q[b], np.r_[0.0, self.w[b]])
        finally:
            self._S[:] = S
        return T
