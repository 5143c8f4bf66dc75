"""The bodies backend's contact step: free flight by the scheme's kernel, then the contact
solve of :mod:`rtrigid.contact.solver` on the free bodies, then their momenta re-derived
(the loop around the two: :mod:`rtrigid.backends.contact_step`)."""
import numpy as np

from rtrigid._jit import jit, rebind
from rtrigid.backends import contact_step
from rtrigid.backends.bodies.common import body_momenta, open_buffers, state_view
from rtrigid.backends.bodies.layout import B_INERTIA, B_MASS
from rtrigid.contact.general import resolve_general
from rtrigid.contact.manifold import KINEMATIC
from rtrigid.contact.solver import (
    GAP,
    START_BUDGET,
    Bodies,
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


# the contact step and its Batch rows around this solve (rtrigid.backends.contact_step)
run = rebind(contact_step.run, "bodies", __name__, after_step=after_step)
run_general = rebind(contact_step.run, "bodies_general", __name__,
                     after_step=after_step_general)
rows_step = rebind(contact_step.rows_step, "bodies", __name__, run=run)
rows_step_general = rebind(contact_step.rows_step, "bodies_general", __name__, run=run_general)
