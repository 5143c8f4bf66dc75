"""``semi_implicit_euler`` for single bodies: one evaluation of Euler's equations per step.

With the right-hand side of 002 (42) at the start of the step (``nullspace_rk4.derivative``:
F / m, and J^-1 (mu - w x J w) with mu the body-frame moment about the reference point),

    v_{n+1} = v_n + h F / m,          w_{n+1} = w_n + h J^-1 (mu - w_n x J w_n),
    x_{n+1} = x_n + h v_{n+1},        q_{n+1} = q_n o exp((0, h w_{n+1} / 2)), normalised,

the rotation by the exact exponential map of the new body rate.  A pivoted body's centre
follows from q as under ``nullspace_rk4`` (its ``settle_body``).  First order; energy and angular
momentum are not conserved (a free spinning body's |L| drifts by O(h) per unit time): see
the tree module's docstring for when to choose it.

The call's outer loops (a body at a time through all n steps, and the roll-back of a
non-finite step) are ``nullspace_rk4``'s ``step`` and ``advance_body``, compiled again with
this module's :func:`_advance` in place of RK4's (:func:`rtrigid._jit.rebind`).
"""
from rtrigid._jit import jit, rebind
from rtrigid.backends.bodies import nullspace_rk4 as _rk4
from rtrigid.backends.bodies.nullspace_rk4 import (
    derivative,
    finite_state,
    load_body,
    settle_body,
    store_body,
)
from rtrigid.maths.quat import turn_t

work_size = _rk4.work_size


@jit
def _advance(c, springs, S, S_prev, nb, b, n, dt):
    """Up to n semi-implicit Euler steps of body b with constants c (the contract of
    ``nullspace_rk4._advance``)."""
    s = load_body(S, nb, b)
    prev = s
    taken = 0
    while taken < n:
        y = s[:13]
        k = derivative(c, springs, b, y)
        v0, v1, v2 = y[7] + dt * k[7], y[8] + dt * k[8], y[9] + dt * k[9]
        w0, w1, w2 = y[10] + dt * k[10], y[11] + dt * k[11], y[12] + dt * k[12]
        q = turn_t(y[3], y[4], y[5], y[6], w0, w1, w2, dt)
        new, energy2 = settle_body(c, (y[0] + dt * v0, y[1] + dt * v1, y[2] + dt * v2,
                                   q[0], q[1], q[2], q[3], v0, v1, v2, w0, w1, w2))
        if not finite_state(new, energy2):
            break
        prev = s
        s = new
        taken += 1
    store_body(S, nb, b, s)
    store_body(S_prev, nb, b, prev)
    return taken


advance_body_semi_implicit_euler = rebind(_rk4.advance_body, "semi_implicit_euler", __name__,
                                          _advance=_advance)
step_semi_implicit_euler = rebind(_rk4.step, "semi_implicit_euler", __name__,
                                  advance_body=advance_body_semi_implicit_euler)
step = step_semi_implicit_euler
