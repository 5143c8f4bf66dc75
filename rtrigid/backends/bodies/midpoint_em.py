"""``midpoint_em``: the energy-conserving mid-point scheme of Geradin & Rixen, 003 §11.

Every body is treated in descriptor form (003 (299)): centre-of-mass position x, orientation,
centroidal inertia J (the principal moments), and for a pivoted body the reaction force
lambda at the pivot as an extra unknown.  Per step:

* the relative rotation R_n^T R_{n+1} = F^2 is split into two equal halves F, parametrized by
  e = vect(F) = n sin(phi/2), the vector part of the Euler parameters of the whole increment
  (003 (321)-(324)); F = e0 I + e e^T / (1 + e0) + hat(e), e0 = sqrt(1 - |e|^2), so
  R_{n+1/2} = R_n F and the mid-point body angular velocity is Omega_m = 2 e / h (003 (326));
* the balance laws are taken at the mid-point (003 (306)-(312), (331)); the pivot is held at
  velocity level, x_{n+1} - x_n = 2 R_n F (e x X_g) (003 (339)-(340)), X_g the centre of mass
  seen from the pivot in body axes -- the choice that makes the reaction do no discrete work;
* Newton on u = (x_{n+1}, e, lambda) with the residual r of 003 (341) and the iteration matrix
  S = -dr/du of 003 (343)-(344) (six unknowns (x, e) for a free body).

Equation (344) prints the S_ee term (4/h^2) dF/de_i J without the trailing e; the derivative
of (4/h^2) R_n F J e is (4/h^2) R_n (F J + sum_i dF/de_i J e k_i^T), which is what is coded
(a finite-difference test checks the whole matrix).

Velocities are updated from the mid-point ones, v_{n+1} = 2 (x_{n+1} - x_n)/h - v_n and, in
body axes, Omega_{n+1} = 4 e / h - Omega_n (003 (326)).  This is the update 003 §11.4 uses to
prove energy conservation, (334), and with it energy is conserved to round-off -- but it is
only first-order accurate: with F J Omega_m = J Omega_n (the free body's (331)) it gives
J Omega_{n+1} = (2 I - F) J Omega_m instead of the symmetric F^T J Omega_m, an O(h^2) error per
step (measured order 1.06 on the heavy top).  Step (iv) of the algorithm in 003 §11.5 updates
the spatial angular momentum instead, h_{n+1} = 2 h_{n+1/2} - h_n: second order, conserves a
free body's angular momentum, but not its energy.  The paper's two statements cannot both
hold; ``midpoint_em`` is the energy-conserving one (the section's claim), and
The option ``update="momentum"`` switches a simulation to the step (iv) update for comparison.

Loads beyond the paper's gravity: constant applied forces act at the centre of mass like
gravity (exactly conserving); a constant applied world torque adds h tau to the angular
balance (discrete work 2 e . R_n^T tau); springs enter as the discrete force
f = -c (d_n + d_{n+1}), c = k/2 (1 - 2 L0 / (l_n + l_{n+1})), applied at the mid-rotation
lever arm R_n F c_s, which makes their discrete work exactly the change of spring energy.
So energy is conserved to round-off whenever no applied torque works.  The pivot is held at
velocity level only, yet (340) is exactly the increment of the position constraint:
R_n (F^2 - I) X_g = R_n F (F - F^T) X_g = 2 R_n F (e x X_g), since F - F^T = 2 hat(e).  So the
attachment drifts by round-off only (003 §11.6 reports <= 2e-7, presumably its Newton
tolerance).

Newton stops by the stall rule of :mod:`.implicit`; a failed step falls back to sub-steps.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.backends.newton import converged
from rtrigid.backends.bodies import implicit
from rtrigid.backends.buffers import STAT_ITERS, STAT_MAX_ITERS
from rtrigid.backends.bodies.common import body_momenta, runtime_int, state_view
from rtrigid.maths.linalg import solve_inplace
from rtrigid.backends.bodies.layout import B_COM, B_INERTIA, B_MASS, PIVOTED, S_ANCHOR, S_K, S_POINT, S_REST
from rtrigid.maths.quat import qmul_t, rotmat

# the velocity update above meets a pivot only to O(h^2): the backend reports the rates at t
# from the body's angular momentum about its pivot (bodies.backend.BodiesBackend.velocities)
MEAN_RATES = True

# scratch layout (float64 entries)
_F, _D, _R0, _JAC, _RES, _U, _VEC, _END = 0, 9, 36, 45, 126, 135, 144, 168


def work_size(nb):
    """One body's Newton scratch (bodies are solved one after the other)."""
    return _END


@jit
def carve(work):
    """(F, D, R0, jac, res, u, vec): views into the scratch array.

    F (3,3) half rotation; D (3,3,3) with D[i] = dF/de_i; R0 (3,3) rotation at t_n;
    jac (9,9) iteration matrix S; res (9,) residual, then Newton increment; u (9,) unknowns
    (x_{n+1}, e, lambda); vec (8,3) small vectors.
    """
    return (work[_F:_D].reshape((3, 3)), work[_D:_R0].reshape((3, 3, 3)),
            work[_R0:_JAC].reshape((3, 3)), work[_JAC:_RES].reshape((9, 9)),
            work[_RES:_U], work[_U:_VEC], work[_VEC:_END].reshape((8, 3)))


@jit
def half_rotation(e, F, D):
    """F(e) of 003 (324) and its derivatives D[i] = dF/de_i; returns e0, or -1 if |e| >= 1."""
    ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2]
    if not ee < 1.0:
        return -1.0
    e0 = np.sqrt(1.0 - ee)
    a = 1.0 / (1.0 + e0)
    b = a * a / e0
    for j in range(3):
        for k in range(3):
            F[j, k] = a * e[j] * e[k]
        F[j, j] += e0
    F[0, 1] -= e[2]
    F[0, 2] += e[1]
    F[1, 0] += e[2]
    F[1, 2] -= e[0]
    F[2, 0] -= e[1]
    F[2, 1] += e[0]
    for i in range(3):
        Di = D[i]
        for j in range(3):
            for k in range(3):
                Di[j, k] = b * e[j] * e[k] * e[i]
            Di[j, j] -= e[i] / e0
        for j in range(3):
            Di[i, j] += a * e[j]
            Di[j, i] += a * e[j]
    # d hat(e) / de_i = hat(k_i)
    D[0, 1, 2] -= 1.0
    D[0, 2, 1] += 1.0
    D[1, 0, 2] += 1.0
    D[1, 2, 0] -= 1.0
    D[2, 0, 1] -= 1.0
    D[2, 1, 0] += 1.0
    return e0


@jit
def _mv(a, x0, x1, x2):
    """a @ (x0, x1, x2) for a 3x3 array, as a tuple."""
    return (a[0, 0] * x0 + a[0, 1] * x1 + a[0, 2] * x2,
            a[1, 0] * x0 + a[1, 1] * x1 + a[1, 2] * x2,
            a[2, 0] * x0 + a[2, 1] * x1 + a[2, 2] * x2)


@jit
def _cross(a0, a1, a2, b0, b1, b2):
    return (a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0)


@jit
def _rfc(R0, A, c0, c1, c2):
    """R0 A c for 3x3 arrays R0, A and a vector c."""
    t = _mv(A, c0, c1, c2)
    return _mv(R0, t[0], t[1], t[2])


@jit
def _spring_terms(springf, s, x0, x1, R0, F, cs):
    """Discrete spring force f = -c (d0 + d1), its stiffness K = -df/dd1 (row-major 9-tuple),
    d1 and the lever arm R0 F c_s (c_s: spring point from the centre of mass, body axes).
    """
    a0 = _mv(R0, cs[0], cs[1], cs[2])
    fc = _mv(F, cs[0], cs[1], cs[2])
    ffc = _mv(F, fc[0], fc[1], fc[2])
    arm = _mv(R0, fc[0], fc[1], fc[2])
    y1 = _mv(R0, ffc[0], ffc[1], ffc[2])
    d0 = (x0[0] + a0[0] - springf[s, S_ANCHOR], x0[1] + a0[1] - springf[s, S_ANCHOR + 1],
          x0[2] + a0[2] - springf[s, S_ANCHOR + 2])
    d1 = (x1[0] + y1[0] - springf[s, S_ANCHOR], x1[1] + y1[1] - springf[s, S_ANCHOR + 1],
          x1[2] + y1[2] - springf[s, S_ANCHOR + 2])
    l0 = np.sqrt(d0[0] * d0[0] + d0[1] * d0[1] + d0[2] * d0[2])
    l1 = np.sqrt(d1[0] * d1[0] + d1[1] * d1[1] + d1[2] * d1[2])
    k = springf[s, S_K]
    rest = springf[s, S_REST]
    lsum = max(l0 + l1, 1e-300)
    c = 0.5 * k * (1.0 - 2.0 * rest / lsum)
    sm = (d0[0] + d1[0], d0[1] + d1[1], d0[2] + d1[2])
    g = k * rest / (lsum * lsum * max(l1, 1e-300))
    K = (c + g * sm[0] * d1[0], g * sm[0] * d1[1], g * sm[0] * d1[2],
         g * sm[1] * d1[0], c + g * sm[1] * d1[1], g * sm[1] * d1[2],
         g * sm[2] * d1[0], g * sm[2] * d1[1], c + g * sm[2] * d1[2])
    return (-c * sm[0], -c * sm[1], -c * sm[2]), K, arm


@jit
def _spring_point(bodyf, springf, s, b):
    """Spring attachment from the centre of mass, body axes (the model stores it from the
    reference point)."""
    return (springf[s, S_POINT] - bodyf[b, B_COM], springf[s, S_POINT + 1] - bodyf[b, B_COM + 1],
            springf[s, S_POINT + 2] - bodyf[b, B_COM + 2])


@jit
def residual(arrays, b, h, start, loads, u, out):
    """Residual r of 003 (341) at u = (x_{n+1}, e, lambda), written into ``res``.

    Extended by the applied torque and the springs (module docstring).  ``arrays``: the
    model's (bodyf, bodyi, springf, springi); ``start``: (x0, v0, R0, hn), hn the spatial
    angular momentum R_n J Omega_n about the centre of mass; ``loads``: (fc, tau), fc the
    constant world force at the centre of mass (gravity and applied); ``out``: (F, D, res,
    vec).  Fills F and D for u's e.  Returns the scaled max-norm of r, or inf when |e| >= 1.
    """
    bodyf, bodyi, springf, springi = arrays
    x0, v0, R0, hn = start
    fc, tau = loads
    F, D, res, vec = out
    pivoted = bodyi[b] == PIVOTED
    m = bodyf[b, B_MASS]
    e = u[3:6]
    if half_rotation(e, F, D) < 0.0:
        return np.inf
    j0, j1, j2 = bodyf[b, B_INERTIA], bodyf[b, B_INERTIA + 1], bodyf[b, B_INERTIA + 2]
    rfje = _rfc(R0, F, j0 * e[0], j1 * e[1], j2 * e[2])
    c2 = 2.0 / h
    c4 = 4.0 / (h * h)
    fs0 = fs1 = fs2 = 0.0
    ts0 = ts1 = ts2 = 0.0
    fscale = 0.0
    for s in range(springi.shape[0]):
        if springi[s] != b:
            continue
        f, _, arm = _spring_terms(springf, s, x0, u[0:3], R0, F, _spring_point(bodyf, springf,
                                                                               s, b))
        fs0 += f[0]
        fs1 += f[1]
        fs2 += f[2]
        t = _cross(arm[0], arm[1], arm[2], f[0], f[1], f[2])
        ts0 += t[0]
        ts1 += t[1]
        ts2 += t[2]
        fscale = max(fscale, abs(f[0]), abs(f[1]), abs(f[2]))
    for k in range(3):
        dx = u[k] - x0[k]
        vec[0, k] = dx
    fsum = (fs0, fs1, fs2)
    tsum = (ts0, ts1, ts2)
    for k in range(3):
        res[k] = fc[k] + fsum[k] + c2 * m * v0[k] - c2 * c2 * 0.5 * m * vec[0, k]
        res[3 + k] = c2 * hn[k] - c4 * rfje[k] + tau[k] + tsum[k]
    xscale = 0.0
    for k in range(3):
        xscale = max(xscale, abs(vec[0, k]), h * abs(v0[k]))
    if pivoted:
        xg = (bodyf[b, B_COM], bodyf[b, B_COM + 1], bodyf[b, B_COM + 2])
        arm = _rfc(R0, F, xg[0], xg[1], xg[2])  # R_{n+1/2} X_g
        lam = u[6:9]
        t = _cross(arm[0], arm[1], arm[2], lam[0], lam[1], lam[2])
        ex = _cross(e[0], e[1], e[2], xg[0], xg[1], xg[2])
        rex = _rfc(R0, F, ex[0], ex[1], ex[2])
        for k in range(3):
            res[k] += lam[k]
            res[3 + k] -= t[k]
            res[6 + k] = vec[0, k] - 2.0 * rex[k]
        fscale = max(fscale, abs(lam[0]), abs(lam[1]), abs(lam[2]))
        xscale = max(xscale, 2.0 * abs(rex[0]), 2.0 * abs(rex[1]), 2.0 * abs(rex[2]),
                     1e-6 * (abs(x0[0]) + abs(x0[1]) + abs(x0[2])))
    # scales: each equation against the size of its largest term
    fscale = max(fscale, c2 * m * max(abs(v0[0]), abs(v0[1]), abs(v0[2])),
                 c2 * c2 * 0.5 * m * xscale, abs(fc[0]), abs(fc[1]), abs(fc[2]), 1e-300)
    escale = max(c2 * max(abs(hn[0]), abs(hn[1]), abs(hn[2])),
                 c4 * max(abs(rfje[0]), abs(rfje[1]), abs(rfje[2])),
                 abs(tau[0]), abs(tau[1]), abs(tau[2]),
                 abs(tsum[0]), abs(tsum[1]), abs(tsum[2]), 1e-300)
    rnorm = 0.0
    for k in range(3):
        rnorm = max(rnorm, abs(res[k]) / fscale, abs(res[3 + k]) / escale)
    if pivoted:
        xscale = max(xscale, 1e-300)
        for k in range(3):
            rnorm = max(rnorm, abs(res[6 + k]) / xscale)
    return rnorm


@jit
def jacobian(bodyf, bodyi, springf, springi, b, h, x0, R0, u, F, D, jac):
    """Iteration matrix S = -dr/du of 003 (343)-(344) (plus the spring blocks) into ``jac``.

    F and D must be those of u's e (as left by :func:`residual`).  Returns the size n (9 for
    a pivoted body, 6 for a free one).
    """
    pivoted = bodyi[b] == PIVOTED
    n = 9 if pivoted else 6
    m = bodyf[b, B_MASS]
    e = u[3:6]
    jac[:n, :n] = 0.0
    c4 = 4.0 / (h * h)
    j0, j1, j2 = bodyf[b, B_INERTIA], bodyf[b, B_INERTIA + 1], bodyf[b, B_INERTIA + 2]
    je = (j0 * e[0], j1 * e[1], j2 * e[2])
    jdiag = (j0, j1, j2)
    for k in range(3):
        jac[k, k] = 0.5 * c4 * m  # S_xx = 2m/h^2 I
    for i in range(3):
        # S_ee, column i: (4/h^2) R0 (D_i J e + F J k_i)
        col = _rfc(R0, D[i], je[0], je[1], je[2])
        fj = _mv(R0, F[0, i] * jdiag[i], F[1, i] * jdiag[i], F[2, i] * jdiag[i])
        for k in range(3):
            jac[3 + k, 3 + i] = c4 * (col[k] + fj[k])
    for s in range(springi.shape[0]):
        if springi[s] != b:
            continue
        cs = _spring_point(bodyf, springf, s, b)
        f, K, arm = _spring_terms(springf, s, x0, u[0:3], R0, F, cs)
        for i in range(3):
            for k in range(3):
                jac[i, k] += K[3 * i + k]  # -df/dx1
        for i in range(3):
            # column i: dd1/de_i = R0 (D_i F + F D_i) c_s, da/de_i = R0 D_i c_s
            fc = _mv(F, cs[0], cs[1], cs[2])
            dc = _mv(D[i], cs[0], cs[1], cs[2])
            t1 = _mv(D[i], fc[0], fc[1], fc[2])
            t2 = _mv(F, dc[0], dc[1], dc[2])
            dd = _mv(R0, t1[0] + t2[0], t1[1] + t2[1], t1[2] + t2[2])
            da = _mv(R0, dc[0], dc[1], dc[2])
            kd = (K[0] * dd[0] + K[1] * dd[1] + K[2] * dd[2],
                  K[3] * dd[0] + K[4] * dd[1] + K[5] * dd[2],
                  K[6] * dd[0] + K[7] * dd[1] + K[8] * dd[2])
            ta = _cross(da[0], da[1], da[2], f[0], f[1], f[2])
            tk = _cross(arm[0], arm[1], arm[2], kd[0], kd[1], kd[2])
            for k in range(3):
                jac[k, 3 + i] += kd[k]
                jac[3 + k, 3 + i] += tk[k] - ta[k]
        for j in range(3):
            # S_ex column j: arm x (K e_j)
            kc = (K[j], K[3 + j], K[6 + j])
            t = _cross(arm[0], arm[1], arm[2], kc[0], kc[1], kc[2])
            for k in range(3):
                jac[3 + k, j] += t[k]
    if pivoted:
        xg = (bodyf[b, B_COM], bodyf[b, B_COM + 1], bodyf[b, B_COM + 2])
        lam = u[6:9]
        arm = _rfc(R0, F, xg[0], xg[1], xg[2])
        ex = _cross(e[0], e[1], e[2], xg[0], xg[1], xg[2])
        for k in range(3):
            jac[k, 6 + k] = -1.0  # S_x lambda
            jac[6 + k, k] = -1.0  # S_lambda x
        # S_e lambda = hat(R_{n+1/2} X_g)
        jac[3, 7] = -arm[2]
        jac[3, 8] = arm[1]
        jac[4, 6] = arm[2]
        jac[4, 8] = -arm[0]
        jac[5, 6] = -arm[1]
        jac[5, 7] = arm[0]
        for i in range(3):
            # S_ee += d(R0 F X_g)/de_i x lambda;  S_lambda e = 2 R0 (D_i (e x X_g) + F (k_i x X_g))
            da = _rfc(R0, D[i], xg[0], xg[1], xg[2])
            t = _cross(da[0], da[1], da[2], lam[0], lam[1], lam[2])
            kx = _cross(1.0 if i == 0 else 0.0, 1.0 if i == 1 else 0.0, 1.0 if i == 2 else 0.0,
                        xg[0], xg[1], xg[2])
            a1 = _rfc(R0, D[i], ex[0], ex[1], ex[2])
            a2 = _rfc(R0, F, kx[0], kx[1], kx[2])
            for k in range(3):
                jac[3 + k, 3 + i] += t[k]
                jac[6 + k, 3 + i] = 2.0 * (a1[k] + a2[k])
    return n


@jit
def _loads(gravity, bodyf, f_app, t_app, b):
    m = bodyf[b, B_MASS]
    return ((m * gravity[0] + f_app[b, 0], m * gravity[1] + f_app[b, 1],
             m * gravity[2] + f_app[b, 2]), (t_app[b, 0], t_app[b, 1], t_app[b, 2]))


@jit
def solve_step(arrays, b, h, start, loads, max_iter, work):
    """Newton for one body's step from ``start`` (x0, q0, v0, w0) under ``loads`` (fc, tau)
    (``arrays``: the model's (bodyf, bodyi, springf, springi)).  Returns the iteration count,
    or -1 on failure; the converged unknowns are left in the scratch (``carve(work)[5]``) with
    F, D of their e."""
    bodyf, bodyi, springf, springi = arrays
    x0, q0, v0, w0 = start
    fc, tau = loads
    F, D, R0, jac, res, u, vec = carve(work)
    rotmat(q0, R0)
    j = (bodyf[b, B_INERTIA] * w0[0], bodyf[b, B_INERTIA + 1] * w0[1],
         bodyf[b, B_INERTIA + 2] * w0[2])
    hn = _mv(R0, j[0], j[1], j[2])
    at, out = (x0, v0, R0, hn), (F, D, res, vec)
    m = bodyf[b, B_MASS]
    pivoted = bodyi[b] == PIVOTED
    # initial guess: e from the current spin (Omega_m = 2e/h), kept inside the unit ball;
    # x1 on the velocity constraint and lambda balancing the linear momentum at that guess
    for k in range(3):
        u[3 + k] = 0.5 * h * w0[k]
    ee = u[3] * u[3] + u[4] * u[4] + u[5] * u[5]
    if ee > 0.25:
        shrink = 0.5 / np.sqrt(ee)
        for k in range(3):
            u[3 + k] *= shrink
    for k in range(3):
        u[k] = x0[k] + h * v0[k] + 0.5 * h * h / m * fc[k]
        u[6 + k] = 0.0
    if pivoted:
        residual(arrays, b, h, at, loads, u, out)
        for k in range(3):
            u[k] -= res[6 + k]  # r_lambda is linear in x1 with unit slope
        residual(arrays, b, h, at, loads, u, out)
        for k in range(3):
            u[6 + k] = -res[k]  # r_x is linear in lambda with unit slope
    previous = np.inf
    update = np.inf
    for it in range(max_iter + 1):
        rnorm = residual(arrays, b, h, at, loads, u, out)
        if not np.isfinite(rnorm):
            return -1
        if converged(rnorm, previous, update, 1.0):
            return it
        if it == max_iter:
            return -1
        previous = rnorm
        n = jacobian(bodyf, bodyi, springf, springi, b, h, x0, R0, u, F, D, jac)
        if not solve_inplace(jac, res, n):
            return -1
        update = 0.0
        xs = max(1e-300, abs(u[0] - x0[0]), abs(u[1] - x0[1]), abs(u[2] - x0[2]))
        es = max(1e-300, abs(u[3]), abs(u[4]), abs(u[5]))
        ls = max(1e-300, abs(u[6]), abs(u[7]), abs(u[8]))
        for k in range(3):
            update = max(update, abs(res[k]) / xs, abs(res[3 + k]) / es)
            if pivoted:
                update = max(update, abs(res[6 + k]) / ls)
        for k in range(n):
            u[k] += res[k]
    return -1


@jit
def _mtv(a, x0, x1, x2):
    """a^T @ (x0, x1, x2) for a 3x3 array, as a tuple."""
    return (a[0, 0] * x0 + a[1, 0] * x1 + a[2, 0] * x2,
            a[0, 1] * x0 + a[1, 1] * x1 + a[2, 1] * x2,
            a[0, 2] * x0 + a[1, 2] * x1 + a[2, 2] * x2)


@jit
def _advance(bm, f_app, t_app, b, h, m, S, max_iter, work,
             stats, energy_update):
    """Move body b through m sub-steps of size h/m; False when a Newton solve fails.

    ``energy_update`` (0/1): Omega_{n+1} = 4e/h - Omega_n (003 (326), conserves energy); otherwise
    the spatial angular momentum update of 003 §11.5 (iv), h_{n+1} = 2 R_{n+1/2} J Omega_m - h_n,
    i.e. J Omega_{n+1} = F^T (2 J Omega_m - F^T J Omega_n).
    """
    gravity, bodyf, bodyi, springf, springi = bm
    nb = bodyi.shape[0]
    x, q, v, w, P, pq, L = state_view(S, nb)
    hs = h / m
    fc, tau = _loads(gravity, bodyf, f_app, t_app, b)
    F = carve(work)[0]
    u = carve(work)[5]
    j0, j1, j2 = bodyf[b, B_INERTIA], bodyf[b, B_INERTIA + 1], bodyf[b, B_INERTIA + 2]
    for _ in range(m):
        it = solve_step((bodyf, bodyi, springf, springi), b, hs, (x[b], q[b], v[b], w[b]),
                        (fc, tau), max_iter, work)
        if it < 0:
            return False
        stats[STAT_ITERS] += it
        stats[STAT_MAX_ITERS] = max(stats[STAT_MAX_ITERS], it)
        e0 = np.sqrt(1.0 - (u[3] * u[3] + u[4] * u[4] + u[5] * u[5]))
        qn = qmul_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], e0, u[3], u[4], u[5])
        inv = 1.0 / np.sqrt(qn[0] * qn[0] + qn[1] * qn[1] + qn[2] * qn[2] + qn[3] * qn[3])
        for k in range(4):
            q[b, k] = qn[k] * inv  # the increment is unit; this only removes round-off
        if energy_update:
            for k in range(3):
                w[b, k] = 4.0 * u[3 + k] / hs - w[b, k]
        else:
            c = 4.0 / hs
            t = _mtv(F, j0 * w[b, 0], j1 * w[b, 1], j2 * w[b, 2])
            a = _mtv(F, c * j0 * u[3] - t[0], c * j1 * u[4] - t[1], c * j2 * u[5] - t[2])
            w[b, 0] = a[0] / j0
            w[b, 1] = a[1] / j1
            w[b, 2] = a[2] / j2
        for k in range(3):
            v[b, k] = 2.0 * (u[k] - x[b, k]) / hs - v[b, k]
            x[b, k] = u[k]
        body_momenta(bodyf, b, q, v, w, P, pq, L)
    return True


@jit
def advance_body(bm, f_app, t_app, b, h, m, S, S_prev,
                 max_iter, work, stats):
    """The energy-conserving update (the registered ``midpoint_em``)."""
    gravity, bodyf, bodyi, springf, springi = bm
    return _advance(bm, f_app, t_app, b, h, m, S, max_iter,
                    work, stats, runtime_int(1))


@jit
def advance_body_momentum(bm, f_app, t_app, b, h, m, S,
                          S_prev, max_iter, work, stats):
    """The angular-momentum update of 003 §11.5 (iv)."""
    gravity, bodyf, bodyi, springf, springi = bm
    return _advance(bm, f_app, t_app, b, h, m, S, max_iter,
                    work, stats, runtime_int(0))


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt``; the common kernel signature (see rtrigid.backends.buffers)."""
    return implicit.run(n, dt, F, I, advance_body)


@jit
def step_momentum_update(n, dt, F, I):
    """The same step with the velocity update of 003 §11.5 (iv) (``options={"update": "momentum"}``)."""
    return implicit.run(n, dt, F, I, advance_body_momentum)
