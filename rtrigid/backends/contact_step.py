"""The contact step of either backend: the scheme's step, then the backend's contact solve,
n times in one compiled call (:class:`ContactStepper`), and the same on a Batch's rows.

The scheme's step is called by its address (:func:`rtrigid._jit.call_step`), so the loop here
is compiled once for each backend's solve, not once per scheme with the step linked into it."""
import importlib
import warnings

import numpy as np

from rtrigid._jit import call_step, entry_point, jit, step_address
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
    says so.

    Every array of the contact step (the scene, the table and its warm start, the scratch)
    lives in one float and one int buffer, the contacts' arrays being views of them
    (:meth:`_pack`): a compiled call takes two arrays for them, not twenty (each array numba
    takes from Python costs it a type lookup and a wrapper)."""

    def __init__(self, kernel, contacts, collide, iters, rest_speed, *, after,
                 extra=(np.zeros(0), np.zeros(0, np.int64))):
        self.contacts = contacts
        home = importlib.import_module(after)
        suffix = "_general" if contacts.general else ""
        self._run, self._rows_step = (getattr(home, "run" + suffix),
                                      getattr(home, "rows_step" + suffix))
        self._call = self._first_call
        self._kernel, self._address = kernel, None  # compiled on the first step
        shaped = contacts.collides
        self.active = (shaped if collide is None else np.asarray(collide, bool)
                       & shaped).astype(np.int64) * DYNAMIC
        self.active[contacts.kinematic] = KINEMATIC
        self.settings = SolveSettings(int(iters), float(rest_speed))
        self._extra = extra if callable(extra) else (lambda rows: extra)
        self._count = np.zeros(2, np.int64)  # contacts of the last step, pairs left out
        self._pack()

    def _pack(self):
        """Copy the contact step's arrays into one float buffer (``_cf``: the geoms, their
        work space, vertices and planes, the grounds, the table, the bodies' solver scratch
        and lift, the warm-start impulses, the backend's float scratch, the general pairs'
        float scratch, rest_speed) and one int buffer (``_ci``: the geoms' ints, the excluded
        pairs, the active bodies, touched, the bodies' ints, the warm-start keys, the rows'
        order, the backend's int scratch, the general pairs' int scratch, the count, then
        :data:`ROW_SIZES` sizes), and make the contacts' arrays views of them.  Again
        whenever the table has grown (with the backend's scratch for its new rows)."""
        c = self.contacts
        self._rows = len(c.table)
        self.xf, self.xi = self._extra(self._rows)
        geom, geomi, work, verts, planes, excluded, gf, gi = c.scene
        floats = (geom, work, verts, planes, c.grounds, c.table, c.vel, c.lift, c.lam, self.xf,
                  gf)
        ints = (geomi, excluded, self.active, c.touched, c.ints, c.keys, c.rows, self.xi, gi,
                self._count)
        assert (c.vel.shape[1], c.ints.shape[1], c.keys.shape[1]) == (VEL_WIDTH, 5, 2)
        sizes = (0, 0, len(c.vel), len(geom), len(verts), len(planes), len(excluded),
                 len(c.grounds), len(c.table), len(c.keys), len(self.xf), len(self.xi),
                 self.settings.iters, len(gf), len(gi), self._address or 0)
        self._cf = np.concatenate([a.ravel() for a in floats] + [[self.settings.rest_speed]])
        self._ci = np.concatenate([a.ravel() for a in ints] + [sizes]).astype(np.int64)
        (geom, work, verts, planes, c.grounds, c.table, c.vel, c.lift, c.lam, self.xf,
         gf) = _views(self._cf, floats)
        (geomi, excluded, self.active, c.touched, c.ints, c.keys, c.rows, self.xi, gi,
         self._count) = _views(self._ci, ints)
        c.geom, c.geomi = geom, geomi
        c.scene = Scene(geom, geomi, work, verts, planes, excluded, gf, gi)

    def _repack(self):
        """Pack again if the table has grown since (a snapshot of a grown table restored)."""
        if len(self.contacts.table) != self._rows:
            self._pack()

    def __call__(self, n, dt, F, I):
        c = self.contacts
        self._repack()
        status = self._call(n, dt, F, I, self._cf, self._ci)
        c.count = int(self._count[0])
        if self._count[1]:
            left = int(self._count[1])
            self._count[1] = 0
            before = len(c.table)
            c.grow(max(2 * before, before + PAIR_POINTS * left))
            self._pack()
            warnings.warn(f"contacts: the contact table ({before} rows) was full: {left} "
                          f"geom pairs were left out of the steps just taken; it now has "
                          f"{len(c.table)} rows", RuntimeWarning, stacklevel=3)
        return status

    def _first_call(self, n, dt, F, I, cf, ci):
        """The first step: the scheme's kernel compiled (or loaded) and its address written
        into the sizes, ``run`` through numba's dispatcher, whose compiled entry point the
        later steps then call directly (:func:`rtrigid._jit.entry_point`)."""
        ci[len(ci) - 1] = self._kernel_address()
        status = self._run(n, dt, F, I, cf, ci)
        self._call = entry_point(self._run, n, dt, F, I, cf, ci)
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
        buffers that follow them: Fx = F followed by the float buffer, Ix = I followed by the
        int buffer (:meth:`_pack`), its sizes saying where F and I end and its last the address
        of the scheme's kernel in this process.  A copy's contacts (its warm start, the table
        of its last step) and its geoms, friction and gravity are thus its own; its table does
        not grow (count[1] counts the pairs left out)."""
        self._repack()
        Fx = np.concatenate([F, self._cf])
        Ix = np.concatenate([I, self._ci])
        Ix[len(Ix) - ROW_SIZES] = len(F)
        Ix[len(Ix) - ROW_SIZES + 1] = len(I)
        Ix[len(Ix) - 1] = self._kernel_address()
        return self._rows_step, Fx, Ix


def _views(buf, parts):
    """Views of consecutive stretches of ``buf`` with the shapes of ``parts``."""
    out, o = [], 0
    for a in parts:
        out.append(buf[o:o + a.size].reshape(a.shape))
        o += a.size
    return out


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
ROW_SIZES = 16


@jit
def run(n, dt, F, I, Cf, Ci):
    """n times one step of the scheme's kernel (:func:`rtrigid._jit.call_step`: one compile of
    this for every scheme) and the contact solve, in one compiled call, on the arrays carved
    from the contact buffers Cf, Ci (:meth:`ContactStepper._pack`; their first elements at
    the offsets the sizes give, which end Ci with the kernel's address).  count[0] (in Ci)
    gets the contacts of the last step, count[1] adds the pairs left out for want of table
    rows.  Stops at a step the kernel could not take.  Every array is a view holding no
    reference (``buffers.view``): the solve reads rows of them in its innermost loops."""
    m = Ci.shape[0] - ROW_SIZES
    o, oi, nb, ng, nv, npl, ne = Ci[m], Ci[m + 1], Ci[m + 2], Ci[m + 3], Ci[m + 4], \
        Ci[m + 5], Ci[m + 6]
    ngr, nr, nh, nxf, nxi, iters = Ci[m + 7], Ci[m + 8], Ci[m + 9], Ci[m + 10], Ci[m + 11], \
        Ci[m + 12]
    ngf, ngi, kernel = Ci[m + 13], Ci[m + 14], Ci[m + 15]
    geom = view(Cf, o, (ng, G_WIDTH))
    o += ng * G_WIDTH
    work = view(Cf, o, (ng, W_WIDTH))
    o += ng * W_WIDTH
    verts = view(Cf, o, (nv, 3))
    o += nv * 3
    planes = view(Cf, o, (npl, 4))
    o += npl * 4
    grounds = view(Cf, o, (ngr, P_WIDTH))
    o += ngr * P_WIDTH
    table = view(Cf, o, (nr, C_WIDTH))
    o += nr * C_WIDTH
    vel = view(Cf, o, (nb, VEL_WIDTH))
    o += nb * VEL_WIDTH
    lift = view(Cf, o, (nb, LIFT_WIDTH))
    o += nb * LIFT_WIDTH
    lam = view(Cf, o, (nr, LAM_WIDTH))
    o += nr * LAM_WIDTH
    xf = view(Cf, o, (nxf,))
    o += nxf
    gf = view(Cf, o, (ngf,))
    settings = SolveSettings(iters, Cf[o + ngf])
    o = oi
    geomi = view(Ci, o, (ng, GI_WIDTH))
    o += ng * GI_WIDTH
    excluded = view(Ci, o, (ne,))
    o += ne
    active = view(Ci, o, (nb,))
    touched = view(Ci, o + nb, (nb,))
    o += 2 * nb
    ints = view(Ci, o, (nb, 5))
    o += nb * 5
    keys = view(Ci, o, (nh, 2))
    o += nh * 2
    rows = view(Ci, o, (nr,))
    o += nr
    xi = view(Ci, o, (nxi,))
    o += nxi
    gi = view(Ci, o, (ngi,))
    count = view(Ci, o + ngi, (2,))
    scene = Scene(geom, geomi, work, verts, planes, excluded, gf, gi)
    arrays = ContactArrays(table, touched, vel, ints, lift, keys, lam, rows)
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


@jit
def rows_step(n, dt, F, I):
    """A kernel of the contract for :class:`rtrigid.Batch`: ``run`` on the rows F, I
    (:meth:`ContactStepper.rows`): the Simulation's F and I, each followed by the contact
    buffer whose sizes end I."""
    m = I.shape[0] - ROW_SIZES
    # F and I as ordinary arrays (slices), not views: the types of the scheme's step
    # compiled for a Simulation, which ``call_step`` calls
    return run(n, dt, F[:I[m]], I[:I[m + 1]], F, I)
