"""The bodies backend's contact step: free flight by the scheme's kernel, then the contact
solve of :mod:`rtrigid.contact.solver` on the free bodies, then their momenta re-derived."""
import numpy as np

from rtrigid._jit import jit, kernel_driver
from rtrigid.backends.bodies.common import body_momenta, open_buffers, state_view
from rtrigid.backends.bodies.layout import B_INERTIA, B_MASS, FREE
from rtrigid.contact.geometry import G_KIND, NONE
from rtrigid.contact.solver import GAP, START_BUDGET, VEL_WIDTH, flight_gap, resolve


@jit
def after_step(F, I, geom, grounds, table, active, touched, vel, ints, lift, keys, lam,
               rows, iters, rest_speed, dt, xf, xi):
    """The contact solve after a free-flight step; returns the number of contacts (xf: the
    tree backend's extra scratch, unused here; xi: empty, or [``START_BUDGET``] under a scheme
    whose flight does not keep energy -- the energy budget is then taken from the step's
    start, S_prev, see :func:`rtrigid.contact.solver.flight_allowance`)."""
    (gravity, bodyf, bodyi, _, _, S, S_prev, _, _, _, _, _) = open_buffers(F, I)
    nb = bodyi.shape[0]
    x, q, v, w, P, pq, L = state_view(S, nb)
    mass, inertia = bodyf[:, B_MASS], bodyf[:, B_INERTIA:B_INERTIA + 3]
    gap = vel[:, GAP]
    if xi.shape[0] > 0 and xi[0] == START_BUDGET:
        x0, _, v0, w0 = state_view(S_prev, nb)[:4]
        flight_gap(mass, inertia, gravity, x0, v0, w0, x, v, w, gap)
    else:
        gap[:] = 0.0
    count = resolve(table, x, q, v, w, mass, inertia, active, geom, grounds, gravity, touched,
                    vel, ints, lift, keys, lam, rows, iters, rest_speed, dt)
    for b in range(nb):
        if touched[b]:
            body_momenta(bodyf, b, q, v, w, P, pq, L)
    return count


class ContactStepper:
    """``step(n, dt, F, I)`` of the kernel contract: n times one step of ``kernel`` and the
    contact solve, stopping at a step the kernel could not take.

    ``bodyi``: the bodies backend's kinds (its free bodies collide), or None: every body with
    a shape collides.  ``after``: the module whose ``after_step`` solves the contacts (this
    one, or the tree backend's), ``extra``: its (float, int) scratch."""

    def __init__(self, kernel, contacts, bodyi, iters, rest_speed, *,
                 after="rtrigid.backends.bodies.contact",
                 extra=(np.zeros(0), np.zeros(0, np.int64))):
        self.contacts = contacts
        self._run = kernel_driver(_run_source, kernel, imports=(
            f"from {after} import after_step\n" + _RUN_IMPORTS))
        shaped = contacts.geom[:, G_KIND] != NONE
        self.active = (shaped if bodyi is None else (np.asarray(bodyi) == FREE)
                       & shaped).astype(np.int64)
        self.iters, self.rest_speed = int(iters), float(rest_speed)
        self.xf, self.xi = extra
        self._count = np.zeros(1, np.int64)

    def __call__(self, n, dt, F, I):
        c = self.contacts
        status = self._run(n, dt, F, I, c.geom, c.grounds, c.table, self.active, c.touched,
                           c.vel, c.ints, c.lift, c.keys, c.lam, c.rows, self.iters,
                           self.rest_speed, self.xf, self.xi, self._count)
        c.count = int(self._count[0])
        return status

    def rows(self, F, I):
        """This contact step as a kernel of the contract on longer rows, for
        :class:`rtrigid.Batch`: ``(step, Fx, Ix)``, ``step(n, dt, Fx, Ix)`` the same compiled
        ``run`` on the Simulation's ``F``, ``I`` and the contact arrays carved from the rows'
        tails.  Fx = F followed by geom, grounds, table, vel, lift, lam, xf, rest_speed;
        Ix = I followed by active, touched, ints, keys, rows, xi, count and the sizes
        (:data:`ROW_SIZES` of them, at the end).  A copy's contacts (its warm start, the
        table of its last step) and its shapes, friction and gravity are thus its own."""
        c = self.contacts
        assert (c.vel.shape[1], c.ints.shape[1], c.keys.shape[1]) == (VEL_WIDTH, 5, 2)
        step = kernel_driver(_rows_source, self._run, imports=_ROWS_IMPORTS)
        sizes = (len(F), len(I), len(c.geom), len(c.grounds), len(c.table), len(c.keys),
                 len(self.xf), len(self.xi), self.iters)
        Fx = np.concatenate([F] + [a.ravel() for a in (
            c.geom, c.grounds, c.table, c.vel, c.lift, c.lam, self.xf)] + [[self.rest_speed]])
        Ix = np.concatenate([I] + [a.ravel() for a in (
            self.active, c.touched, c.ints, c.keys, c.rows, self.xi, self._count)]
            + [sizes]).astype(np.int64)
        return step, Fx, Ix


_RUN_IMPORTS = "from rtrigid.backends.buffers import OK, USED_FALLBACK"


ROW_SIZES = 9
_ROWS_IMPORTS = ("from rtrigid.backends.bodies.contact import ROW_SIZES\n"
                 "from rtrigid.backends.buffers import view\n"
                 "from rtrigid.contact.geometry import C_WIDTH, G_WIDTH, P_WIDTH\n"
                 "from rtrigid.contact.solver import VEL_WIDTH")


def _rows_source(run):
    """The source of ``step``, the contact step on a Batch's rows (:meth:`ContactStepper.rows`),
    compiled once per ``run`` with it as the global ``kernel``."""
    def step(n, dt, F, I):
        """``run`` on the arrays carved from the rows F, I (see ContactStepper.rows)."""
        m = I.shape[0] - ROW_SIZES
        nf, ni, nb, ng, nr, nh, nxf, nxi, iters = (I[m], I[m + 1], I[m + 2], I[m + 3],
                                                   I[m + 4], I[m + 5], I[m + 6], I[m + 7],
                                                   I[m + 8])
        o = nf
        geom = view(F, o, (nb, G_WIDTH))
        o += nb * G_WIDTH
        grounds = view(F, o, (ng, P_WIDTH))
        o += ng * P_WIDTH
        table = view(F, o, (nr, C_WIDTH))
        o += nr * C_WIDTH
        vel = view(F, o, (nb, VEL_WIDTH))
        o += nb * VEL_WIDTH
        lift = view(F, o, (nb, 3))
        o += nb * 3
        lam = view(F, o, (nr, 3))
        o += nr * 3
        xf = view(F, o, (nxf,))
        rest_speed = F[o + nxf]
        o = ni
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
        count = view(I, o + nxi, (1,))
        return kernel(n, dt, view(F, 0, (nf,)), view(I, 0, (ni,)), geom, grounds, table,
                      active, touched, vel, ints, lift, keys, lam, rows, iters, rest_speed, xf,
                      xi, count)


def _run_source(kernel):
    """The source of ``run``, compiled once per kernel with the kernel as a global
    (:func:`rtrigid._jit.kernel_driver`: numba does not cache a function that takes a kernel
    as an argument, so every process compiled it again)."""
    def run(n, dt, F, I, geom, grounds, table, active, touched, vel, ints, lift, keys, lam,
            rows, iters, rest_speed, xf, xi, count):
        """n times one step of ``kernel`` and the contact solve, in one compiled call;
        count[0] gets the contacts of the last step.  Stops at a step the kernel could not
        take."""
        flags = OK
        for _ in range(n):
            status = kernel(1, dt, F, I)
            flags |= status & USED_FALLBACK
            if status & ~USED_FALLBACK:
                return status | flags
            count[0] = after_step(F, I, geom, grounds, table, active, touched, vel, ints, lift,
                                  keys, lam, rows, iters, rest_speed, dt, xf, xi)
        return flags
