"""The articulated-body recursion: (T^T M T) a = f solved in O(n) without forming T and
without allocating.  Each body's spatial inertia about its joint point, the factor (leaves
to root; it depends on the configuration only) and the solve (leaves to root, then root to
leaves), all about each body's joint point in world axes (see :mod:`.kinematics`)."""
from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.rotations import cross3, keep_alive
from rtrigid.backends.tree.layout import (
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_VOFF,
    ROW_C,
    ROW_D,
    PRISMATIC,
    REVOLUTE,
    SPHERICAL,
    T_ARM,
    T_J,
    T_MASS,
    col_block,
    nv_of,
)


@jit_inline
def joint_point_inertia(tf, b, R, G, out):
    """out[b] <- body b's spatial inertia about its joint point, world axes.

    With c = G[b, ROW_C] the centre of mass relative to the point: [[I_c + m([c]x)^T [c]x, m [c]x],
    [-m [c]x, m 1]], mapping (angular acceleration, acceleration of the point) to (moment
    about the point, force).
    """
    m = tf[b, T_MASS]
    j0, j1, j2 = tf[b, T_J], tf[b, T_J + 1], tf[b, T_J + 2]
    c0, c1, c2 = G[b, ROW_C, 0], G[b, ROW_C, 1], G[b, ROW_C, 2]
    cc = c0 * c0 + c1 * c1 + c2 * c2
    for i in range(3):
        for j in range(i, 3):
            s = R[b, i, 0] * j0 * R[b, j, 0] + R[b, i, 1] * j1 * R[b, j, 1] + R[b, i, 2] * j2 * R[b, j, 2]
            s += m * ((cc if i == j else 0.0) - G[b, ROW_C, i] * G[b, ROW_C, j])
            out[b, i, j] = s
            out[b, j, i] = s
            out[b, 3 + i, 3 + j] = m if i == j else 0.0
            out[b, 3 + j, 3 + i] = m if i == j else 0.0
    for i in range(3):
        out[b, i, 3 + i] = 0.0
        out[b, 3 + i, i] = 0.0
    out[b, 0, 4], out[b, 0, 5] = -m * c2, m * c1
    out[b, 1, 3], out[b, 1, 5] = m * c2, -m * c0
    out[b, 2, 3], out[b, 2, 4] = -m * c1, m * c0
    out[b, 4, 0], out[b, 5, 0] = -m * c2, m * c1
    out[b, 3, 1], out[b, 5, 1] = m * c2, -m * c0
    out[b, 3, 2], out[b, 4, 2] = -m * c1, m * c0


@jit_inline
def invert_in_place(A, b, k):
    """A[b, :k, :k] <- its inverse by Gauss-Jordan elimination without pivoting; False if a pivot
    is not positive.  Meant for symmetric positive definite matrices (joint-space inertias),
    for which elimination without pivoting is stable and every pivot is positive.
    """
    for c in range(k):
        piv = A[b, c, c]
        if not (piv > 0.0):
            return False
        inv = 1.0 / piv
        A[b, c, c] = 1.0
        for j in range(k):
            A[b, c, j] *= inv
        for r in range(k):
            if r != c:
                f = A[b, r, c]
                A[b, r, c] = 0.0
                for j in range(k):
                    A[b, r, j] -= f * A[b, c, j]
    return True


@jit
def articulated_factor(tf, ti, R, G, IA, U, Dinv, W, Ia, arm=None):
    """Articulated inertias IA, U = IA S, W = S^T IA and D^-1 = (S^T IA S)^-1, leaves to root.

    The joints' own armature (rotor inertia, tf[b, T_ARM], revolute and prismatic joints)
    adds to their D, so the factor is that of T^T M T + diag(armature), as MuJoCo's.
    ``arm`` (nv,), optional: a further diagonal joint-space term added to D -- how
    ``semi_implicit_euler`` takes its dampers implicitly, (M + A + h D).  Only the rates of
    non-spherical joints may carry one.

    Everything is taken about each body's joint point, world axes; a child's articulated
    inertia Ia = IA - U D^-1 W reaches its parent as X(d)^T Ia X(d) (``Ia``: a 6x6 scratch).
    A spherical joint is handled in world axes, where S = [1; 0]: then U and W are IA's own
    first three columns and rows (not stored), D^-1 is the inverse of IA's rotational block,
    and Ia keeps only its translational block C - E D^-1 B.
    Depends on the configuration only.  Returns False if some D is not numerically positive
    definite.
    """
    nb = ti.shape[0]
    for b in range(nb):
        joint_point_inertia(tf, b, R, G, IA)
    ok = True
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        if kind == SPHERICAL:
            for r in range(3):
                for c in range(3):
                    Dinv[b, r, c] = IA[b, r, c]
            if not invert_in_place(Dinv, b, 3):
                ok = False  # carry on to the single exit (see keep_alive)
            if p < 0:
                continue
            # Ia = [[0, 0], [0, C - E D^-1 B]]; W holds D^-1 B for the moment
            for r in range(3):
                for c in range(3):
                    W[b, r, c] = (Dinv[b, r, 0] * IA[b, 0, 3 + c] + Dinv[b, r, 1] * IA[b, 1, 3 + c]
                                  + Dinv[b, r, 2] * IA[b, 2, 3 + c])
            for r in range(3):
                for c in range(3):
                    Ia[r, c] = Ia[r, 3 + c] = Ia[3 + r, c] = 0.0
                    Ia[3 + r, 3 + c] = IA[b, 3 + r, 3 + c] - (
                        IA[b, 3 + r, 0] * W[b, 0, c] + IA[b, 3 + r, 1] * W[b, 1, c]
                        + IA[b, 3 + r, 2] * W[b, 2, c])
            shift_to_parent(Ia, G, b, IA, p)
            continue
        k = nv_of(kind)
        for c in range(k):
            o = col_block(kind, c)
            d0, d1, d2 = G[b, c, 0], G[b, c, 1], G[b, c, 2]
            for r in range(6):
                U[b, r, c] = IA[b, r, o] * d0 + IA[b, r, o + 1] * d1 + IA[b, r, o + 2] * d2
                W[b, c, r] = IA[b, o, r] * d0 + IA[b, o + 1, r] * d1 + IA[b, o + 2, r] * d2
        for r in range(k):
            o = col_block(kind, r)
            for c in range(k):
                Dinv[b, r, c] = (G[b, r, 0] * U[b, o, c] + G[b, r, 1] * U[b, o + 1, c]
                                 + G[b, r, 2] * U[b, o + 2, c])
        if kind == REVOLUTE or kind == PRISMATIC:
            Dinv[b, 0, 0] += tf[b, T_ARM]
        if arm is not None:
            ov = ti[b, I_VOFF]
            for r in range(k):
                Dinv[b, r, r] += arm[ov + r]
        if k > 0 and not invert_in_place(Dinv, b, k):
            ok = False
        if p < 0:
            continue
        # Ia = IA - (U D^-1) W; a joint with a parent has k <= 3 (free joints are roots)
        for r in range(6):
            t0 = t1 = t2 = 0.0
            for m in range(k):
                um = U[b, r, m]
                t0 += um * Dinv[b, m, 0]
                if k > 1:
                    t1 += um * Dinv[b, m, 1]
                if k > 2:
                    t2 += um * Dinv[b, m, 2]
            for c in range(6):
                s = IA[b, r, c]
                if k > 0:
                    s -= t0 * W[b, 0, c]
                if k > 1:
                    s -= t1 * W[b, 1, c]
                if k > 2:
                    s -= t2 * W[b, 2, c]
                Ia[r, c] = s
        shift_to_parent(Ia, G, b, IA, p)
    keep_alive(R)  # see keep_alive; and one exit only, for the same reason
    return ok


@jit_inline
def shift_to_parent(Ia, G, b, IA, p):
    """IA[p] += X(d)^T Ia X(d), d = G[b, ROW_D]: an inertia about body b's joint point, taken
    about its parent's.  With Ia = [[A, B], [E, C]]:  E' = E - C[d]x, B' = B + [d]x C,
    A' = A - B[d]x + [d]x E'  (rows of M[d]x are rows of M crossed with d)."""
    d0, d1, d2 = G[b, ROW_D, 0], G[b, ROW_D, 1], G[b, ROW_D, 2]
    for i in range(3):
        # row i of E' and of A - B[d]x
        ce = cross3(Ia[3 + i, 3], Ia[3 + i, 4], Ia[3 + i, 5], d0, d1, d2)
        bd = cross3(Ia[i, 3], Ia[i, 4], Ia[i, 5], d0, d1, d2)
        for j in range(3):
            Ia[3 + i, j] -= ce[j]
            Ia[i, j] -= bd[j]
    for j in range(3):
        # column j of B' = B + d x C[:, j] and of A' = (A - B[d]x) + d x E'[:, j]
        dc = cross3(d0, d1, d2, Ia[3, 3 + j], Ia[4, 3 + j], Ia[5, 3 + j])
        de = cross3(d0, d1, d2, Ia[3, j], Ia[4, j], Ia[5, j])
        for i in range(3):
            Ia[i, 3 + j] += dc[i]
            Ia[i, j] += de[i]
    for r in range(6):
        for c in range(6):
            IA[p, r, c] += Ia[r, c]


@jit
def articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, nudot):
    """nudot <- solution of the articulated recursion for joint forces tau and bias forces pA.

    ``IA``, ``U``, ``Dinv``, ``W`` come from :func:`articulated_factor` (IA already includes
    the children's contributions); ``pA`` holds each body's own bias force about its joint
    point (overwritten: the children's contributions are added in), ``cb`` the
    velocity-product accelerations of :func:`~.kinematics.joint_velocities`.  With cb = pA = 0 this solves
    (T^T M T) nudot = tau.  ``acc`` receives the accelerations (alpha, joint point).
    A spherical joint is solved in world axes (its rates are the columns G[b, :3] = R_b).
    """
    nb = ti.shape[0]
    # leaves to root: y = D^-1 (tau - S^T pA - W cb), parked in nudot; pA_p += X^T pa
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_VOFF]
        if kind == SPHERICAL:
            k = 3
            for r in range(3):
                s = (G[b, 0, r] * tau[o] + G[b, 1, r] * tau[o + 1] + G[b, 2, r] * tau[o + 2]
                     - pA[b, r])
                for m in range(6):
                    s -= IA[b, r, m] * cb[b, m]
                acc[b, r] = s
        else:
            k = nv_of(kind)
            for c in range(k):
                off = col_block(kind, c)
                s = tau[o + c] - (G[b, c, 0] * pA[b, off] + G[b, c, 1] * pA[b, off + 1]
                                  + G[b, c, 2] * pA[b, off + 2])
                for m in range(6):
                    s -= W[b, c, m] * cb[b, m]
                acc[b, c] = s
        for c in range(k):
            s = 0.0
            for m in range(k):
                s += Dinv[b, c, m] * acc[b, m]
            nudot[o + c] = s
        if p < 0:
            continue
        # pa = pA + IA cb + U y  (Ia cb + U D^-1 u of the textbook, with Ia = IA - U D^-1 W)
        for r in range(6):
            s = pA[b, r]
            for m in range(6):
                s += IA[b, r, m] * cb[b, m]
            if kind == SPHERICAL:
                for c in range(3):
                    s += IA[b, r, c] * nudot[o + c]
            else:
                for c in range(k):
                    s += U[b, r, c] * nudot[o + c]
            acc[b, r] = s
        n = cross3(G[b, ROW_D, 0], G[b, ROW_D, 1], G[b, ROW_D, 2], acc[b, 3], acc[b, 4],
                   acc[b, 5])
        for r in range(3):
            pA[p, r] += acc[b, r] + n[r]
            pA[p, 3 + r] += acc[b, 3 + r]
    # root to leaves: a = X a_p + cb + S nudot, nudot = y - D^-1 W X a_p
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        k = nv_of(kind)
        o = ti[b, I_VOFF]
        sph = kind == SPHERICAL
        if p >= 0:
            t = cross3(acc[p, 0], acc[p, 1], acc[p, 2], G[b, ROW_D, 0], G[b, ROW_D, 1],
                       G[b, ROW_D, 2])
            for r in range(3):
                acc[b, r] = acc[p, r]
                acc[b, 3 + r] = acc[p, 3 + r] + t[r]
            # w = W X a_p parked in pA[b] (no longer needed), then nudot = y - D^-1 w
            for c in range(k):
                s = 0.0
                for m in range(6):
                    s += (IA[b, c, m] if sph else W[b, c, m]) * acc[b, m]
                pA[b, c] = s
            for c in range(k):
                s = nudot[o + c]
                for m in range(k):
                    s -= Dinv[b, c, m] * pA[b, m]
                nudot[o + c] = s
            for r in range(6):
                acc[b, r] += cb[b, r]
        else:
            for r in range(6):
                acc[b, r] = cb[b, r]
        if sph:
            # nudot holds the world-axis relative angular acceleration: add it, then R^T
            y = (nudot[o], nudot[o + 1], nudot[o + 2])
            for m in range(3):
                acc[b, m] += y[m]
                nudot[o + m] = G[b, m, 0] * y[0] + G[b, m, 1] * y[1] + G[b, m, 2] * y[2]
            continue
        for c in range(k):
            off = col_block(kind, c)
            for m in range(3):
                acc[b, off + m] += G[b, c, m] * nudot[o + c]
    keep_alive(tau, U)  # see keep_alive
