"""The contact step of either backend: the scheme's step, then the backend's contact solve,
n times in one compiled call (:class:`ContactStepper`), and the same on a Batch's rows.

The scheme's step is called by its address (:func:`rtrigid._jit.call_step`), so the loop here
is compiled once for each backend's solve, not once per scheme with the step linked into it."""
import importlib
import warnings

import numpy as np

from rtrigid._jit import call_step, jit, step_address
from rtrigid.backends.buffers import OK, USED_FALLBACK, unowned, view
from rtrigid.contact.geometry import C_WIDTH, G_WIDTH, GI_WIDTH, P_WIDTH, PAIR_POINTS, W_WIDTH
from rtrigid.contact.manifold import DYNAMIC, KINEMATIC, LAM_WIDTH, Scene
from rtrigid.contact.solver import LIFT_WIDTH, VEL_WIDTH, ContactArrays, SolveSettings


class ContactStepper:
    """``step(n, dt, F, I)`` of the kernel contract: n times one step of ``kernel`` and the
    contact solve, stopping at a step the kernel could not take.

    ``collide``: which bodies may collide (the bodies backend's free bodies), or None: every
    body with a geom.  ``after``: the backend's contact module, whose ``after_step`` solves
    the contacts (its ``run`` and ``rows_step``, and their ``_general`` forms, are this
    module's templates bound to it), ``extra``: its (float, int) scratch, or a function of
    the table's rows giving it (called again when the table grows).

    The table has rows for every ground contact and :data:`rtrigid.contact.PAIR_ROWS` per
    geom for pairs.  A pair that finds no room is left out of that step, never silently: the
    table then grows (at least doubles) for the steps that follow and a ``RuntimeWarning``
    says so."""

    def __init__(self, kernel, contacts, collide, iters, rest_speed, *, after,
                 extra=(np.zeros(0), np.zeros(0, np.int64))):
        self.contacts = contacts
        home = importlib.import_module(after)
        suffix = "_general" if contacts.general else ""
        self._run, self._rows_step = (getattr(home, "run" + suffix),
                                      getattr(home, "rows_step" + suffix))
        self._kernel, self._address = kernel, None  # compiled on the first step
        shaped = contacts.collides
        self.active = (shaped if collide is None else np.asarray(collide, bool)
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
        status = self._run(self._kernel_address(), n, dt, F, I, self._scene, c.grounds, self.active,
                           c.arrays(), self._settings, (self.xf, self.xi), self._count)
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

    def _kernel_address(self):
        """The scheme's kernel's address, compiled (or loaded) on the first step."""
        if self._address is None:
            self._address = step_address(self._kernel)
        return self._address

    def rows(self, F, I):
        """This contact step as a kernel of the contract on longer rows, for
        :class:`rtrigid.Batch`: ``(step, Fx, Ix)``, ``step(n, dt, Fx, Ix)`` (``after``'s
        ``rows_step``) the same compiled ``run`` on the Simulation's ``F``, ``I`` and the contact
        arrays carved from the rows' tails.  Fx = F followed by geom, work, verts, planes, grounds,
        table, vel, lift, lam, xf, the general pairs' float scratch, rest_speed; Ix = I followed by
        geomi, excluded, active, touched, ints, keys, rows, xi, the general pairs' int scratch,
        count and the sizes, then the address of the scheme's kernel in this process
        (:data:`ROW_SIZES` in all, at the end).  A copy's contacts (its warm start, the table of its
        last step) and its geoms, friction and gravity are thus its own; its table does not grow
        (count[1] counts the pairs left out)."""
        c = self.contacts
        assert (c.vel.shape[1], c.ints.shape[1], c.keys.shape[1]) == (VEL_WIDTH, 5, 2)
        geom, geomi, work, verts, planes, excluded, gf, gi = c.scene
        sizes = (len(F), len(I), len(c.vel), len(geom), len(verts), len(planes),
                 len(excluded), len(c.grounds), len(c.table), len(c.keys), len(self.xf),
                 len(self.xi), self.settings.iters, len(gf), len(gi), self._kernel_address())
        Fx = np.concatenate([F] + [a.ravel() for a in (
            geom, work, verts, planes, c.grounds, c.table, c.vel, c.lift, c.lam, self.xf, gf)]
            + [[self.settings.rest_speed]])
        Ix = np.concatenate([I] + [a.ravel() for a in (
            geomi, excluded, self.active, c.touched, c.ints, c.keys, c.rows, self.xi, gi,
            self._count)] + [sizes]).astype(np.int64)
        return self._rows_step, Fx, Ix


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


# The solve ``run`` calls after each step: run and rows_step are templates, compiled only as
# each backend's contact module rebinds them to its own after_step (rtrigid._jit.rebind)
after_step = None


@jit
def run(kernel, n, dt, F, I, scene, grounds, active, arrays, settings, extra, count):
    """n times one step of the kernel at address ``kernel`` (:func:`rtrigid._jit.call_step`: one
    compile of this for every scheme) and the contact solve, in one compiled call (scene, arrays,
    settings: the members of the groups ``after_step`` takes, Scene, ContactArrays and
    SolveSettings, as plain tuples; extra: ``after_step``'s (float, int) scratch xf, xi); count[0]
    gets the contacts of the last step, count[1] adds the pairs left out for want of table rows.
    Stops at a step the kernel could not take.  The contact solve takes every array as a view
    holding no reference (``buffers.unowned``): it reads rows of them in its innermost loops."""
    geom, geomi, work, verts, planes, excluded, gf, gi = scene
    scene = Scene(unowned(geom), unowned(geomi), unowned(work), unowned(verts),
                  unowned(planes), unowned(excluded), unowned(gf), unowned(gi))
    table, touched, vel, ints, lift, keys, lam, rows = arrays
    arrays = ContactArrays(unowned(table), unowned(touched), unowned(vel), unowned(ints),
                           unowned(lift), unowned(keys), unowned(lam), unowned(rows))
    settings = SolveSettings(*settings)
    xf, xi = extra
    grounds, active, xf, xi, count = (unowned(grounds), unowned(active), unowned(xf),
                                      unowned(xi), unowned(count))
    Fv, Iv = unowned(F), unowned(I)  # (the kernel takes F and I as the Simulation's)
    flags = OK
    for _ in range(n):
        status = call_step(kernel, 1, dt, F, I)
        flags |= status & USED_FALLBACK
        if status & ~USED_FALLBACK:
            return status | flags
        count[0] = after_step(Fv, Iv, scene, grounds, active, arrays, settings, dt, xf, xi,
                              count)
    return flags


ROW_SIZES = 16


@jit
def rows_step(n, dt, F, I):
    """A kernel of the contract for :class:`rtrigid.Batch`: ``run`` on the arrays carved
    from the rows F, I (:meth:`ContactStepper.rows`), of the scheme's kernel whose address
    (in this process) ends I."""
    m = I.shape[0] - ROW_SIZES
    nf, ni, nb, ng, nv, npl, ne = I[m], I[m + 1], I[m + 2], I[m + 3], I[m + 4], I[m + 5], \
        I[m + 6]
    ngr, nr, nh, nxf, nxi, iters = I[m + 7], I[m + 8], I[m + 9], I[m + 10], I[m + 11], \
        I[m + 12]
    ngf, ngi, kernel = I[m + 13], I[m + 14], I[m + 15]
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
    # F and I as ordinary arrays (slices), not views: the types of the scheme's step
    # compiled for a Simulation, which ``call_step`` calls
    return run(kernel, n, dt, F[:nf], I[:ni],
               (geom, geomi, work, verts, planes, excluded, gf, gi), grounds, active,
               (table, touched, vel, ints, lift, keys, lam, rows), (iters, rest_speed), (xf, xi),
               count)
