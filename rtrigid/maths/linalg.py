"""Tiny dense linear algebra for the step kernels: no allocation, no BLAS call overhead."""
import numpy as np

from rtrigid._jit import jit


@jit
def matmul(a, b, out, alpha=1.0):
    """out = alpha a @ b for small dense matrices (out must not alias a or b)."""
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = 0.0
            for k in range(a.shape[1]):
                acc += a[i, k] * b[k, j]
            out[i, j] = alpha * acc
    return out


@jit
def matmul_nt(a, b, out, alpha=1.0):
    """out = alpha a @ b.T (out must not alias a or b)."""
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            acc = 0.0
            for k in range(a.shape[1]):
                acc += a[i, k] * b[j, k]
            out[i, j] = alpha * acc
    return out


@jit
def matvec(a, x, out):
    """out = a @ x."""
    for i in range(a.shape[0]):
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * x[k]
        out[i] = acc
    return out


@jit
def solve_inplace(a, b, n):
    """Solve a[:n,:n] x = b[:n] by Gaussian elimination with partial pivoting; x overwrites b.

    Destroys ``a``.  Returns False (leaving garbage) when a pivot is zero or not finite.
    """
    for col in range(n):
        piv = col
        big = abs(a[col, col])
        for r in range(col + 1, n):
            if abs(a[r, col]) > big:
                big = abs(a[r, col])
                piv = r
        if not (big > 0.0) or not np.isfinite(big):
            return False
        if piv != col:
            for k in range(col, n):
                tmp = a[col, k]
                a[col, k] = a[piv, k]
                a[piv, k] = tmp
            tmp = b[col]
            b[col] = b[piv]
            b[piv] = tmp
        inv = 1.0 / a[col, col]
        for r in range(col + 1, n):
            f = a[r, col] * inv
            if f != 0.0:
                for k in range(col + 1, n):
                    a[r, k] -= f * a[col, k]
                b[r] -= f * b[col]
    for r in range(n - 1, -1, -1):
        acc = b[r]
        for k in range(r + 1, n):
            acc -= a[r, k] * b[k]
        b[r] = acc / a[r, r]
    return True


@jit
def kinetic_energy(mass, inertia, v, w):
    """sum_b m_b |v_b|²/2 + w_b . (J_b w_b)/2 for (nb,) masses, (nb, 3) principal moments,
    centre-of-mass velocities and body angular velocities (any strides)."""
    t = 0.0
    for b in range(mass.shape[0]):
        t += mass[b] * (v[b, 0] * v[b, 0] + v[b, 1] * v[b, 1] + v[b, 2] * v[b, 2])
        t += (inertia[b, 0] * w[b, 0] * w[b, 0] + inertia[b, 1] * w[b, 1] * w[b, 1]
              + inertia[b, 2] * w[b, 2] * w[b, 2])
    return 0.5 * t


@jit
def momenta(mass, inertia, x, q, v, w, out):
    """out <- (linear momentum, angular momentum about the origin), (2, 3), world axes: the
    bodies' m v and x × m v + R(q) J w for unit quaternions q (w, x, y, z), body -> world."""
    for k in range(3):
        out[0, k] = 0.0
        out[1, k] = 0.0
    for b in range(mass.shape[0]):
        m = mass[b]
        p0, p1, p2 = m * v[b, 0], m * v[b, 1], m * v[b, 2]
        out[0, 0] += p0
        out[0, 1] += p1
        out[0, 2] += p2
        out[1, 0] += x[b, 1] * p2 - x[b, 2] * p1
        out[1, 1] += x[b, 2] * p0 - x[b, 0] * p2
        out[1, 2] += x[b, 0] * p1 - x[b, 1] * p0
        h0, h1, h2 = inertia[b, 0] * w[b, 0], inertia[b, 1] * w[b, 1], inertia[b, 2] * w[b, 2]
        qw, qx, qy, qz = q[b, 0], q[b, 1], q[b, 2], q[b, 3]
        t0 = 2.0 * (qy * h2 - qz * h1)
        t1 = 2.0 * (qz * h0 - qx * h2)
        t2 = 2.0 * (qx * h1 - qy * h0)
        out[1, 0] += h0 + qw * t0 + qy * t2 - qz * t1
        out[1, 1] += h1 + qw * t1 + qz * t0 - qx * t2
        out[1, 2] += h2 + qw * t2 + qx * t1 - qy * t0
