"""``semi_implicit_euler`` for single bodies: one evaluation of Euler's equations per step.

With the right-hand side of 002 (42) at the start of the step (``nullspace_rk4.derivative``:
F / m, and J^-1 (mu - w x J w) with mu the body-frame moment about the reference point),

    v_{n+1} = v_n + h F / m,          w_{n+1} = w_n + h J^-1 (mu - w_n x J w_n),
    x_{n+1} = x_n + h v_{n+1},        q_{n+1} = q_n o exp((0, h w_{n+1} / 2)), normalised,

the rotation by the exact exponential map of the new body rate.  A pivoted body's centre
follows from q as under ``nullspace_rk4`` (its ``settle_body``).  First order; energy and angular
momentum are not conserved (a free spinning body's |L| drifts by O(h) per unit time): see
the tree module's docstring for when to choose it.

The call's loops (a body at a time through all n steps, and the roll-back of a non-finite
step) are ``nullspace_rk4``'s ``step``, ``advance_body`` and ``advance_steps``, compiled
again with this module's :func:`_update` in place of RK4's (:func:`rtrigid._jit.rebind`).
"""
from rtrigid._jit import jit_inline, rebind
from rtrigid.backends.bodies import nullspace_rk4 as _rk4
from rtrigid.backends.bodies.nullspace_rk4 import derivative, settle_body
from rtrigid.maths.quat import turn_t

work_size = _rk4.work_size


@jit_inline
def _update(c, springs, b, y, dt):
    """One semi-implicit Euler step of body b from y (13 values), settled (the contract of
    ``nullspace_rk4._update``)."""
    k = derivative(c, springs, b, y)
    v0, v1, v2 = y[7] + dt * k[7], y[8] + dt * k[8], y[9] + dt * k[9]
    w0, w1, w2 = y[10] + dt * k[10], y[11] + dt * k[11], y[12] + dt * k[12]
    q = turn_t(y[3], y[4], y[5], y[6], w0, w1, w2, dt)
    return settle_body(c, (y[0] + dt * v0, y[1] + dt * v1, y[2] + dt * v2,
                           q[0], q[1], q[2], q[3], v0, v1, v2, w0, w1, w2))


advance_steps_semi_implicit_euler = rebind(_rk4.advance_steps, "semi_implicit_euler",
                                           __name__, _update=_update)
advance_body_semi_implicit_euler = rebind(_rk4.advance_body, "semi_implicit_euler", __name__,
                                          advance_steps=advance_steps_semi_implicit_euler)
step_semi_implicit_euler = rebind(_rk4.step, "semi_implicit_euler", __name__,
                                  advance_body=advance_body_semi_implicit_euler)
step = step_semi_implicit_euler
