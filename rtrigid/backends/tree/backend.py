"""The tree backend's side of the protocol of :mod:`rtrigid.backends`.

The state is the generalized coordinates ``Qg`` and rates ``nu`` of :mod:`.kinematics`
(the joint table of :mod:`rtrigid.joints`); the bodies' x, q, v, w views are kept up to date
after every step and every write.
"""
from __future__ import annotations

import numpy as np

from rtrigid.backends import TREE
from rtrigid.backends.buffers import allocate, model_digest, sections
from rtrigid.backends.tree.kinematics import (
    FREE6,
    I_KIND,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    NQ,
    NV,
    PRISMATIC,
    REVOLUTE,
    T_J,
    T_ARM,
    T_K,
    T_MASS,
    T_R0,
    T_REST,
    Tree,
    applied_size,
    applied_views,
    actuator_views,
    carve,
    impulse_response,
    refresh_bodies,
    spring_point,
    state_size,
    state_views,
)
from rtrigid.backends.tree.dynamics import changed, rates_of_momenta
from rtrigid.backends.tree.layout import TreeState, work_accounts
from rtrigid.joints import geometry
from rtrigid.maths import quat


class TreeBackend:
    """Bodies joined into a forest of trees; state (Qg, nu, x, q, v, w, L)."""

    name = TREE

    def __init__(self, model, module):
        self.tree = tree = Tree(model)
        self.names = [body.name for body in model.bodies]
        self.nb, nq, nv = tree.nb, tree.nq, tree.nv
        self.joints = tree.joints
        self.geometry = [geometry(j) for j in self.joints]
        mf, mi = tree.model_arrays()
        n_state = state_size(tree.nb, nq, nv, tree.na)
        n_applied = applied_size.py_func(tree.nb, nv, tree.na)
        self.F, self.I = allocate(mf, mi, n_state, n_applied, module.work_size(tree.nb, nq, nv))
        self.model_digest = model_digest(mf, mi)
        self.S, self.S_prev, self.A, self.solver, self.stats, self._work = sections.py_func(
            self.F, self.I, len(mf), len(mi), n_state, n_applied)
        self.joint_forces = applied_views.py_func(self.A, tree.nb, nv)[2]
        # the actuators' table, controls (in A) and cumulative work (in S)
        self.act, self.controls, self.actuator_work = actuator_views.py_func(self.F, self.I)
        self.friction_work = work_accounts.py_func(self.F, self.I)[-1:]  # energy_momentum's
        self._tf, self._ti = tree.tf, tree.ti
        (self.Qg, self.nu, self.x, self.q, self.v, self.w, self._L) = state_views.py_func(
            self.S, tree.nb, nq, nv)
        self.x_prev, self.q_prev = state_views.py_func(self.S_prev, tree.nb, nq, nv)[2:4]
        self.mass = tree.tf[:, T_MASS].copy()
        self.inertia = tree.tf[:, T_J:T_J + 3].copy()
        self.gravity = tree.gravity
        self.Qg[:] = tree.Q0
        # A scheme whose bodies' momenta at t_{n+1} meet the joints' velocity constraints only
        # to O(h^2) (the jointed energy_momentum: nu is then the step's mean rate) declares
        # MEAN_RATES.  The rates and velocities at t are then those of the bodies' momenta,
        # (T^T M T)^-1 T^T p (rates()), computed when asked for and kept until S changes.
        self.mean_rates = bool(getattr(module, "MEAN_RATES", False))
        self._at_t = np.zeros(nv), np.zeros((tree.nb, 3)), np.zeros((tree.nb, 3))
        self._seen = np.full(n_state, np.nan)  # the S _at_t was computed from
        self._xs, self._qs = np.zeros((tree.nb, 3)), np.zeros((tree.nb, 4))
        # potential_energy(): gravity as one dot product, the joint springs that exist
        self._x_flat = self.x.reshape(-1)
        self._mg = np.outer(self.mass, tree.gravity).reshape(-1)
        self._joint_springs = []
        for b in range(self.nb):
            kind, qs, _ = self._slots(b)
            if kind in (REVOLUTE, PRISMATIC) and self._tf[b, T_K]:
                self._joint_springs.append((qs.start, self._tf[b, T_K], self._tf[b, T_REST]))
        # rotor_energy(): the rates that carry an armature, and their armatures
        self._armature = [(self._slots(b)[2].start, self._tf[b, T_ARM]) for b in range(self.nb)
                          if self._tf[b, T_ARM]]
        # closed loops (Model.add_loop_joint): constraint rows on Qg, closed from the initial
        # coordinates here; the simulation steps them with .loops_em.stepper
        self.loops = None
        if getattr(model, "loop_joints", None) or getattr(model, "couplings", None):
            from rtrigid.backends.tree.loops import LoopClosure

            self.loops = LoopClosure.for_model(tree, model, self._scratch())
            self.loops.assemble(self.Qg)
        self._sync()

    def contact_workspace(self, contacts, budget):
        """What the contact step (:class:`~rtrigid.backends.contact_step.ContactStepper`)
        needs of this backend for ``contacts`` (a :class:`~rtrigid.contact.Contacts`):
        ``(collide, after, extra)``: None (every body with a geom collides), the module whose
        ``after_step`` solves the contacts, and its (float, int) scratch as a function of the
        contact table's rows -- the solve's work space (with the loop joints' and couplings'
        rows at its end), and the rates' start flag (the mean rates, or the event's
        ``budget``) followed by the contact bodies' rates, the number of those rows, the
        rates' tree (:func:`~rtrigid.backends.tree.contact.rate_tree`) and the solve's int
        scratch."""
        from rtrigid.backends.tree import contact as tree_contact
        from rtrigid.backends.tree.contact_rows import constraint_scratch_size, int_scratch_size

        tree = self.tree
        order = contacts.ints[:, 0]
        ti, voff = tree.ti, tree_contact.I_VOFF
        perm = [i for b in order for i in range(
            ti[b, voff], ti[b, voff] + int(tree_contact.NV[ti[b, tree_contact.I_KIND]]))]
        # loop joints and couplings: their rows in the scratch's tail (the couplings'
        # constant, the loop joints' rewritten before each solve: constraint_rows), their
        # count after the rates (the contact impulses then move the tree as they allow)
        rows_g = np.zeros((0, tree.nv)) if self.loops is None else self.loops.jacobian(self.Qg)
        head = ([int(self.mean_rates) or budget] + perm + [len(rows_g)]
                + tree_contact.rate_tree(ti))
        tail = constraint_scratch_size(len(rows_g), tree.nv)

        def extra(rows):
            xf = np.zeros(tree_contact.scratch_size(rows, tree.nb, tree.nq, tree.nv) + tail)
            if tail:
                xf[len(xf) - tail:][: rows_g.size] = rows_g.ravel()
            xi = np.zeros(len(head) + int_scratch_size(rows, tree.nv), np.int64)
            xi[:len(head)] = head
            return xf, xi

        return None, tree_contact.__name__, extra

    def constraint_rows(self, xf):
        """Write the loops' rows at the present configuration into the tail of a contact
        scratch ``xf`` of :meth:`contact_workspace` (before the contact solve of a step)."""
        from rtrigid.backends.tree.contact_rows import constraint_scratch_size

        rows_g = self.loops.rows(self.Qg, what=2)[1]  # a view: no copy a step
        start = len(xf) - constraint_scratch_size(len(rows_g), self.tree.nv)
        xf[start:start + rows_g.size] = rows_g.ravel()

    def loads(self):
        """(f_app, t_app, held): views of the applied loads in A."""
        return applied_views.py_func(self.A, self.tree.nb, self.tree.nv)

    def _close_loops(self, qs=None, vs=None):
        """After a write: close the loops changing only the rates not written (``qs`` /
        ``vs``: the written coordinates' and rates' slots in nu; None: all may change), and
        refuse (``ValueError``, state restored by the caller's copy) what cannot be closed
        or is a singular configuration."""
        lc = self.loops
        free_q = np.ones(self.tree.nv, bool)
        if qs is not None:
            free_q[qs] = False
        err = lc.close_positions(self.Qg, free_q, max_iter=50)
        if not err <= 1e-9:
            raise ValueError(f"value: the loops {lc.names()} cannot be closed with these "
                             f"coordinates (residual {err:.3g})")
        if lc.mobility_at(self.Qg)[1] != lc.rank:
            raise ValueError(f"value: a singular configuration of the loops {lc.names()} "
                             "(their constraint rank changes here)")
        free_v = np.ones(self.tree.nv, bool)
        if vs is not None:
            free_v[vs] = False
        err = lc.close_rates(self.Qg, self.nu, free_v)
        if not err <= 1e-9 * max(1.0, float(np.max(np.abs(self.nu)))):
            raise ValueError(f"value: the loops {lc.names()} cannot be closed with these "
                             f"rates (residual {err:.3g})")

    def _scratch(self):
        return carve.py_func(self._work, self.tree.nb, self.tree.nq, self.tree.nv)

    def _sync(self, teleport=True):
        """Rewrite the bodies' views from (Qg, nu); a teleport also resets the previous pose."""
        state = TreeState(self.Qg, self.nu, self.x, self.q, self.v, self.w, self._L)
        refresh_bodies(self._tf, self._ti, state, *self._scratch()[:5])
        if teleport:
            self.S_prev[:] = self.S

    def _slots(self, b):
        kind = int(self._ti[b, I_KIND])
        o, ov = int(self._ti[b, I_QOFF]), int(self._ti[b, I_VOFF])
        return kind, slice(o, o + int(NQ[kind])), slice(ov, ov + int(NV[kind]))

    def _parent_motion(self, b):
        """(quaternion, world angular velocity) of body b's parent (the world: at rest)."""
        p = int(self._ti[b, I_PARENT])
        if p < 0:
            return np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3)
        return self.q[p], quat.rotate(self.q[p], self.w[p], np.empty(3))

    def rotor_energy(self) -> float:
        """The joints' armature kinetic energy, 1/2 sum a r^2 (0 without armature): r the rotors'
        rates, which the state's rates hold (also under the schemes that keep mean rates in
        them: there the armatures' rates are the rotors' own state)."""
        nu = self.nu
        return float(sum(0.5 * a * nu[o] ** 2 for o, a in self._armature))

    def potential_energy(self) -> float:
        tree = self.tree
        v = -float(self._x_flat @ self._mg)
        if not (tree.ns or self._joint_springs):
            return v
        R = self._scratch()[0]
        for s in range(tree.ns):
            a, b = tree.pi[s]
            pa = np.array(spring_point(tree.pf, s, 0, a, self.x, R))
            pb = np.array(spring_point(tree.pf, s, 3, b, self.x, R))
            v += 0.5 * tree.pf[s, 6] * (np.linalg.norm(pb - pa) - tree.pf[s, 7]) ** 2
        for o, k, rest in self._joint_springs:
            v += 0.5 * k * (self.Qg[o] - rest) ** 2
        return v

    # -- joints ----------------------------------------------------------------------------
    def slots(self, b):
        """(coordinate slice, rate slice) of body b's inbound joint in :meth:`positions`
        and :meth:`rates`."""
        return self._slots(b)[1:]

    def _now(self):
        """(nu, v, w) at t: the joint rates, the centres' velocities (world) and the body
        angular velocities, consistent with each other (views; read them only)."""
        if not self.mean_rates:
            return self.nu, self.v, self.w
        if changed(self.S, self._seen):  # (and now seen)
            nu, v, w = self._at_t
            if np.array_equal(self.S, self.S_prev):
                # just written (a teleport): nu, v and w are consistent as they stand
                nu[:], v[:], w[:] = self.nu, self.v, self.w
            else:
                rates_of_momenta(self.F, self.I, self._xs, self._qs, nu, v, w)
        return self._at_t

    def velocities(self):
        """(v, w) at t: centre-of-mass velocities (world) and body angular velocities
        (body axes), consistent with rates()."""
        return self._now()[1:]

    def positions(self):
        """Every joint's coordinates, in the tree's order (a view)."""
        return self.Qg

    def rates(self):
        """Every joint's rates at t, in the tree's order (a view; read it only)."""
        return self._now()[0]

    def _settle(self):
        """Before a write: nu <- the rates at t, so the state derived after it keeps the
        motion at t of every joint the write leaves alone."""
        if self.mean_rates:
            self.nu[:] = self._now()[0]
            self._sync(teleport=False)

    def set_coordinates(self, qpos=None, qvel=None):
        """Write all coordinates and/or rates (the tree's order), then re-derive the state."""
        self._settle()
        if qpos is not None:
            self.Qg[:] = qpos
        if qvel is not None:
            self.nu[:] = qvel
        if self.loops is not None:
            self._guarded(self._close_loops)
        self._sync()

    def joint_state(self, b):
        _, qs, vs = self._slots(b)
        return self.Qg[qs].copy(), self._now()[0][vs].copy()

    def set_joint_state(self, b, qpos=None, qvel=None):
        _, qs, vs = self._slots(b)
        self._settle()
        if qpos is not None:
            self.Qg[qs] = qpos
        if qvel is not None:
            self.nu[vs] = qvel
        if self.loops is not None:
            self._guarded(self._close_loops, vs if qpos is not None else None,
                          vs if qvel is not None else None)
        self._sync()

    def _guarded(self, close, *args):
        """close(*args); a singular factorization is refused as a ValueError (the
        simulation's write puts the state back)."""
        try:
            close(*args)
        except np.linalg.LinAlgError as e:
            raise ValueError(f"value: the loops cannot be closed here ({e})") from None

    # -- bodies ----------------------------------------------------------------------------
    def set_body(self, b, x=None, q=None, v=None, w=None, w_frame="world"):
        kind, qs, vs = self._slots(b)
        allowed = {"free": ("x", "q", "v", "w"), "spherical": ("q", "w")}.get(
            self.joints[b].kind, ())
        for field, value in (("x", x), ("q", q), ("v", v), ("w", w)):
            if value is not None and field not in allowed:
                raise ValueError(f"{field}: body {self.names[b]!r} is held by a "
                                 f"{self.joints[b].kind} joint; set its joint coordinates "
                                 "(set_joint_position / set_joint_velocity)")
        self._settle()
        if kind == FREE6:
            if x is not None:
                self.Qg[qs.start:qs.start + 3] = x
            if v is not None:
                self.nu[vs.start:vs.start + 3] = v
        if q is not None:
            if kind == FREE6:
                self.Qg[qs.start + 3:qs.stop] = q
            else:
                qp, _ = self._parent_motion(b)
                base = quat.mul(qp, self._tf[b, T_R0:T_R0 + 4])
                self.Qg[qs] = quat.mul(quat.conj(base), q)
        if w is not None:
            if q is not None:  # the new orientation, before the angular velocity
                self._sync()
            if kind == FREE6 and w_frame == "body":  # the rates are the body-frame vector
                self.nu[vs.start + 3:vs.stop] = w
            elif kind == FREE6:
                self.nu[vs.start + 3:vs.stop] = quat.rotate_inv(self.q[b], w, np.empty(3))
            else:
                if w_frame == "body":
                    w = quat.rotate(self.q[b], w, np.empty(3))
                _, wp = self._parent_motion(b)
                self.nu[vs] = quat.rotate_inv(self.q[b], w - wp, np.empty(3))
        if self.loops is not None:
            self._guarded(self._close_loops, vs if (x is not None or q is not None) else None,
                          vs if (v is not None or w is not None) else None)
        self._sync()

    def impulse(self, b, point, impulse):
        """The rates jump by (T^T M T)^-1 T^T J: the joints carry the reaction impulses, so
        the velocities stay consistent with them."""
        dnu = np.zeros(self.tree.nv)
        dv = np.zeros((self.nb, 3))
        dw = np.zeros((self.nb, 3))
        x, q = self.x.copy(), self.q.copy()
        ok = impulse_response(self._tf, self._ti, self.Qg, x, q, b, point, impulse,
                              self._scratch(), dnu, dv, dw)
        with np.errstate(over="ignore", invalid="ignore"):
            new = (self.nu + dnu, self.v + dv, self.w + dw)
        if ok and self.loops is not None:
            # the loops' reactions: the K-orthogonal projection of the tree's response
            nu = new[0]
            try:
                self.loops.close_rates(self.Qg, nu)
            except np.linalg.LinAlgError:
                return None
            R, rj, G, V, cb = self._scratch()[:5]
            x, q = self.x.copy(), self.q.copy()
            state = TreeState(self.Qg, nu, x, q, dv, dw, np.empty_like(dv))
            refresh_bodies(self._tf, self._ti, state, R, rj, G, V, cb)
            new = (nu, dv, dw)
        if not (ok and all(np.all(np.isfinite(a)) for a in new)):
            return None
        return new

    def write_velocities(self, jump):
        self.nu[:], self.v[:], self.w[:] = jump
        self._L[:] = self.inertia * self.w

    def null_space_matrix(self):
        """T(Qg): maps the rates nu to (xdot, pdot) of all bodies, (7 nb, nv)."""
        nv = self.tree.nv
        T = np.zeros((7 * self.nb, nv))
        S = self.S.copy()
        try:
            for j in range(nv):
                self.nu[:] = 0.0
                self.nu[j] = 1.0
                self._sync(teleport=False)
                for b in range(self.nb):
                    T[7 * b:7 * b + 3, j] = self.v[b]
                    T[7 * b + 3:7 * b + 7, j] = 0.5 * quat.mul(self.q[b], np.r_[0.0, self.w[b]])
        finally:
            self.S[:] = S
        return T
