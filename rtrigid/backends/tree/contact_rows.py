"""The rows of the tree's contact solve (:mod:`rtrigid.backends.tree.contact`) in the tree's
rates: the sums over the rates a contact's rows read, and the loop joints' and couplings'
rows that constrain the impulses and the lift (their factor, and the projection of a
response onto what they allow)."""
from rtrigid._jit import jit
from rtrigid.backends.buffers import view
from rtrigid.maths.dense import cholesky_dropping, solve_dropping, tree_solve


@jit
def read_rates(Jk, perm, out):
    """out[1:1 + out[0]] <- the rates a contact's rows Jk (3, nv) read, in the order perm (the
    rates in the order of their bodies' names): the sums over them (:func:`sdot`) are those
    over every rate in that order, with the terms that are exactly zero left out -- the
    same bits, a sum of finite terms never being -0."""
    c = 0
    for i in range(perm.shape[0]):
        j = perm[i]
        if Jk[0, j] != 0.0 or Jk[1, j] != 0.0 or Jk[2, j] != 0.0:
            c += 1
            out[c] = j
    out[0] = c


@jit
def sdot(a, b, idx):
    """a . b summed over the rates idx, in their order (:func:`read_rates`)."""
    s = 0.0
    for i in range(idx.shape[0]):
        j = idx[i]
        s += a[j] * b[j]
    return s


@jit
def sdot2(a1, a2, b, idx):
    """(a1 . b, a2 . b) as :func:`sdot`, the two sums side by side."""
    s1 = s2 = 0.0
    for i in range(idx.shape[0]):
        j = idx[i]
        s1 += a1[j] * b[j]
        s2 += a2[j] * b[j]
    return s1, s2


@jit
def axpy(y, s, x):
    for i in range(y.shape[0]):
        y[i] += s * x[i]


@jit
def axpy2(y, s1, x1, s2, x2):
    """y <- y + s1 x1 + s2 x2, added in that order (two :func:`axpy`)."""
    for i in range(y.shape[0]):
        y[i] += s1 * x1[i]
        y[i] += s2 * x2[i]


def int_scratch_size(rows, nv):
    """Length of the int scratch the contact solve (:func:`.contact.after_step`) takes after
    its head (the start flag, the rates' order and the number of constraint rows): per table
    row, the rates its rows read (:func:`read_rates`)."""
    return rows * (nv + 1)


REDUNDANT = 1e-10  # a constraint row whose pivot is below this of A's largest is dependent


def constraint_scratch_size(m, nv):
    """Length of the constraint rows' tail of the contact solve's float scratch (see
    :func:`constraint_tail`): m rows (loop joints' and couplings') of nv rates."""
    return m * (2 * nv + 2 * m + 2)


@jit
def constraint_tail(xf, m, nv):
    """The constraint rows' tail of the float scratch: the loop joints' and couplings' rows
    Gc (m, nv), written by the backend, the columns Cc = M^-1 Gc^T, A = Gc Cc^T and its
    Cholesky factor Lc (m, m), and two vectors (m) of scratch."""
    o = xf.shape[0] - m * (2 * nv + 2 * m + 2)
    Gc = view(xf, o, (m, nv))
    Cc = view(xf, o + m * nv, (m, nv))
    A = view(xf, o + 2 * m * nv, (m, m))
    Lc = view(xf, o + 2 * m * nv + m * m, (m, m))
    y = xf[o + 2 * m * nv + 2 * m * m:o + 2 * m * nv + 2 * m * m + m]
    g = xf[o + 2 * m * nv + 2 * m * m + m:o + 2 * m * nv + 2 * m * m + 2 * m]
    return Gc, Cc, A, Lc, y, g


@jit
def constraint_factor(Lj, rates, rows_g):
    """Cc <- M^-1 Gc^T (Lj: the factor of the joint-space inertia M at the configuration,
    :func:`rtrigid.maths.dense.tree_factor`, of the tree ``rates``) and the Cholesky factor
    of A = Gc M^-1 Gc^T, its rows that depend on those before them dropped (pivot <=
    REDUNDANT of the largest diagonal); False if A is zero."""
    Gc, Cc, A, Lc, y, g = rows_g
    m, nv = Gc.shape
    for r in range(m):
        tree_solve(Lj, rates, Gc[r], Cc[r], nv)
    big = 0.0
    for r in range(m):
        for c in range(m):
            A[r, c] = dot(Gc[r], Cc[c])
        big = max(big, A[r, r])
    # redundant loop rows (a planar loop of spatial joints) make A singular: they are
    # dropped, which the projection does not see (their reactions are those of the others)
    cholesky_dropping(A, Lc, m, REDUNDANT * big)
    return big > 0.0


@jit
def constrained_column(rows_g, w):
    """w <- P w, P = 1 - Cc^T A^-1 Gc: a response M^-1 J^T made one the loops and couplings
    allow (the mass-orthogonal projection onto Gc dnu = 0), so the impulses, and the lift,
    move the mechanism as they allow and they carry their share of the reaction."""
    Gc, Cc, A, Lc, y, g = rows_g
    m = Gc.shape[0]
    for r in range(m):
        g[r] = dot(Gc[r], w)
    solve_dropping(Lc, g, y, m)
    for r in range(m):
        axpy(w, -y[r], Cc[r])


@jit
def dot(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s
