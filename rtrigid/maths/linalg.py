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
