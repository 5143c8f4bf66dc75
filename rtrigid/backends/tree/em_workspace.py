"""The scratch of the jointed ``energy_momentum`` step: its sizes and how it is carved out of
the work array (after the kinematics scratch of :func:`.kinematics.carve`).
"""
from collections import namedtuple

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.buffers import view
from rtrigid.backends.tree.kinematics import base_work_size, carve


def work_size(nb, nq, nv):
    return (int(base_work_size(nb, nq, nv)) + int(em_size(nb, nq, nv))
            + int(path_size(nb, nq, nv)))


@jit
def path_size(nb, nq, nv):
    return 4 * nv


@jit
def core_size(nb, nq, nv):
    """The part of the state a solve writes: (Qg, nu, x, q, v, w, L)."""
    return nq + nv + 16 * nb


@jit_inline
def path_carve(work, nb, nq, nv):
    """Scratch of the step driver (:func:`step`): the path (4, nv) of :func:`follow`."""
    o = base_work_size(nb, nq, nv) + em_size(nb, nq, nv)
    return view(work, o, (4, nv))


@jit
def em_size(nb, nq, nv):
    return (3 * nb * 8 + 4 * nb * 2 + 9 * nb + nb + nq + 6 * nv + 1 + 6 * nb * 2
            + _jac_size(nb, nv))


@jit
def _jac_size(nb, nv):
    return 12 * nb + 9 * nb + 36 * nb * 2 + 36 * nb + 6 * nb + nv + 36 + 72 + nv


# the solver's scratch by name (what :func:`em_carve` returns)
EmScratch = namedtuple("EmScratch", ("x0", "v0", "L0", "x1", "v1", "L1", "u", "fw", "q0", "q1",
                                     "rot", "smid", "Q1", "mu", "dmu", "res", "rhs", "Fs", "Y",
                                     "c0", "sl", "fr"))
# the Newton matrix's scratch by name (what :func:`jac_carve` returns)
JacScratch = namedtuple("JacScratch", ("mt", "Nm", "dc", "xt", "R0", "SL", "SR", "Cb", "ucol",
                                       "pred", "M3", "aug", "kd"))

# The step's scratch as its functions (.em_solve, .em_start, .em_policy) take it, with the
# groups of .layout (TreeModel, TreeState, Drive): carve's, em_carve's and jac_carve's.
EmWork = namedtuple("EmWork", ("scr", "em", "jx"))


@jit_inline
def em_carve(work, nb, nq, nv):
    o = base_work_size(nb, nq, nv)
    # (no list: the passes carve this on every call, and a list is allocated)
    x0 = view(work, o, (nb, 3))
    v0 = view(work, o + 3 * nb, (nb, 3))
    L0 = view(work, o + 6 * nb, (nb, 3))
    x1 = view(work, o + 9 * nb, (nb, 3))
    v1 = view(work, o + 12 * nb, (nb, 3))
    L1 = view(work, o + 15 * nb, (nb, 3))
    u = view(work, o + 18 * nb, (nb, 3))
    fw = view(work, o + 21 * nb, (nb, 3))
    o += 24 * nb
    q0 = view(work, o, (nb, 4))
    o += 4 * nb
    q1 = view(work, o, (nb, 4))
    o += 4 * nb
    rot = view(work, o, (nb, 3, 3))
    o += 9 * nb
    smid = view(work, o, (nb,))
    o += nb
    Q1 = view(work, o, (nq,))
    o += nq
    mu = view(work, o, (nv,))
    o += nv
    dmu = view(work, o, (nv,))
    o += nv
    res = view(work, o, (nv,))
    o += nv
    rhs = view(work, o, (nv,))
    o += nv
    Fs = view(work, o, (nb, 6))
    o += 6 * nb
    Y = view(work, o, (nb, 6))
    o += 6 * nb
    c0 = view(work, o, (nv,))  # the rates at the step's start (hold_rotors)
    o += nv
    # the joints with friction: +-1 on a rate sliding that way, 0 on one held (friction_locks);
    # and the friction's work over the step solved last (em_solve._solve_with_limits)
    sl = view(work, o, (nv,))
    fr = view(work, o + nv, (1,))
    return EmScratch(x0, v0, L0, x1, v1, L1, u, fw, q0, q1, rot, smid, Q1, mu, dmu, res, rhs, Fs,
                     Y, c0, sl, fr)


@jit_inline
def jac_carve(work, nb, nq, nv):
    """Scratch of the Newton matrix, as a :data:`JacScratch`."""
    o = base_work_size(nb, nq, nv) + em_size(nb, nq, nv) - _jac_size(nb, nv)
    mt = view(work, o, (nb, 3))
    Nm = view(work, o + 3 * nb, (nb, 3))
    dc = view(work, o + 6 * nb, (nb, 3))
    xt = view(work, o + 9 * nb, (nb, 3))
    o += 12 * nb
    R0 = view(work, o, (nb, 3, 3))
    o += 9 * nb
    SL = view(work, o, (nb, 6, 6))
    o += 36 * nb
    SR = view(work, o, (nb, 6, 6))
    o += 36 * nb
    Cb = view(work, o, (nb, 6, 6))
    o += 36 * nb
    ucol = view(work, o, (nb, 6))
    o += 6 * nb
    pred = view(work, o, (nv,))
    o += nv
    M3 = view(work, o, (4, 3, 3))
    o += 36
    aug = view(work, o, (6, 12))
    o += 72
    kd = view(work, o, (nv,))
    return JacScratch(mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd)


@jit
def scratch_views(work, nb, nq, nv):
    """(kinematics scratch, solver scratch, Newton-matrix scratch) as :func:`solve_step`
    takes them, and where this scheme's scratch ends in ``work``."""
    return (carve(work, nb, nq, nv), em_carve(work, nb, nq, nv), jac_carve(work, nb, nq, nv),
            base_work_size(nb, nq, nv) + em_size(nb, nq, nv) + path_size(nb, nq, nv))
