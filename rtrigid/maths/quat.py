"""Quaternion kernels: products, matrix forms, rotations, exponential map and conversions.

Conventions
-----------
A quaternion is a float64 array of shape (4,) stored scalar first, ``q = (q0, q1, q2, q3)``
with vector part ``qv = (q1, q2, q3)``; products are Hamilton products, 000 (1).  Unit
quaternions ``q`` and ``-q`` describe the same rotation.

The two 3x4 matrices follow Betsch & Siebert (paper 000, section 2.5)::

    E(q) = [-qv | q0 I + hat(qv)]        E(q)^T w = (0, w) o q
    G(q) = [-qv | q0 I - hat(qv)]        G(q)^T w = q o (0, w)

and the rotation matrix is ``R(q) = E(q) G(q)^T`` (000 (12)), identical to the explicit
form (8).  Paper 001 writes the same pair as G (= our E) and L (= our G); paper 003 writes
them as H (= our E) and G (= our G).  Angular velocities:

* body (convective) Omega:  qdot = 1/2 G(q)^T Omega = 1/2 q o (0, Omega),  Omega = 2 G(q) qdot
* spatial omega:            qdot = 1/2 E(q)^T omega = 1/2 (0, omega) o q,  omega = 2 E(q) qdot

The 4x4 forms are ``Qleft(a) b = a o b = Qright(b) a`` with ``Qleft(q) = [q | G(q)^T] =
q0 I + q+`` and ``Qright(q) = [q | E(q)^T] = q0 I + q-`` (000 (9)-(11)).

Kernel rules
------------
Every kernel is compiled with :data:`rtrigid._jit.jit`.  Kernels that produce an array take
a preallocated ``out`` (C-contiguous float64 of the documented shape), fill it and return it;
they allocate nothing.  Vector kernels read all inputs before writing, so ``out`` may alias a
quaternion input of the same shape.  Scalar helpers use numpy's elementwise functions so that
the pure-Python bodies (``kernel.py_func``) follow the same IEEE rules as the compiled code:
NaN or infinite input yields NaN/inf output (with a numpy RuntimeWarning on the Python
path), never an exception or a hang.  The zero quaternion has no direction, so
``quat_normalize`` and ``quat_log`` return NaNs for it.

The allocating convenience wrappers at the end (``mul``, ``to_matrix``, ``from_matrix``, ...)
are plain Python, meant for setup code and tests, not for inner loops.
"""
import numpy as np

from rtrigid._jit import jit

_SINC_SERIES_BELOW = 1e-4
_DEXP_SERIES_BELOW = 1e-2
_LOG_SERIES_RATIO = 1e-8
_SLERP_NLERP_BELOW = 1e-6
_EULER_DEGENERATE = 1e-12


# ----------------------------------------------------------------------------- algebra


@jit
def qmul_t(a0, a1, a2, a3, b0, b1, b2, b3):
    """Hamilton product a o b on scalars, returned as a tuple, 000 (1).

    The scalar/tuple kernels (``*_t``) are what step kernels use in their hot loops: they
    create no array views, which numba would reference-count on every call.
    """
    return (a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
            a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
            a0 * b2 + a2 * b0 + a3 * b1 - a1 * b3,
            a0 * b3 + a3 * b0 + a1 * b2 - a2 * b1)


@jit
def quat_mul(a, b, out):
    """Hamilton product out = a o b, 000 (1)."""
    out[0], out[1], out[2], out[3] = qmul_t(a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3])
    return out


@jit
def quat_conj(q, out):
    """Conjugate (q0, -qv), 000 section 2.1."""
    out[0] = q[0]
    out[1] = -q[1]
    out[2] = -q[2]
    out[3] = -q[3]
    return out


@jit
def quat_normalize(q, out):
    """Radial projection onto the unit sphere out = q/|q|, 002 (63, P)."""
    n = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    for i in range(4):
        out[i] = q[i] / n
    return out


@jit
def quat_tangent(p, v, out):
    """Remove the radial part of v at unit p, out = v - <p, v> p, 002 (63, V)."""
    d = p[0] * v[0] + p[1] * v[1] + p[2] * v[2] + p[3] * v[3]
    for i in range(4):
        out[i] = v[i] - d * p[i]
    return out


# ------------------------------------------------------------------- matrix representations


@jit
def skew(w, out):
    """Cross-product matrix hat(w) with hat(w) a = w x a, 000 section 2.4."""
    out[0, 0] = 0.0
    out[0, 1] = -w[2]
    out[0, 2] = w[1]
    out[1, 0] = w[2]
    out[1, 1] = 0.0
    out[1, 2] = -w[0]
    out[2, 0] = -w[1]
    out[2, 1] = w[0]
    out[2, 2] = 0.0
    return out


@jit
def _fill_eg(q, s, out):
    """Shared body of E (s=+1) and G (s=-1): [-qv | q0 I + s hat(qv)], 000 section 2.5."""
    q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
    out[0, 0] = -q1
    out[0, 1] = q0
    out[0, 2] = -s * q3
    out[0, 3] = s * q2
    out[1, 0] = -q2
    out[1, 1] = s * q3
    out[1, 2] = q0
    out[1, 3] = -s * q1
    out[2, 0] = -q3
    out[2, 1] = -s * q2
    out[2, 2] = s * q1
    out[2, 3] = q0
    return out


@jit
def Emat(q, out):
    """3x4 matrix E(q) = [-qv | q0 I + hat(qv)], 000 section 2.5."""
    return _fill_eg(q, 1.0, out)


@jit
def Gmat(q, out):
    """3x4 matrix G(q) = [-qv | q0 I - hat(qv)], 000 section 2.5."""
    return _fill_eg(q, -1.0, out)


@jit
def _fill_q4(c, w0, w1, w2, s, out):
    """Shared 4x4 body c I + [[0, -w^T], [w, s hat(w)]] of 000 (10)-(11)."""
    out[0, 0] = c
    out[0, 1] = -w0
    out[0, 2] = -w1
    out[0, 3] = -w2
    out[1, 0] = w0
    out[1, 1] = c
    out[1, 2] = -s * w2
    out[1, 3] = s * w1
    out[2, 0] = w1
    out[2, 1] = s * w2
    out[2, 2] = c
    out[2, 3] = -s * w0
    out[3, 0] = w2
    out[3, 1] = -s * w1
    out[3, 2] = s * w0
    out[3, 3] = c
    return out


@jit
def Qleft(q, out):
    """Left-multiplication matrix, Qleft(q) b = q o b, 000 (9)-(10)."""
    return _fill_q4(q[0], q[1], q[2], q[3], 1.0, out)


@jit
def Qright(q, out):
    """Right-multiplication matrix, Qright(q) a = a o q, 000 (9)-(10)."""
    return _fill_q4(q[0], q[1], q[2], q[3], -1.0, out)


@jit
def plus4(w, out):
    """Skew 4x4 matrix w+ = [[0, -w^T], [w, hat(w)]], 000 (11)."""
    return _fill_q4(0.0, w[0], w[1], w[2], 1.0, out)


@jit
def minus4(w, out):
    """Skew 4x4 matrix w- = [[0, -w^T], [w, -hat(w)]], 000 (11)."""
    return _fill_q4(0.0, w[0], w[1], w[2], -1.0, out)


# ------------------------------------------------------------------------------ rotations


@jit
def rotmat(q, out):
    """Euler-Rodrigues matrix (q0^2 - |qv|^2) I + 2 qv qv^T + 2 q0 hat(qv), 000 (8)."""
    q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
    d = q0 * q0 - q1 * q1 - q2 * q2 - q3 * q3
    out[0, 0] = d + 2.0 * q1 * q1
    out[0, 1] = 2.0 * (q1 * q2 - q0 * q3)
    out[0, 2] = 2.0 * (q1 * q3 + q0 * q2)
    out[1, 0] = 2.0 * (q2 * q1 + q0 * q3)
    out[1, 1] = d + 2.0 * q2 * q2
    out[1, 2] = 2.0 * (q2 * q3 - q0 * q1)
    out[2, 0] = 2.0 * (q3 * q1 - q0 * q2)
    out[2, 1] = 2.0 * (q3 * q2 + q0 * q1)
    out[2, 2] = d + 2.0 * q3 * q3
    return out


@jit
def turn_t(q0, q1, q2, q3, w0, w1, w2, h):
    """q o exp((0, h w / 2)), normalised, on scalars: q turned at the constant body rate w
    for a time h -- the exact rotation, 000 (6) (``semi_implicit_euler``'s update)."""
    x0, x1, x2 = 0.5 * h * w0, 0.5 * h * w1, 0.5 * h * w2
    n = np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
    sinc = 1.0 - n * n / 6.0 if n < _SINC_SERIES_BELOW else np.sin(n) / n
    r = qmul_t(q0, q1, q2, q3, np.cos(n), sinc * x0, sinc * x1, sinc * x2)
    inv = 1.0 / np.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2] + r[3] * r[3])
    return r[0] * inv, r[1] * inv, r[2] * inv, r[3] * inv


@jit
def rotate_t(q0, q1, q2, q3, v0, v1, v2, s):
    """(q0^2 - |qv|^2) v + 2 (qv.v) qv + 2 s q0 qv x v: R(q) v for s = 1, R(q)^T v for s = -1.

    000 (8) applied to v, on scalars (see :func:`qmul_t`).
    """
    d = q0 * q0 - q1 * q1 - q2 * q2 - q3 * q3
    e = 2.0 * (q1 * v0 + q2 * v1 + q3 * v2)
    f = 2.0 * s * q0
    return (d * v0 + e * q1 + f * (q2 * v2 - q3 * v1),
            d * v1 + e * q2 + f * (q3 * v0 - q1 * v2),
            d * v2 + e * q3 + f * (q1 * v1 - q2 * v0))


@jit
def _rotate_signed(q, v, s, out):
    """Array form of :func:`rotate_t`."""
    out[0], out[1], out[2] = rotate_t(q[0], q[1], q[2], q[3], v[0], v[1], v[2], s)
    return out


@jit
def rotate(q, v, out):
    """Rotate a vector, out = R(q) v, 000 (7)-(8)."""
    return _rotate_signed(q, v, 1.0, out)


@jit
def rotate_inv(q, v, out):
    """Inverse rotation out = R(q)^T v for unit q, 000 (7)-(8)."""
    return _rotate_signed(q, v, -1.0, out)


# ------------------------------------------------------------------------ exponential map


@jit
def _exp_scaled(w, scale, out):
    """exp of the pure quaternion (0, scale w): (cos n, sin(n)/n scale w), 000 (6)."""
    x0, x1, x2 = scale * w[0], scale * w[1], scale * w[2]
    n = np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
    if n < _SINC_SERIES_BELOW:
        sinc = 1.0 - n * n / 6.0
    else:
        sinc = np.sin(n) / n
    out[0] = np.cos(n)
    out[1] = sinc * x0
    out[2] = sinc * x1
    out[3] = sinc * x2
    return out


@jit
def _log_scaled(q, scale, out):
    """scale times the principal log of q/|q|, taken at the antipode when q0 < 0, 000 (6)."""
    sign = 1.0
    c = q[0]
    if c < 0.0:
        sign = -1.0
        c = -c
    s = np.sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    if s < _LOG_SERIES_RATIO * c:
        # atan2(s, c)/s = (1 - s^2/(3 c^2) + ...)/c; the correction is below round-off here
        f = 1.0 / c
    else:
        f = np.arctan2(s, c) / s
    f *= sign * scale
    out[0] = f * q[1]
    out[1] = f * q[2]
    out[2] = f * q[3]
    return out


@jit
def quat_exp(w, out):
    """Quaternion exponential exp((0, w)) = (cos|w|, sin|w| w/|w|), 000 (5)-(6)."""
    return _exp_scaled(w, 1.0, out)


@jit
def quat_log(q, out):
    """Principal logarithm w (|w| <= pi/2) with q = exp((0, w)), inverse of 000 (6)."""
    return _log_scaled(q, 1.0, out)


@jit
def quat_from_rotvec(theta, out):
    """Unit quaternion of the rotation vector theta, exp((0, theta/2)), 000 (6)."""
    return _exp_scaled(theta, 0.5, out)


@jit
def quat_to_rotvec(q, out):
    """Rotation vector theta (|theta| <= pi) of q, inverse of 000 (6)."""
    return _log_scaled(q, 2.0, out)


@jit
def dexp_matrix(theta, out):
    """Matrix H(theta) linking increments of the rotation vector to spin, 000 (D4)."""
    t0, t1, t2 = theta[0], theta[1], theta[2]
    n2 = t0 * t0 + t1 * t1 + t2 * t2
    n = np.sqrt(n2)
    if n < _DEXP_SERIES_BELOW:
        a = 1.0 - n2 / 6.0 + n2 * n2 / 120.0
        b = 0.5 - n2 / 24.0 + n2 * n2 / 720.0
        c = 1.0 / 6.0 - n2 / 120.0 + n2 * n2 / 5040.0
    else:
        a = np.sin(n) / n
        h = np.sin(0.5 * n) / n
        b = 2.0 * h * h
        c = (1.0 - a) / n2
    out[0, 0] = a + c * t0 * t0
    out[0, 1] = -b * t2 + c * t0 * t1
    out[0, 2] = b * t1 + c * t0 * t2
    out[1, 0] = b * t2 + c * t1 * t0
    out[1, 1] = a + c * t1 * t1
    out[1, 2] = -b * t0 + c * t1 * t2
    out[2, 0] = -b * t1 + c * t2 * t0
    out[2, 1] = b * t0 + c * t2 * t1
    out[2, 2] = a + c * t2 * t2
    return out


# --------------------------------------------------------------- Euler map (paper 002, §5)


@jit
def _levi_civita(i, j, k):
    """Permutation symbol eps_ijk for indices in {0, 1, 2}."""
    return 0.5 * (i - j) * (j - k) * (k - i)


@jit
def _rot_entry(p, i, j):
    """Entry R_ij of 000 (8), written as (p0^2-|v|^2) d_ij + 2 v_i v_j - 2 p0 eps_ijk v_k."""
    v2 = p[1] * p[1] + p[2] * p[2] + p[3] * p[3]
    r = 2.0 * p[i + 1] * p[j + 1]
    if i == j:
        r += p[0] * p[0] - v2
    for k in range(3):
        r -= 2.0 * p[0] * _levi_civita(i, j, k) * p[k + 1]
    return r


@jit
def _rot_entry_diff(p, i, j, k):
    """Partial derivative of R_ij (000 (8)) with respect to p_k, one entry of 002 (48)."""
    if k == 0:
        r = 2.0 * p[0] if i == j else 0.0
        for m in range(3):
            r -= 2.0 * _levi_civita(i, j, m) * p[m + 1]
        return r
    m = k - 1
    r = -2.0 * p[0] * _levi_civita(i, j, m)
    if i == j:
        r -= 2.0 * p[k]
    if i == m:
        r += 2.0 * p[j + 1]
    if j == m:
        r += 2.0 * p[i + 1]
    return r


@jit
def euler_map(p, out):
    """Euler map phi(p): the three columns of R(p) stacked into R^9, 002 (47)."""
    for j in range(3):
        for i in range(3):
            out[3 * j + i] = _rot_entry(p, i, j)
    return out


@jit
def euler_map_diff(p, out):
    """Differential D phi(p) in R^(9x4) of the Euler map, 002 (48)."""
    for j in range(3):
        for i in range(3):
            for k in range(4):
                out[3 * j + i, k] = _rot_entry_diff(p, i, j, k)
    return out


@jit
def euler_map_diff_pinv(p, out):
    """Closed-form Moore-Penrose inverse of the Euler-map differential, 002 (55)."""
    n2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3]
    # (1/(4|p|^2)) (I/2 - p p^T/(6|p|^2)) Dphi^T, using p^T Dphi^T = (Dphi p)^T = 2 phi^T
    # because phi is homogeneous of degree two.
    c1 = 1.0 / (8.0 * n2)
    c2 = 1.0 / (12.0 * n2 * n2)
    for j in range(3):
        for i in range(3):
            phi_r = _rot_entry(p, i, j)
            for k in range(4):
                out[k, 3 * j + i] = c1 * _rot_entry_diff(p, i, j, k) - c2 * p[k] * phi_r
    return out


@jit
def nullspace_matrix(p, out):
    """Quaternionic null-space matrix T_p(p) = G(p)^T / 2 in R^(4x3), 002 (41)."""
    p0, p1, p2, p3 = 0.5 * p[0], 0.5 * p[1], 0.5 * p[2], 0.5 * p[3]
    out[0, 0] = -p1
    out[0, 1] = -p2
    out[0, 2] = -p3
    out[1, 0] = p0
    out[1, 1] = -p3
    out[1, 2] = p2
    out[2, 0] = p3
    out[2, 1] = p0
    out[2, 2] = -p1
    out[3, 0] = -p2
    out[3, 1] = p1
    out[3, 2] = p0
    return out


# ------------------------------------------------------------------ matrix -> quaternion


@jit
def _canonical_sign(q):
    """Flip q in place so that its first nonzero component is positive (q ~ -q)."""
    for i in range(4):
        if q[i] != 0.0:
            if q[i] < 0.0:
                for k in range(4):
                    q[k] = -q[k]
            break
    return q


@jit
def spurrier_klumpp(R, out):
    """Unit quaternion of a (nearly) orthogonal R by Spurrier's method, 003 (203)-(205)."""
    r11, r12, r13 = R[0, 0], R[0, 1], R[0, 2]
    r21, r22, r23 = R[1, 0], R[1, 1], R[1, 2]
    r31, r32, r33 = R[2, 0], R[2, 1], R[2, 2]
    # Diagonal of the symmetric matrix S = 4 q q^T of 003 (203)-(204).  Comparing these is
    # the same as comparing trace(R), R11, R22, R33 as in 002 section 6.
    s0 = 1.0 + r11 + r22 + r33
    s1 = 1.0 + r11 - r22 - r33
    s2 = 1.0 - r11 + r22 - r33
    s3 = 1.0 - r11 - r22 + r33
    if s0 >= s1 and s0 >= s2 and s0 >= s3:
        h = 0.5 * np.sqrt(s0)
        f = 0.25 / h
        q0, q1, q2, q3 = h, (r32 - r23) * f, (r13 - r31) * f, (r21 - r12) * f
    elif s1 >= s2 and s1 >= s3:
        h = 0.5 * np.sqrt(s1)
        f = 0.25 / h
        q0, q1, q2, q3 = (r32 - r23) * f, h, (r12 + r21) * f, (r13 + r31) * f
    elif s2 >= s3:
        h = 0.5 * np.sqrt(s2)
        f = 0.25 / h
        q0, q1, q2, q3 = (r13 - r31) * f, (r12 + r21) * f, h, (r23 + r32) * f
    else:
        h = 0.5 * np.sqrt(s3)
        f = 0.25 / h
        q0, q1, q2, q3 = (r21 - r12) * f, (r13 + r31) * f, (r23 + r32) * f, h
    out[0] = q0
    out[1] = q1
    out[2] = q2
    out[3] = q3
    # exact for R in SO(3); for a drifted R this is step (P)(b) of the projection, 002 section 6
    quat_normalize(out, out)
    return _canonical_sign(out)


# ------------------------------------------------------------------------ angle sequences


@jit
def _wrap_angle(x):
    """Map an angle to the interval (-pi, pi]."""
    y = x % (2.0 * np.pi)
    if y > np.pi:
        y -= 2.0 * np.pi
    return y


@jit
def quat_from_euler313(psi, theta, phi, out):
    """Quaternion of R = R3(psi) R1(theta) R3(phi), Euler angles of 003 (277)."""
    ct, st = np.cos(0.5 * theta), np.sin(0.5 * theta)
    sigma = 0.5 * (psi + phi)
    delta = 0.5 * (psi - phi)
    out[0] = ct * np.cos(sigma)
    out[1] = st * np.cos(delta)
    out[2] = st * np.sin(delta)
    out[3] = ct * np.sin(sigma)
    return out


@jit
def quat_to_euler313(q, out):
    """Euler angles (psi, theta, phi), theta in [0, pi], inverting 003 (277)-(279)."""
    # q = (cos(t/2) cos(s), sin(t/2) cos(d), sin(t/2) sin(d), cos(t/2) sin(s)) with
    # s = (psi + phi)/2 and d = (psi - phi)/2, so each pair (q0, q3), (q1, q2) is polar.
    a = np.hypot(q[0], q[3])
    b = np.hypot(q[1], q[2])
    sigma = np.arctan2(q[3], q[0])
    delta = np.arctan2(q[2], q[1])
    tol = _EULER_DEGENERATE * np.hypot(a, b)
    if b <= tol:
        psi, phi = 2.0 * sigma, 0.0
    elif a <= tol:
        psi, phi = 2.0 * delta, 0.0
    else:
        psi, phi = sigma + delta, sigma - delta
    out[0] = _wrap_angle(psi)
    out[1] = 2.0 * np.arctan2(b, a)
    out[2] = _wrap_angle(phi)
    return out


@jit
def quat_from_bryant123(a1, a2, a3, out):
    """Quaternion of R = R1(a1) R2(a2) R3(a3) (x, y', z''); 003 §10.2 uses 3-2-1 instead."""
    c1, s1 = np.cos(0.5 * a1), np.sin(0.5 * a1)
    c2, s2 = np.cos(0.5 * a2), np.sin(0.5 * a2)
    c3, s3 = np.cos(0.5 * a3), np.sin(0.5 * a3)
    out[0] = c1 * c2 * c3 - s1 * s2 * s3
    out[1] = s1 * c2 * c3 + c1 * s2 * s3
    out[2] = c1 * s2 * c3 - s1 * c2 * s3
    out[3] = c1 * c2 * s3 + s1 * s2 * c3
    return out


@jit
def quat_to_bryant123(q, out):
    """Bryant angles (a1, a2, a3), a2 in [-pi/2, pi/2], of R1 R2 R3; cf. 003 (285)-(287)."""
    # With half angles h_i: q0 + q2 = (cos h2 + sin h2) cos(h1 + h3),
    # q1 + q3 = (cos h2 + sin h2) sin(h1 + h3), and the same with cos h2 - sin h2 and
    # h1 - h3 for q0 - q2, q1 - q3; both amplitudes are >= 0 for |a2| <= pi/2.
    u = np.hypot(q[0] + q[2], q[1] + q[3])
    v = np.hypot(q[0] - q[2], q[1] - q[3])
    sigma = np.arctan2(q[1] + q[3], q[0] + q[2])
    delta = np.arctan2(q[1] - q[3], q[0] - q[2])
    tol = _EULER_DEGENERATE * np.hypot(u, v)
    if v <= tol:
        a1, a3 = 2.0 * sigma, 0.0
    elif u <= tol:
        a1, a3 = 2.0 * delta, 0.0
    else:
        a1, a3 = sigma + delta, sigma - delta
    out[0] = _wrap_angle(a1)
    out[1] = 2.0 * np.arctan2(u, v) - 0.5 * np.pi
    out[2] = _wrap_angle(a3)
    return out


# ---------------------------------------------------------------------------- interpolation


@jit
def quat_slerp(a, b, t, out):
    """Shorter-arc slerp a o exp(t log(conj(a) o b)) of unit quaternions, built on 000 (6)."""
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    sb = -1.0 if d < 0.0 else 1.0
    dm = 0.0
    dp = 0.0
    for i in range(4):
        x = a[i] - sb * b[i]
        y = a[i] + sb * b[i]
        dm += x * x
        dp += y * y
    angle = 2.0 * np.arctan2(np.sqrt(dm), np.sqrt(dp))
    nearly_parallel = angle < _SLERP_NLERP_BELOW
    if nearly_parallel:
        ca = 1.0 - t
        cb = t
    else:
        sa = np.sin(angle)
        ca = np.sin((1.0 - t) * angle) / sa
        cb = np.sin(t * angle) / sa
    cb *= sb
    for i in range(4):
        out[i] = ca * a[i] + cb * b[i]
    if nearly_parallel:
        quat_normalize(out, out)
    return out


# ----------------------------------------------------------- allocating Python conveniences


def _f64(x):
    return np.ascontiguousarray(x, dtype=np.float64)


def mul(a, b):
    """Hamilton product a o b as a new array."""
    return quat_mul(_f64(a), _f64(b), np.empty(4))


def conj(q):
    """Conjugate quaternion as a new array."""
    return quat_conj(_f64(q), np.empty(4))


def normalize(q):
    """q/|q| as a new array."""
    return quat_normalize(_f64(q), np.empty(4))


def to_matrix(q):
    """Rotation matrix R(q) as a new 3x3 array."""
    return rotmat(_f64(q), np.empty((3, 3)))


def from_matrix(R):
    """Canonical unit quaternion of a rotation matrix (Spurrier)."""
    return spurrier_klumpp(_f64(R), np.empty(4))


def from_rotvec(theta):
    """Unit quaternion of a rotation vector."""
    return quat_from_rotvec(_f64(theta), np.empty(4))


def to_rotvec(q):
    """Rotation vector (|theta| <= pi) of a unit quaternion."""
    return quat_to_rotvec(_f64(q), np.empty(3))


def from_euler313(psi, theta, phi):
    """Unit quaternion of the 3-1-3 Euler angles."""
    return quat_from_euler313(float(psi), float(theta), float(phi), np.empty(4))


def to_euler313(q):
    """3-1-3 Euler angles (psi, theta, phi) of a quaternion."""
    return quat_to_euler313(_f64(q), np.empty(3))


def from_bryant123(a1, a2, a3):
    """Unit quaternion of the 1-2-3 Bryant angles."""
    return quat_from_bryant123(float(a1), float(a2), float(a3), np.empty(4))


def to_bryant123(q):
    """1-2-3 Bryant angles (a1, a2, a3) of a quaternion."""
    return quat_to_bryant123(_f64(q), np.empty(3))


def slerp(a, b, t):
    """Shorter-arc spherical interpolation between unit quaternions a and b."""
    return quat_slerp(_f64(a), _f64(b), float(t), np.empty(4))
