"""Independent references: the rigid-body ODE integrated by scipy at tight tolerance.

Written from scratch on rotation matrices (not quaternions), Euler's equations in the body
frame, gravity as the only load: nothing here calls rtrigid's kernels.  Used by the tests and
by ``rtrigid bench --accuracy``; needs scipy (a dev dependency), imported on first use.
"""
import numpy as np


def _hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def rigid_body_reference(R0, omega0, j_ref, t_end, com=(0.0, 0.0, 0.0), mass=0.0,
                         gravity=(0.0, 0.0, -9.81), t_eval=None):
    """Rotate about a fixed reference point: R' = R hat(W), J W' = s x (R^T m g) - W x J W.

    Returns (times, R (k,3,3), W (k,3)).  com: centre of mass relative to the reference
    point in body axes (zero for a free body's centre of mass).
    """
    from scipy.integrate import solve_ivp

    j_ref = np.asarray(j_ref, float)
    j_inv = np.linalg.inv(j_ref)
    s = np.asarray(com, float)
    mg = mass * np.asarray(gravity, float)

    def rhs(_, y):
        R = y[:9].reshape(3, 3)
        w = y[9:]
        torque = np.cross(s, R.T @ mg)
        return np.concatenate([(R @ _hat(w)).ravel(), j_inv @ (torque - np.cross(w, j_ref @ w))])

    y0 = np.concatenate([np.asarray(R0, float).ravel(), np.asarray(omega0, float)])
    sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-13, atol=1e-13,
                    t_eval=t_eval if t_eval is not None else [t_end])
    return sol.t, sol.y[:9].T.reshape(-1, 3, 3), sol.y[9:].T


def fitted_order(dts, errors):
    """Least-squares slope of log(error) against log(dt)."""
    return float(np.polyfit(np.log(dts), np.log(errors), 1)[0])
