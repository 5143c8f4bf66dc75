"""Small dense linear algebra for the compiled loop steps, in place and allocation-free:
Cholesky (with diagonal pivoting stopped at the rank), LU with partial pivoting, the least
K-norm correction, one-sided Jacobi for the row space, and the charts' matrix products.
"""

from collections import namedtuple

import numpy as np
from rtrigid._jit import jit, jit_inline

# the loop steps' correction scratch by name: k_correction's (L, A, G, pivots, lambda, a right
# side, w, the correction), least_k_norm's (rate indices, L_f, A, U, g, y), limit_rates' (the
# stacked rows, their defect, a mask of every rate), then K_f (see loops.carve_loop)
LoopWork = namedtuple("LoopWork", ("L", "A", "Gm", "piv", "lam", "bm", "w", "c", "idx", "Lf",
                                   "Af", "U", "g", "y", "Ja", "dfc", "every", "Kf"))

RANK_GAP = 1e-9     # a singular value below this fraction of the largest is round-off
JACOBI_SWEEPS = 60  # least_k_norm's Jacobi sweeps (a few suffice: convergence is quadratic)


@jit
def k_correction(J, K, b, rank, L, A, G, piv, lam, w, out):
    """out <- K^-1 J^T lam with (J K^-1 J^T) lam = b solved on ``rank`` pivots: the least
    K-norm change c with J c = b (b consistent with the rows, as the loops' are).  Allocates
    nothing: K = L L^T (Cholesky), A = L^-1 J^T, G = A^T A factored by Cholesky with
    diagonal pivoting stopped after ``rank`` pivots (the mechanism's rank: redundant rows drop
    out), lam on the pivot rows, out = L^-T A lam.  Scratch L (n, n), A (n, m), G (m, m), piv
    (m,) ints, lam (m,), w (n,).  False if K is not positive definite."""
    m, n = J.shape
    if not cholesky(K, L, n):
        return False
    for r in range(m):  # A[:, r] = L^-1 J[r]
        for i in range(n):
            t = J[r, i]
            for k in range(i):
                t -= L[i, k] * A[k, r]
            A[i, r] = t / L[i, i]
    for r in range(m):
        piv[r] = r
        for c in range(r + 1):
            t = 0.0
            for i in range(n):
                t += A[i, r] * A[i, c]
            G[r, c] = t
            G[c, r] = t
    for k in range(rank):  # pivoted Cholesky of G (lower part), rank steps
        best = k
        for j in range(k + 1, m):
            if G[j, j] > G[best, best]:
                best = j
        if best != k:
            piv[k], piv[best] = piv[best], piv[k]
            for c in range(m):
                G[k, c], G[best, c] = G[best, c], G[k, c]
            for r in range(m):
                G[r, k], G[r, best] = G[r, best], G[r, k]
        if not G[k, k] > 0.0:
            return False
        d = np.sqrt(G[k, k])
        G[k, k] = d
        for i in range(k + 1, m):
            G[i, k] /= d
        for i in range(k + 1, m):
            for j in range(k + 1, i + 1):
                G[i, j] -= G[i, k] * G[j, k]
                G[j, i] = G[i, j]
    for k in range(rank):  # C y = b on the pivot rows, then C^T z = y
        t = b[piv[k]]
        for j in range(k):
            t -= G[k, j] * lam[j]
        lam[k] = t / G[k, k]
    _solve_lower_t(G, lam, lam, rank)
    for i in range(n):  # w = A lam (lam in pivot order), out = L^-T w
        t = 0.0
        for k in range(rank):
            t += A[i, piv[k]] * lam[k]
        w[i] = t
    _solve_lower_t(L, w, out, n)
    return True


@jit_inline
def _pivot(K, L, j):
    """K[j, j] less the squares of L's row j so far: Cholesky's pivot of column j."""
    s = K[j, j]
    for k in range(j):
        s -= L[j, k] * L[j, k]
    return s


@jit_inline
def _column(K, L, j, n):
    """L's column j below its diagonal, its pivot set."""
    for i in range(j + 1, n):
        t = K[i, j]
        for k in range(j):
            t -= L[i, k] * L[j, k]
        L[i, j] = t / L[j, j]


@jit_inline
def cholesky(K, L, n):
    """L[:n, :n] <- the lower Cholesky factor of K[:n, :n]; False if K is not positive
    definite."""
    for j in range(n):
        s = _pivot(K, L, j)
        if not s > 0.0:
            return False
        L[j, j] = np.sqrt(s)
        _column(K, L, j, n)
    return True


@jit
def _solve_lower_t(L, b, out, n):
    """out[:n] <- L[:n, :n]^-T b[:n], L lower triangular (b may be out)."""
    for i in range(n - 1, -1, -1):
        t = b[i]
        for k in range(i + 1, n):
            t -= L[k, i] * out[k]
        out[i] = t / L[i, i]


@jit
def cholesky_dropping(K, L, n, tol):
    """L[:n, :n] <- the lower Cholesky factor of K[:n, :n] (positive semidefinite) with the
    rows whose pivot is at most ``tol`` dropped (their row and column of L zero): those
    dependent on the rows before them.  :func:`solve_dropping` then solves a consistent
    system with the dropped unknowns 0."""
    for j in range(n):
        s = _pivot(K, L, j)
        if not s > tol:
            for i in range(j, n):
                L[i, j] = 0.0
            for k in range(j):
                L[j, k] = 0.0
            continue
        L[j, j] = np.sqrt(s)
        _column(K, L, j, n)


@jit
def solve_dropping(L, b, out, n):
    """out[:n] <- (L L^T)^-1 b[:n] for a factor of :func:`cholesky_dropping`, the dropped
    unknowns 0 (b may be out)."""
    for i in range(n):
        t = b[i]
        for k in range(i):
            t -= L[i, k] * out[k]
        out[i] = t / L[i, i] if L[i, i] > 0.0 else 0.0
    for i in range(n - 1, -1, -1):
        t = out[i]
        for k in range(i + 1, n):
            t -= L[k, i] * out[k]
        out[i] = t / L[i, i] if L[i, i] > 0.0 else 0.0


@jit
def least_k_norm(J, K, defect, free, delta, ws):
    """delta <- the least K-norm change of the ``free`` rates (a mask) with J delta = -defect,
    in the least-squares sense (rank cut at RANK_GAP of the largest singular value, as
    numpy's ``pinv``).  Allocates nothing: the scratch is ``ws``'s tail (see
    :func:`loop_scratch`).  K_f = L L^T (Cholesky), A = J_f L^-T, and the minimum-norm
    solution of A y = -defect from a one-sided Jacobi SVD of A^T (its rows turned until they
    are orthogonal, A = U W with W's rows orthogonal: pinv(A) = W^T diag(1/|w_i|^2) U^T),
    then delta_f = L^-T y.  False (delta untouched) if K_f is not positive definite."""
    m, n = J.shape
    idx, Lf, A, U, g, y, Kf = ws.idx, ws.Lf, ws.Af, ws.U, ws.g, ws.y, ws.Kf
    nf = 0
    for i in range(n):
        if free[i]:
            idx[nf] = i
            nf += 1
    for a in range(nf):
        for b in range(nf):
            Kf[a, b] = K[idx[a], idx[b]]
    if not cholesky(Kf, Lf, nf):
        return False
    for r in range(m):  # A[r] = L^-1 J_f[r]
        for a in range(nf):
            t = J[r, idx[a]]
            for k in range(a):
                t -= Lf[a, k] * A[r, k]
            A[r, a] = t / Lf[a, a]
    jacobi_rows(A, m, nf, U)
    cut = rank_cut(A, m, nf, g)
    for r in range(m):  # g = diag(1/|w_r|^2) U^T (-defect), rows below the cut dropped
        s = 0.0
        if g[r] > cut:
            for k in range(m):
                s -= U[k, r] * defect[k]
            s /= g[r]
        g[r] = s
    for a in range(nf):  # y = W^T g
        t = 0.0
        for r in range(m):
            t += A[r, a] * g[r]
        y[a] = t
    _solve_lower_t(Lf, y, y, nf)
    for i in range(n):
        delta[i] = 0.0
    for a in range(nf):
        delta[idx[a]] = y[a]
    return True


@jit
def jacobi_rows(A, m, n, U):
    """One-sided Jacobi: the rows of A[:m, :n] turned in pairs until they are orthogonal,
    A_in = U W (U[:m, :m] orthogonal, accumulated; W the rows left in A), so |w_r| are the
    singular values and the rows with |w_r| > 0 span A_in's row space.  In place, allocating
    nothing."""
    for r in range(m):
        for c in range(m):
            U[r, c] = 1.0 if r == c else 0.0
    for _ in range(JACOBI_SWEEPS):
        turned = False
        for p in range(m - 1):
            for o in range(p + 1, m):
                al, be, ga = 0.0, 0.0, 0.0
                for a in range(n):
                    al += A[p, a] * A[p, a]
                    be += A[o, a] * A[o, a]
                    ga += A[p, a] * A[o, a]
                if not abs(ga) > 1e-15 * np.sqrt(al * be):
                    continue
                turned = True
                d = be - al
                if abs(d) > 1e150 * abs(ga):  # t = 1 / (2 zeta), zeta neither squared nor formed
                    t = ga / d
                else:
                    zeta = d / (2.0 * ga)
                    t = (1.0 if zeta >= 0.0 else -1.0) / (abs(zeta)
                                                          + np.sqrt(1.0 + zeta * zeta))
                c = 1.0 / np.sqrt(1.0 + t * t)
                sn = c * t
                for a in range(n):
                    ap, ao = A[p, a], A[o, a]
                    A[p, a] = c * ap - sn * ao
                    A[o, a] = sn * ap + c * ao
                for r in range(m):
                    up, uo = U[r, p], U[r, o]
                    U[r, p] = c * up - sn * uo
                    U[r, o] = sn * up + c * uo
        if not turned:
            break


@jit
def rank_cut(W, m, n, g):
    """g[:m] <- the squared norms of W[:m, :n]'s rows (orthogonal: :func:`jacobi_rows`' W, so
    the squared singular values); the cut below which one is round-off (RANK_GAP of the
    largest singular value, as numpy's ``pinv``)."""
    big = 0.0
    for r in range(m):
        s = 0.0
        for a in range(n):
            s += W[r, a] * W[r, a]
        g[r] = s
        big = max(big, s)
    return RANK_GAP * RANK_GAP * big


@jit
def max_abs(a):
    out = 0.0
    for i in range(a.shape[0]):
        out = max(out, abs(a[i]))
    return out


@jit
def lu_factor(A, transpose, LU, piv, n):
    """LU[:n, :n], piv <- the LU factors with partial pivoting of A (or A^T if ``transpose``);
    False if A is singular."""
    for i in range(n):
        for j in range(n):
            LU[i, j] = A[j, i] if transpose else A[i, j]
    for k in range(n):
        best = k
        for i in range(k + 1, n):
            if abs(LU[i, k]) > abs(LU[best, k]):
                best = i
        piv[k] = best
        if best != k:
            for j in range(n):
                LU[k, j], LU[best, j] = LU[best, j], LU[k, j]
        if not LU[k, k] != 0.0:
            return False
        for i in range(k + 1, n):
            LU[i, k] /= LU[k, k]
            for j in range(k + 1, n):
                LU[i, j] -= LU[i, k] * LU[k, j]
    return True


@jit
def lu_solve(LU, piv, b, out, n):
    """out[:n] <- A^-1 b[:n] from :func:`lu_factor`'s LU, piv (b may be out)."""
    for i in range(n):
        out[i] = b[i]
    for k in range(n):
        j = piv[k]
        if j != k:
            out[k], out[j] = out[j], out[k]
    for i in range(n):
        t = out[i]
        for k in range(i):
            t -= LU[i, k] * out[k]
        out[i] = t
    _solve_lower_t(LU.T, out, out, n)  # U x = y


@jit
def spd_solve(K, L, b, out, n):
    """out[:n] <- K^-1 b[:n] by Cholesky (L: scratch; b may be out); False if K is not
    positive definite."""
    if not cholesky(K, L, n):
        return False
    cholesky_solve(L, b, out, n)
    return True


@jit
def cholesky_solve(L, b, out, n):
    """out[:n] <- (L L^T)^-1 b[:n] (b may be out)."""
    for i in range(n):
        t = b[i]
        for k in range(i):
            t -= L[i, k] * out[k]
        out[i] = t / L[i, i]
    _solve_lower_t(L, out, out, n)


@jit
def chart_mass_matrix(K, T, tmp, out, n):
    """out <- T^T K T, the chart's mass matrix (tmp: (n, n) scratch)."""
    chart_product(K, T, tmp, n, n)
    chart_product(T.T, tmp, out, n, n)


@jit
def chart_product(J, T, out, m, n):
    """out[:m, :n] <- J T (T: (n, n))."""
    for r in range(m):
        for c in range(n):
            t = 0.0
            for k in range(n):
                t += J[r, k] * T[k, c]
            out[r, c] = t


@jit
def row_space_projector(W, nr, n, ra, g, sel):
    """g[:nr] <- the squared norms of W[:nr, :n]'s rows (orthogonal: :func:`jacobi_rows`'
    W), sel[:nr] <- 1 on the ``ra`` largest (nonzero) of them, 0 elsewhere: the rows that
    span the leading ra-dimensional row space; :func:`rank_cut`'s cut."""
    cut = rank_cut(W, nr, n, g)
    for r in range(nr):
        sel[r] = 0
    for _ in range(ra):
        best = -1
        for r in range(nr):
            if sel[r] == 0 and g[r] > 0.0 and (best < 0 or g[r] > g[best]):
                best = r
        if best < 0:
            break
        sel[best] = 1
    return cut


@jit
def tree_factor(K, L, rates, n):
    """L <- the factor of K[:n, :n] = L^T L, K the joint-space inertia of a tree: rates[0, i]
    is rate i's parent rate (-1: none), rates[1] the rates in a topological order (parents
    first).  L is lower triangular in that order: L[i, j] is nonzero only for j = i and j an
    ancestor of i, and only those entries are written or read (no fill-in: Featherstone's
    LTL factorization, ``Rigid Body Dynamics Algorithms`` 6.5).  False if K is not positive
    definite."""
    parent, order = rates[0], rates[1]
    for i in range(n):
        j = i
        while j >= 0:
            L[i, j] = K[i, j]
            j = parent[j]
    for p in range(n - 1, -1, -1):
        k = order[p]
        if not L[k, k] > 0.0:
            return False
        a = np.sqrt(L[k, k])
        L[k, k] = a
        i = parent[k]
        while i >= 0:
            L[k, i] /= a
            i = parent[i]
        i = parent[k]
        while i >= 0:
            j = i
            while j >= 0:
                L[i, j] -= L[k, i] * L[k, j]
                j = parent[j]
            i = parent[i]
    return True


@jit
def tree_solve(L, rates, b, out, n):
    """out[:n] <- (L^T L)^-1 b[:n] for a factor of :func:`tree_factor` (b may be out): L^T
    from the leaves in, which leaves 0 at a rate none of whose descendants b loads (a contact
    loads the rates of its body and its ancestors), then L from the root out."""
    parent, order = rates[0], rates[1]
    for i in range(n):
        out[i] = b[i]
    for p in range(n - 1, -1, -1):
        k = order[p]
        t = out[k] / L[k, k]
        out[k] = t
        if t != 0.0:
            i = parent[k]
            while i >= 0:
                out[i] -= L[k, i] * t
                i = parent[i]
    for p in range(n):
        k = order[p]
        t = out[k]
        i = parent[k]
        while i >= 0:
            t -= L[k, i] * out[i]
            i = parent[i]
        out[k] = t / L[k, k]


@jit
def tree_solve3(L, rates, B, out, n):
    """out[r, :n] <- (L^T L)^-1 B[r, :n] for the three rows r of B (B may be out): three
    :func:`tree_solve` side by side."""
    parent, order = rates[0], rates[1]
    for r in range(3):
        for i in range(n):
            out[r, i] = B[r, i]
    for p in range(n - 1, -1, -1):
        k = order[p]
        d = L[k, k]
        t0, t1, t2 = out[0, k] / d, out[1, k] / d, out[2, k] / d
        out[0, k], out[1, k], out[2, k] = t0, t1, t2
        if t0 != 0.0 or t1 != 0.0 or t2 != 0.0:
            i = parent[k]
            while i >= 0:
                a = L[k, i]
                out[0, i] -= a * t0
                out[1, i] -= a * t1
                out[2, i] -= a * t2
                i = parent[i]
    for p in range(n):
        k = order[p]
        t0, t1, t2 = out[0, k], out[1, k], out[2, k]
        i = parent[k]
        while i >= 0:
            a = L[k, i]
            t0 -= a * out[0, i]
            t1 -= a * out[1, i]
            t2 -= a * out[2, i]
            i = parent[i]
        d = L[k, k]
        out[0, k], out[1, k], out[2, k] = t0 / d, t1 / d, t2 / d
