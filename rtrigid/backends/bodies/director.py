"""``director`` and ``director_nullspace``: the rotation-free (nine-component) forms of 002 §3.

The orientation is carried by the three directors d_i = R e_i (the columns of R, stacked
into d in R^9 as in the Euler map 002 (47)); orthonormality is six internal constraints g_d,
002 (19).  The kinetic energy 1/2 sum E_ij d_i'.d_j' has the constant mass matrix
M_d = E (x) I_3 with the Euler tensor E = tr(J)/2 I - J (002 (17)-(18); E_i = diag for
principal axes), J the inertia about the reference point.  Two formulations:

* ``director``: the absolute index-1 system 002 (23),
      [M_d  G_d^T] [d'' ]   [ psi_d  ]
      [G_d  0    ] [lam ] = [ -g_II  ],  g_II = (|d1'|^2, |d2'|^2, |d3'|^2, 2 d1'.d2', 2 d3'.d1',
  2 d2'.d3'), solved by LU (a 15x15 elimination) at every right-hand side, as 002 does;
  unknowns d, d' (18 per body);
* ``director_nullspace``: the null-space form 002 (25), d' = T_d(d) Omega (T_d of 002 (24)),
  J Omega' = mu - Omega x J Omega, mu = T_d^T psi_d; unknowns d, Omega (12 per body).

Both are integrated by classical RK4 and projected after every step with the explicit
Spurrier-Klumpp algorithm of 002 §6: (P) p* = SK(d*), p = p*/|p*|, d = phi(p); (V) (absolute
form only) pdot* = Dphi(p)^+ d'*, pdot = pdot* - <p, pdot*> p, d' = Dphi(p) pdot.  After (P)
and (V) the directors and their rates are functions of (p, pdot), and a tangent pdot is the
body angular velocity w = 2 G(p) pdot: so the state stores (q, w) and each step starts from
d = phi(q), d_i' = R (w x e_i).  No extra per-body state is needed.

Generalized director forces: a force f at body point u (from the reference point) gives
psi_{d_i} = u_i f (the point is x_ref + sum u_i d_i); a pure world moment tau gives
psi_{d_i} = 1/2 tau x d_i (sum d_i x psi_i = tau on SO(3)).  Gravity and applied forces act at
the centre of mass, springs at their points.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.backends.buffers import NONFINITE, OK, STAT_STEPS
from rtrigid.backends.bodies.common import (
    g_mul,
    mat3_vec,
    open_buffers,
    rolled_back,
    runtime_int,
    settle_body,
    state_view,
)
from rtrigid.maths.linalg import solve_inplace
from rtrigid.backends.bodies.layout import BodiesModel, B_COM, B_JINV, B_JREF, B_MASS, B_PIVOT, PIVOTED, S_ANCHOR, S_K, \
    S_POINT, S_REST
from rtrigid.maths.quat import euler_map, euler_map_diff_pinv, spurrier_klumpp

NY = 24  # x, d, v, d' (the null-space form uses the first 18: x, d, v, Omega)
_Y, _K, _T, _A, _R, _M, _P, _END = 0, NY, 5 * NY, 6 * NY, 6 * NY + 240, 6 * NY + 249, \
    6 * NY + 285, 6 * NY + 293


def work_size(nb):
    """RK4 stages and the 15x15 system of one body (bodies are stepped one after the other)."""
    return _END


@jit
def carve(work):
    """(y, k (4, NY), tmp, A (15, 16), R (3,3), pinv (4, 9), p (8,)) views into the scratch."""
    return (work[_Y:_K], work[_K:_T].reshape((4, NY)), work[_T:_A],
            work[_A:_R].reshape((15, 16)), work[_R:_M].reshape((3, 3)),
            work[_M:_P].reshape((4, 9)), work[_P:_END])


@jit
def _add_point_force(psi, force, u0, u1, u2, f0, f1, f2):
    """A world force f at body point u: psi_{d_i} += u_i f and the resultant += f."""
    u = (u0, u1, u2)
    for i in range(3):
        for k in range(3):
            psi[3 * i + k] += u[i] * (f0, f1, f2)[k]
    force[0] += f0
    force[1] += f1
    force[2] += f2


@jit
def director_loads(bm, f_app, t_app, b, y, psi, force):
    """Generalized director forces psi (9,) and the resultant world force (3,) at y."""
    gravity, bodyf, bodyi, springf, springi = bm
    psi[:] = 0.0
    force[:] = 0.0
    m = bodyf[b, B_MASS]
    _add_point_force(psi, force, bodyf[b, B_COM], bodyf[b, B_COM + 1], bodyf[b, B_COM + 2],
                     m * gravity[0] + f_app[b, 0], m * gravity[1] + f_app[b, 1],
                     m * gravity[2] + f_app[b, 2])
    for i in range(3):
        d = y[3 + 3 * i:6 + 3 * i]
        psi[3 * i] += 0.5 * (t_app[b, 1] * d[2] - t_app[b, 2] * d[1])
        psi[3 * i + 1] += 0.5 * (t_app[b, 2] * d[0] - t_app[b, 0] * d[2])
        psi[3 * i + 2] += 0.5 * (t_app[b, 0] * d[1] - t_app[b, 1] * d[0])
    pivoted = bodyi[b] == PIVOTED
    for s in range(springi.shape[0]):
        if springi[s] != b:
            continue
        u0, u1, u2 = springf[s, S_POINT], springf[s, S_POINT + 1], springf[s, S_POINT + 2]
        r0, r1, r2 = ((bodyf[b, B_PIVOT], bodyf[b, B_PIVOT + 1], bodyf[b, B_PIVOT + 2])
                      if pivoted else (y[0], y[1], y[2]))
        e0 = r0 + u0 * y[3] + u1 * y[6] + u2 * y[9] - springf[s, S_ANCHOR]
        e1 = r1 + u0 * y[4] + u1 * y[7] + u2 * y[10] - springf[s, S_ANCHOR + 1]
        e2 = r2 + u0 * y[5] + u1 * y[8] + u2 * y[11] - springf[s, S_ANCHOR + 2]
        scale = -springf[s, S_K]
        if springf[s, S_REST] > 0.0:
            length = np.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
            scale *= 1.0 - springf[s, S_REST] / max(length, 1e-300)
        _add_point_force(psi, force, u0, u1, u2, scale * e0, scale * e1, scale * e2)


@jit
def _euler_tensor(bodyf, b, i, j):
    """E_ij = tr(J)/2 delta_ij - J_ij, 002 (18)."""
    tr = bodyf[b, B_JREF] + bodyf[b, B_JREF + 4] + bodyf[b, B_JREF + 8]
    return (0.5 * tr if i == j else 0.0) - bodyf[b, B_JREF + 3 * i + j]


# the six constraints of 002 (19), as director index pairs: 1/2 (|d_i|^2 - 1) for i == j,
# d_i . d_j otherwise
_PAIRS = ((0, 0), (1, 1), (2, 2), (0, 1), (2, 0), (1, 2))


@jit
def _constraint_rows(y, A):
    """G_d (6x9) of 002 (20) for d = y[3:12] into A[9:15, 0:9], its transpose into A[0:9, 9:15]."""
    A[9:15, :15] = 0.0
    for r in range(6):
        i, j = _PAIRS[r]
        for k in range(3):
            A[9 + r, 3 * i + k] = y[3 + 3 * j + k]
            A[9 + r, 3 * j + k] = y[3 + 3 * i + k]
    for r in range(6):
        for k in range(9):
            A[k, 9 + r] = A[9 + r, k]


@jit
def derivative(bm, f_app, t_app, b, y, out, absolute, A,
               scratch):
    """Right-hand side of 002 (23) (``absolute``) or (25) for body b at y, into ``out``."""
    gravity, bodyf, bodyi, springf, springi = bm
    psi = scratch[0:9]
    force = scratch[9:12]
    director_loads(bm, f_app, t_app, b, y, psi, force)
    free = bodyi[b] != PIVOTED
    minv = 1.0 / bodyf[b, B_MASS]
    for k in range(3):
        out[k] = y[12 + k] if free else 0.0
        out[12 + k] = force[k] * minv if free else 0.0
    if absolute:
        for k in range(9):
            out[3 + k] = y[15 + k]
        for i in range(3):
            for j in range(3):
                eij = _euler_tensor(bodyf, b, i, j)
                for a in range(3):
                    for c in range(3):
                        A[3 * i + a, 3 * j + c] = eij if a == c else 0.0
        _constraint_rows(y, A)
        rhs = A[:, 15]
        for k in range(9):
            rhs[k] = psi[k]
        dd = y[15:24]
        for r in range(6):
            i, j = _PAIRS[r]
            acc = 0.0
            for k in range(3):
                acc += dd[3 * i + k] * dd[3 * j + k]
            rhs[9 + r] = -(acc if i == j else 2.0 * acc)
        if not solve_inplace(A[:, :15], rhs, 15):
            out[15:24] = np.nan
        else:
            for k in range(9):
                out[15 + k] = rhs[k]
        return
    w0, w1, w2 = y[15], y[16], y[17]
    d1, d2, d3 = y[3:6], y[6:9], y[9:12]
    for k in range(3):
        out[3 + k] = w2 * d2[k] - w1 * d3[k]
        out[6 + k] = w0 * d3[k] - w2 * d1[k]
        out[9 + k] = w1 * d1[k] - w0 * d2[k]
    p1, p2, p3 = psi[0:3], psi[3:6], psi[6:9]
    mu = (d3[0] * p2[0] + d3[1] * p2[1] + d3[2] * p2[2] - d2[0] * p3[0] - d2[1] * p3[1]
          - d2[2] * p3[2],
          d1[0] * p3[0] + d1[1] * p3[1] + d1[2] * p3[2] - d3[0] * p1[0] - d3[1] * p1[1]
          - d3[2] * p1[2],
          d2[0] * p1[0] + d2[1] * p1[1] + d2[2] * p1[2] - d1[0] * p2[0] - d1[1] * p2[1]
          - d1[2] * p2[2])
    h = mat3_vec(bodyf, b, B_JREF, w0, w1, w2)
    a = mat3_vec(bodyf, b, B_JINV, mu[0] - (w1 * h[2] - w2 * h[1]),
                 mu[1] - (w2 * h[0] - w0 * h[2]), mu[2] - (w0 * h[1] - w1 * h[0]))
    out[15] = a[0]
    out[16] = a[1]
    out[17] = a[2]


@jit
def project_position(dstar, R, p_out):
    """Step (P) of 002 §6: p = SK(d*)/|SK(d*)|; d = phi(p) is then the projected frame."""
    for j in range(3):
        for i in range(3):
            R[i, j] = dstar[3 * j + i]
    return spurrier_klumpp(R, p_out)


@jit
def project_velocity(p, ddstar, pinv, pd_out):
    """Step (V) of 002 §6: pdot = Dphi(p)^+ d'* made tangent; d' = Dphi(p) pdot."""
    euler_map_diff_pinv(p, pinv)
    for k in range(4):
        acc = 0.0
        for j in range(9):
            acc += pinv[k, j] * ddstar[j]
        pd_out[k] = acc
    radial = p[0] * pd_out[0] + p[1] * pd_out[1] + p[2] * pd_out[2] + p[3] * pd_out[3]
    for k in range(4):
        pd_out[k] -= radial * p[k]
    return pd_out


@jit
def _start(bodyf, bodyi, b, x, q, v, w, y, absolute):
    """y = (x, phi(q), v, d' or Omega) from the state of body b."""
    for k in range(3):
        y[k] = x[b, k]
        y[12 + k] = v[b, k]
    euler_map(q[b], y[3:12])
    if absolute:
        w0, w1, w2 = w[b, 0], w[b, 1], w[b, 2]
        for k in range(3):
            y[15 + k] = w2 * y[6 + k] - w1 * y[9 + k]
            y[18 + k] = w0 * y[9 + k] - w2 * y[3 + k]
            y[21 + k] = w1 * y[3 + k] - w0 * y[6 + k]
    else:
        for k in range(3):
            y[15 + k] = w[b, k]


@jit
def _run(n, dt, F, I, absolute):
    """The step loop; ``absolute`` (0/1) picks 002 (23) over (25)."""
    (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, _, stats,
     work) = open_buffers(F, I)
    bm = BodiesModel(gravity, bodyf, bodyi, springf, springi)
    nb = bodyi.shape[0]
    x, q, v, w, P, pq, L = state_view(S, nb)
    y, k, tmp, A, R, pinv, p8 = carve(work)
    ny = NY if absolute else 18
    loads = np.empty(12)
    weights = (0.5 * dt, 0.5 * dt, dt)
    for _ in range(n):
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        energy = 0.0
        for b in range(nb):
            _start(bodyf, bodyi, b, x, q, v, w, y, absolute)
            derivative(bm, f_app, t_app, b, y, k[0],
                       absolute, A, loads)
            for s in range(3):
                for i in range(ny):
                    tmp[i] = y[i] + weights[s] * k[s, i]
                derivative(bm, f_app, t_app, b, tmp,
                           k[s + 1], absolute, A, loads)
            for i in range(ny):
                y[i] += dt / 6.0 * (k[0, i] + 2.0 * (k[1, i] + k[2, i]) + k[3, i])
            p = p8[0:4]
            project_position(y[3:12], R, p)
            # keep the sign of q continuous (SK returns a canonical sign)
            if p[0] * q[b, 0] + p[1] * q[b, 1] + p[2] * q[b, 2] + p[3] * q[b, 3] < 0.0:
                for i in range(4):
                    p[i] = -p[i]
            if absolute:
                pd = project_velocity(p, y[15:24], pinv, p8[4:8])
                om = g_mul(p, pd)
                for i in range(3):
                    w[b, i] = 2.0 * om[i]
            else:
                for i in range(3):
                    w[b, i] = y[15 + i]
            for i in range(4):
                q[b, i] = p[i]
            for i in range(3):
                x[b, i] = y[i]
                v[b, i] = y[12 + i]
            energy += settle_body(bodyf, bodyi, b, x, q, v, w, P, pq, L)
        if rolled_back(energy, S, S_prev):
            return NONFINITE
        stats[STAT_STEPS] += 1
    return OK


@jit
def step(n, dt, F, I):
    """``director``: RK4 on the absolute index-1 form 002 (23), projection (P) and (V)."""
    return _run(n, dt, F, I, runtime_int(1))


@jit
def step_nullspace(n, dt, F, I):
    """``director_nullspace``: RK4 on the null-space form 002 (25), projection (P)."""
    return _run(n, dt, F, I, runtime_int(0))
