"""The bodies backend's contact step: free flight by the scheme's kernel, then the contact
solve of :mod:`rtrigid.contact.solver` on the free bodies, then their momenta re-derived."""
import warnings

import numpy as np

from rtrigid._jit import jit, kernel_driver, rebind
from rtrigid.backends.bodies.common import body_momenta, open_buffers, state_view
from rtrigid.backends.bodies.layout import B_INERTIA, B_MASS, FREE
from rtrigid.backends.buffers import OK, USED_FALLBACK
from rtrigid.contact.general import resolve_general
from rtrigid.contact.geometry import PAIR_POINTS
from rtrigid.contact.manifold import DYNAMIC, KINEMATIC
from rtrigid.contact.solver import (
    GAP,
    START_BUDGET,
    VEL_WIDTH,
    Bodies,
    SolveSettings,
    flight_gap,
    resolve,
)
from rtrigid.maths.quat import turn_t


@jit
def kinematic_flight(active, S_prev, S, nb, dt):
    """Each kinematic body (``active[b] == KINEMATIC``) moved from its pose at the step's
    start at its constant velocity and angular velocity (body axes), whatever the scheme's
    flight did to it (gravity, loads): a user-driven motion.  Returns whether there is one."""
    x0, q0, v0, w0 = state_view(S_prev, nb)[:4]
    x, q, v, w = state_view(S, nb)[:4]
    some = False
    for b in range(nb):
        if active[b] != KINEMATIC:
            continue
        some = True
        for i in range(3):
            v[b, i], w[b, i] = v0[b, i], w0[b, i]
            x[b, i] = x0[b, i] + dt * v0[b, i]
        q[b, 0], q[b, 1], q[b, 2], q[b, 3] = turn_t(q0[b, 0], q0[b, 1], q0[b, 2], q0[b, 3],
                                                    w0[b, 0], w0[b, 1], w0[b, 2], dt)
    return some


@jit
def after_step(F, I, scene, grounds, active, arrays, settings, dt, xf, xi, stats):
    """The contact solve after a free-flight step; returns the number of contacts (scene:
    the geoms, a :class:`rtrigid.contact.manifold.Scene`; arrays: the contact step's
    :class:`rtrigid.contact.solver.ContactArrays`, settings its
    :class:`~rtrigid.contact.solver.SolveSettings`; stats[1] counts the pairs left out for
    want of table rows; xf: the tree backend's extra scratch, unused here; xi: empty, or
    [``START_BUDGET``] under a scheme whose flight does not keep energy -- the energy budget
    is then taken from the step's start, S_prev, see
    :func:`rtrigid.contact.solver.flight_allowance`)."""
    (gravity, bodyf, bodyi, _, _, S, S_prev, _, _, _, _, _) = open_buffers(F, I)
    nb = bodyi.shape[0]
    x, q, v, w, P, pq, L = state_view(S, nb)
    touched, vel = arrays.touched, arrays.vel
    kinematic = kinematic_flight(active, S_prev, S, nb, dt)
    mass, inertia = bodyf[:, B_MASS], bodyf[:, B_INERTIA:B_INERTIA + 3]
    gap = vel[:, GAP]
    if xi.shape[0] > 0 and xi[0] == START_BUDGET:
        x0, _, v0, w0 = state_view(S_prev, nb)[:4]
        flight_gap(mass, inertia, gravity, x0, v0, w0, x, v, w, gap)
    else:
        gap[:] = 0.0
    if kinematic:  # (a model without kinematic bodies allocates nothing here)
        mass, inertia = mass.copy(), inertia.copy()
        for b in range(nb):
            if active[b] == KINEMATIC:  # an infinite mass to the bodies it touches
                mass[b] = np.inf
                inertia[b, :] = np.inf
                gap[b] = 0.0
    count = resolve(Bodies(x, q, v, w, mass, inertia), active, scene, grounds, gravity, arrays,
                    settings, dt, stats)
    for b in range(nb):
        if touched[b] or active[b] == KINEMATIC:
            body_momenta(bodyf, b, q, v, w, P, pq, L)
    return count


# the contact step of a model with pairs that meet through the general narrow phase
after_step_general = rebind(after_step, "general", __name__, resolve=resolve_general)


class ContactStepper:
    """``step(n, dt, F, I)`` of the kernel contract: n times one step of ``kernel`` and the
    contact solve, stopping at a step the kernel could not take.

    ``bodyi``: the bodies backend's kinds (its free bodies collide), or None: every body with
    a geom collides.  ``after``: the module whose ``after_step`` solves the contacts (this
    one, or the tree backend's), ``extra``: its (float, int) scratch, or a function of the
    table's rows giving it (called again when the table grows).

    The table has rows for every ground contact and :data:`rtrigid.contact.PAIR_ROWS` per
    geom for pairs.  A pair that finds no room is left out of that step, never silently: the
    table then grows (at least doubles) for the steps that follow and a ``RuntimeWarning``
    says so."""

    def __init__(self, kernel, contacts, bodyi, iters, rest_speed, *,
                 after="rtrigid.backends.bodies.contact",
                 extra=(np.zeros(0), np.zeros(0, np.int64))):
        self.contacts = contacts
        form = "after_step_general as after_step" if contacts.general else "after_step"
        self._run = kernel_driver(_run_source, kernel, imports=(
            f"from {after} import {form}\n" + _RUN_IMPORTS))
        shaped = contacts.collides
        self.active = (shaped if bodyi is None else (np.asarray(bodyi) == FREE)
                       & shaped).astype(np.int64) * DYNAMIC
        self.active[contacts.kinematic] = KINEMATIC
        self.settings = SolveSettings(int(iters), float(rest_speed))
        self._settings = tuple(self.settings)
        self._scene = tuple(contacts.scene)
        self._extra = extra if callable(extra) else (lambda rows: extra)
        self._rows = len(contacts.table)
        self.xf, self.xi = self._extra(self._rows)
        self._count = np.zeros(2, np.int64)  # contacts of the last step, pairs left out

    def __call__(self, n, dt, F, I):
        c = self.contacts
        if len(c.table) != self._rows:  # restored from a snapshot of a grown table
            self._rows = len(c.table)
            self.xf, self.xi = self._extra(self._rows)
        # the groups as plain tuples: numba reads a named tuple's type from a Python call
        # ~1 us slower than a plain one's; run names them
        status = self._run(n, dt, F, I, self._scene, c.grounds, self.active, c.arrays(),
                           self._settings, self.xf, self.xi, self._count)
        c.count = int(self._count[0])
        if self._count[1]:
            left = int(self._count[1])
            self._count[1] = 0
            before = len(c.table)
            c.grow(max(2 * before, before + PAIR_POINTS * left))
            self._rows = len(c.table)
            self.xf, self.xi = self._extra(self._rows)
            warnings.warn(f"contacts: the contact table ({before} rows) was full: {left} "
                          f"geom pairs were left out of the steps just taken; it now has "
                          f"{len(c.table)} rows", RuntimeWarning, stacklevel=3)
        return status

    def rows(self, F, I):
        """This contact step as a kernel of the contract on longer rows, for
        :class:`rtrigid.Batch`: ``(step, Fx, Ix)``, ``step(n, dt, Fx, Ix)`` the same compiled
        ``run`` on the Simulation's ``F``, ``I`` and the contact arrays carved from the rows'
        tails.  Fx = F followed by geom, work, verts, planes, grounds, table, vel, lift, lam,
        xf, the general pairs' float scratch, rest_speed; Ix = I followed by geomi, excluded,
        active, touched, ints, keys, rows, xi, the general pairs' int scratch, count and the
        sizes (:data:`ROW_SIZES` of them, at the end).  A copy's contacts (its warm start, the
        table of its last step) and its geoms, friction and gravity are thus its own; its table does not grow (count[1] counts the pairs left out)."""
        c = self.contacts
        assert (c.vel.shape[1], c.ints.shape[1], c.keys.shape[1]) == (VEL_WIDTH, 5, 2)
        step = kernel_driver(_rows_source, self._run, imports=_ROWS_IMPORTS)
        geom, geomi, work, verts, planes, excluded, gf, gi = c.scene
        sizes = (len(F), len(I), len(c.vel), len(geom), len(verts), len(planes),
                 len(excluded), len(c.grounds), len(c.table), len(c.keys), len(self.xf),
                 len(self.xi), self.settings.iters, len(gf), len(gi))
        Fx = np.concatenate([F] + [a.ravel() for a in (
            geom, work, verts, planes, c.grounds, c.table, c.vel, c.lift, c.lam, self.xf, gf)]
            + [[self.settings.rest_speed]])
        Ix = np.concatenate([I] + [a.ravel() for a in (
            geomi, excluded, self.active, c.touched, c.ints, c.keys, c.rows, self.xi, gi,
            self._count)] + [sizes]).astype(np.int64)
        return step, Fx, Ix


@jit
def no_flight(n, dt, F, I):
    """A kernel that leaves the state as it is: a :class:`ContactStepper` of it is the contact
    solve alone (:class:`StepThenContacts`)."""
    return OK


class StepThenContacts:
    """``step(n, dt, F, I)`` of the kernel contract for a scheme whose step is a stepper
    object (the loop and coupling steppers of :mod:`rtrigid.backends.tree.loops_em`): n times
    one of its steps, then the contact solve (``contacts``: a :class:`ContactStepper` of
    :func:`no_flight`), two compiled calls a step; stops at a step the scheme could not
    take.  ``rows(xf)``, if given, writes the step's constraint rows into the contact
    scratch before each solve (loop joints: :meth:`TreeBackend.constraint_rows`).  A Batch
    does not step it."""

    def __init__(self, step, contacts, rows=None):
        self.step, self.contacts, self.rows_into = step, contacts, rows

    def __call__(self, n, dt, F, I):
        flags = OK
        for _ in range(n):
            status = self.step(1, dt, F, I)
            flags |= status & USED_FALLBACK
            if status & ~USED_FALLBACK:
                return status | flags
            if self.rows_into is not None:  # the constraint rows at this configuration
                self.rows_into(self.contacts.xf)
            self.contacts(1, dt, F, I)
        return flags


_RUN_IMPORTS = ("from rtrigid.backends.buffers import OK, USED_FALLBACK, unowned\n"
                "from rtrigid.contact.manifold import Scene\n"
                "from rtrigid.contact.solver import ContactArrays, SolveSettings\n")


ROW_SIZES = 15
_ROWS_IMPORTS = ("from rtrigid.backends.bodies.contact import ROW_SIZES\n"
                 "from rtrigid.backends.buffers import view\n"
                 "from rtrigid.contact.geometry import C_WIDTH, G_WIDTH, GI_WIDTH, P_WIDTH, "
                 "W_WIDTH\n"
                 "from rtrigid.contact.manifold import LAM_WIDTH\n"
                 "from rtrigid.contact.solver import LIFT_WIDTH, VEL_WIDTH")


def _rows_source(run):
    """The source of ``step``, the contact step on a Batch's rows (:meth:`ContactStepper.rows`),
    compiled once per ``run`` with it as the global ``kernel``."""
    def step(n, dt, F, I):
        """``run`` on the arrays carved from the rows F, I (see ContactStepper.rows)."""
        m = I.shape[0] - ROW_SIZES
        nf, ni, nb, ng, nv, npl, ne = I[m], I[m + 1], I[m + 2], I[m + 3], I[m + 4], I[m + 5], \
            I[m + 6]
        ngr, nr, nh, nxf, nxi, iters = I[m + 7], I[m + 8], I[m + 9], I[m + 10], I[m + 11], \
            I[m + 12]
        ngf, ngi = I[m + 13], I[m + 14]
        o = nf
        geom = view(F, o, (ng, G_WIDTH))
        o += ng * G_WIDTH
        work = view(F, o, (ng, W_WIDTH))
        o += ng * W_WIDTH
        verts = view(F, o, (nv, 3))
        o += nv * 3
        planes = view(F, o, (npl, 4))
        o += npl * 4
        grounds = view(F, o, (ngr, P_WIDTH))
        o += ngr * P_WIDTH
        table = view(F, o, (nr, C_WIDTH))
        o += nr * C_WIDTH
        vel = view(F, o, (nb, VEL_WIDTH))
        o += nb * VEL_WIDTH
        lift = view(F, o, (nb, LIFT_WIDTH))
        o += nb * LIFT_WIDTH
        lam = view(F, o, (nr, LAM_WIDTH))
        o += nr * LAM_WIDTH
        xf = view(F, o, (nxf,))
        o += nxf
        gf = view(F, o, (ngf,))
        rest_speed = F[o + ngf]
        o = ni
        geomi = view(I, o, (ng, GI_WIDTH))
        o += ng * GI_WIDTH
        excluded = view(I, o, (ne,))
        o += ne
        active = view(I, o, (nb,))
        touched = view(I, o + nb, (nb,))
        o += 2 * nb
        ints = view(I, o, (nb, 5))
        o += nb * 5
        keys = view(I, o, (nh, 2))
        o += nh * 2
        rows = view(I, o, (nr,))
        o += nr
        xi = view(I, o, (nxi,))
        o += nxi
        gi = view(I, o, (ngi,))
        count = view(I, o + ngi, (2,))
        # F and I as ordinary arrays (slices), not views: the scheme's step that ``run``
        # calls on them is then the one compiled for a Simulation, not a second copy for
        # views (a ViewArray is a numba type of its own; the tree RK4 step compiles ~100 s)
        return kernel(n, dt, F[:nf], I[:ni], (geom, geomi, work, verts, planes, excluded, gf, gi),
                      grounds, active, (table, touched, vel, ints, lift, keys, lam, rows),
                      (iters, rest_speed), xf, xi, count)


def _run_source(kernel):
    """The source of ``run``, compiled once per kernel with the kernel as a global
    (:func:`rtrigid._jit.kernel_driver`: numba does not cache a function that takes a kernel
    as an argument, so every process compiled it again)."""
    def run(n, dt, F, I, scene, grounds, active, arrays, settings, xf, xi, count):
        """n times one step of ``kernel`` and the contact solve, in one compiled call (scene,
        arrays, settings: the members of the groups ``after_step`` takes, Scene,
        ContactArrays and SolveSettings, as plain tuples); count[0] gets the contacts of the
        last step, count[1] adds the pairs left out for want of table rows.  Stops at a step
        the kernel could not take.  The contact solve takes every array as a view holding
        no reference (``buffers.unowned``): it reads rows of them in its innermost loops."""
        geom, geomi, work, verts, planes, excluded, gf, gi = scene
        scene = Scene(unowned(geom), unowned(geomi), unowned(work), unowned(verts),
                      unowned(planes), unowned(excluded), unowned(gf), unowned(gi))
        table, touched, vel, ints, lift, keys, lam, rows = arrays
        arrays = ContactArrays(unowned(table), unowned(touched), unowned(vel), unowned(ints),
                               unowned(lift), unowned(keys), unowned(lam), unowned(rows))
        settings = SolveSettings(*settings)
        grounds, active, xf, xi, count = (unowned(grounds), unowned(active), unowned(xf),
                                          unowned(xi), unowned(count))
        Fv, Iv = unowned(F), unowned(I)  # (the kernel takes F and I as the Simulation's)
        flags = OK
        for _ in range(n):
            status = kernel(1, dt, F, I)
            flags |= status & USED_FALLBACK
            if status & ~USED_FALLBACK:
                return status | flags
            count[0] = after_step(Fv, Iv, scene, grounds, active, arrays, settings, dt, xf, xi,
                                  count)
        return flags
