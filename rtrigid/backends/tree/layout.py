"""The flat layout of a tree for its kernels: the joint codes and their numbers of
coordinates and rates, the columns of the per-body, per-spring rows and of a body's joint
geometry, where each joint's coordinates and rates sit, and the kernel buffers (model,
state, applied loads, the per-step scratch) with their views."""
from collections import namedtuple

import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.buffers import sections, view
from rtrigid.backends.tree.actuators import ACT_WIDTH
from rtrigid.joints import BY_CODE, KINDS


# the kernels branch on the codes of the joint-kind table
FREE6, SPHERICAL, REVOLUTE, PRISMATIC, CYLINDRICAL, PLANAR, FIXED = (
    KINDS[k].code for k in ("free", "spherical", "revolute", "prismatic", "cylindrical",
                            "planar", "fixed"))
NQ = np.array([BY_CODE[c].nq for c in range(len(BY_CODE))], np.int64)
NV = np.array([BY_CODE[c].nv for c in range(len(BY_CODE))], np.int64)
# the same counts as a tuple, which a kernel indexes through a switch of constants: LLVM then
# knows a joint's rate count is one of a few small numbers and plans the loops over it
# accordingly (read from the array, the tree energy-momentum factor and solve took ~50 % longer)
_NV_CONST = tuple(int(n) for n in NV)

# per-body float row
T_MASS = 0
T_J = 1        # principal moments (3)
T_AP = 4       # anchor in the parent frame (world for a world joint)
T_AC = 7       # anchor in the child frame
T_UP = 10      # axis in the parent frame
T_UC = 13      # axis in the child frame
T_E1P = 16     # parent-frame unit vectors completing u_P to a right-handed frame
T_E2P = 19
T_E1C = 22     # the same for the child axis
T_E2C = 25
T_R0 = 28      # relative rotation at zero joint coordinates (4)
T_K = 32       # joint spring stiffness (revolute, prismatic)
T_REST = 33    # its rest coordinate
T_DAMP = 34    # joint damper coefficient
T_LO = 35      # joint limits of a revolute or prismatic coordinate (-inf, +inf: none)
T_HI = 36
T_BOUNCE = 37  # the limits' restitution
T_ARM = 38     # armature: rotor inertia on a revolute or prismatic coordinate
T_FRIC = 39    # joint Coulomb friction: the bound of its torque (force) on that coordinate
T_WIDTH = 40

# per-body int row
I_ORDER = 0    # the body visited at this position of the topological order
I_PARENT = 1
I_KIND = 2
I_QOFF = 3
I_VOFF = 4
I_WIDTH = 5

# point-to-point springs (body -1 is the world)
P_A = 0        # point on body a (its frame) or world point
P_B = 3
P_K = 6
P_REST = 7
P_WIDTH = 8

HEADER = 5     # ints: nb, ns, nq, nv, na

# rows of a body's joint geometry (motion_columns): up to six column directions, then
ROW_D = 6      # its joint point minus its parent's joint point
ROW_C = 7      # its centre of mass minus its joint point
JOINT_ROWS = 8


@jit_inline
def nv_of(kind):
    """Number of rates (= motion-subspace columns) of a joint kind (the table's nv)."""
    return _NV_CONST[kind]


@jit_inline
def col_block(kind, c):
    """Where column c of a joint's motion subspace lives: 0 = a rotation axis, 3 = a slide.

    At the joint point every column of every lower pair is either a pure rotation about an
    axis through the point or a pure translation, so a column is stored as one direction.
    """
    if kind == FREE6:
        return 3 if c < 3 else 0
    if kind == PRISMATIC:
        return 3
    if (kind == CYLINDRICAL or kind == PLANAR) and c > 0:
        return 3
    return 0


@jit_inline
def coordinate_slots(ti, b):
    """(n, qo, wo) of body b's inbound joint: n plain coordinates at its I_QOFF whose rates are
    at its I_VOFF, then a unit quaternion at qo whose angular rate is at wo (qo = -1: none)."""
    kind = ti[b, I_KIND]
    o = ti[b, I_QOFF]
    ov = ti[b, I_VOFF]
    if kind == FREE6:
        return 3, o + 3, ov + 3
    if kind == SPHERICAL:
        return 0, o, ov
    return nv_of(kind), -1, -1


@jit_inline
def one_coordinate(ti, b):
    """(qo, vo) of body b's inbound joint when it is revolute or prismatic -- the kinds with
    one coordinate, and with limits, springs and friction on it -- its coordinate's and
    rate's indices; else (-1, -1)."""
    kind = ti[b, I_KIND]
    if kind != REVOLUTE and kind != PRISMATIC:
        return -1, -1
    return ti[b, I_QOFF], ti[b, I_VOFF]


def work_layout(nb, nq, nv):
    """Names and shapes of the per-step scratch arrays of the multibody kernels."""
    return (("R", (nb, 3, 3)), ("rj", (nb, 3)), ("G", (nb, JOINT_ROWS, 3)), ("V", (nb, 6)),
            ("cb", (nb, 6)), ("IA", (nb, 6, 6)), ("U", (nb, 6, 6)), ("Dinv", (nb, 6, 6)),
            ("W", (nb, 6, 6)), ("pA", (nb, 6)), ("acc", (nb, 6)), ("fext", (nb, 6)), ("I6", (6, 6)),
            ("tau", (nv,)), ("Q0", (nq,)), ("nu0", (nv,)), ("kQ", (2, nq)), ("knu", (2, nv)),
            ("Qs", (nq,)), ("nus", (nv,)), ("nudot", (nv,)),
            ("Lc", (nb, nv)), ("La", (nb, nb)), ("Lv", (4, nb)), ("Ld", (nv,)),
            ("Ff", (nv,)), ("Fs", (nv,)))


# the scratch arrays by name (what :func:`carve` returns; a kernel reads ``scr.nu0``)
Scratch = namedtuple("Scratch", [name for name, _ in work_layout(1, 1, 1)])
# the part of the scratch the passes over the bodies take (what :func:`pass_arrays` returns)
Passes = namedtuple("Passes", Scratch._fields[:14])
# a tree's tables and gravity, as the dynamics kernels take them (see :func:`open_buffers`)
TreeTables = namedtuple("TreeTables", ("tf", "ti", "pf", "pi", "gravity"))
# The groups the stepping kernels pass along instead of their members one by one (a kernel
# unpacks what it uses): the model and its applied loads A (``forces``: some joint force is
# held), the state's views (:func:`state_views`) and the actuators (:func:`actuator_views`;
# ``energy_momentum``'s ``awork`` is :func:`work_accounts`', the joint friction's work last)
TreeModel = namedtuple("TreeModel", ("gravity", "tf", "ti", "pf", "pi", "A", "forces"))
TreeState = namedtuple("TreeState", ("Qg", "nu", "x", "q", "v", "w", "L"))
Drive = namedtuple("Drive", ("act", "ctrl", "awork"))


# -- the kernel buffers -------------------------------------------------------------------------
#   I = [nb, ns, nq, nv, na | ti (nb x I_WIDTH) | pi (ns x 2) | stats]
#   F = [gravity (3) | tf (nb x T_WIDTH) | pf (ns x P_WIDTH) | act (na x ACT_WIDTH) | S
#        | S_prev | A (6 nb + nv + na) | solver (2) | work]
#   A = [f_app (3 nb) | t_app (3 nb) | held joint forces (nv, on the rates nu, in nu's order)
#        | actuator controls (na)]
#   S = [Qg (nq) | nu (nv) | x (3 nb) | q (4 nb) | v (3 nb) | w (3 nb) | L (3 nb)
#        | actuator work (na, cumulative: part of the state, so a failed step rolls it back)]
# x, q, v, w, L are the bodies' maximal coordinates, written from (Qg, nu) by the explicit
# scheme; the energy-momentum scheme advances (Qg, v, L) and writes nu as the rates that best
# fit its velocities (see backends/tree/energy_momentum).

@jit
def applied_size(nb, nv, na):
    """Length of the applied-load section A: world force and torque per body, then the joint
    forces held on the rates (:meth:`Simulation.set_joint_force`), then the actuators'
    controls."""
    return 6 * nb + nv + na


@jit_inline
def applied_views(A, nb, nv):
    """(f_app (nb, 3), t_app (nb, 3), held joint forces (nv,)) views of A."""
    return view(A, 0, (nb, 3)), view(A, 3 * nb, (nb, 3)), view(A, 6 * nb, (nv,))


@jit
def state_size(nb, nq, nv, na):
    """(Qg, nu, x, q, v, w, L), the actuators' cumulative work (na), the joint friction's (1)."""
    return nq + nv + 16 * nb + na + 1


@jit
def model_sizes(nb, ns, na):
    """(float model length, int model length)."""
    return 3 + T_WIDTH * nb + P_WIDTH * ns + ACT_WIDTH * na, HEADER + I_WIDTH * nb + 2 * ns


@jit
def base_work_size(nb, nq, nv):
    """Length of the scratch of :func:`work_layout` (its sum; a test checks the two agree)."""
    return (186 + 3 * JOINT_ROWS) * nb + 36 + 4 * nq + 6 * nv + nb * (nv + nb + 4) + 3 * nv


def work_size(nb, nq, nv):
    return int(base_work_size(nb, nq, nv))


@jit_inline
def state_views(S, nb, nq, nv):
    """(Qg, nu, x, q, v, w, L) views into a multibody state array."""
    o = nq + nv
    return (view(S, 0, (nq,)), view(S, nq, (nv,)), view(S, o, (nb, 3)),
            view(S, o + 3 * nb, (nb, 4)), view(S, o + 7 * nb, (nb, 3)),
            view(S, o + 10 * nb, (nb, 3)), view(S, o + 13 * nb, (nb, 3)))


@jit_inline
def open_buffers(F, I):
    """Views of the two kernel buffers: (gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats,
    work, sizes) with sizes = (nb, ns, nq, nv)."""
    nb, ns, nq, nv, na = I[0], I[1], I[2], I[3], I[4]
    nf_model, ni_model = model_sizes(nb, ns, na)
    S, S_prev, A, solver, stats, work = sections(F, I, nf_model, ni_model,
                                                 state_size(nb, nq, nv, na),
                                                 applied_size(nb, nv, na))
    gravity = view(F, 0, (3,))
    tf = view(F, 3, (nb, T_WIDTH))
    pf = view(F, 3 + T_WIDTH * nb, (ns, P_WIDTH))
    ti = view(I, HEADER, (nb, I_WIDTH))
    pi = view(I, HEADER + I_WIDTH * nb, (ns, 2))
    return gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, (nb, ns, nq, nv)


@jit_inline
def actuator_views(F, I):
    """(act (na, ACT_WIDTH) table, controls (na,) in A, cumulative work (na,) in S)."""
    nb, ns, nq, nv, na = I[0], I[1], I[2], I[3], I[4]
    nf_model, ni_model = model_sizes(nb, ns, na)
    n_state = state_size(nb, nq, nv, na)
    S, S_prev, A, solver, stats, work = sections(F, I, nf_model, ni_model, n_state,
                                                 applied_size(nb, nv, na))
    act = view(F, nf_model - ACT_WIDTH * na, (na, ACT_WIDTH))
    return act, view(A, 6 * nb + nv, (na,)), view(S, n_state - 1 - na, (na,))


@jit_inline
def work_accounts(F, I):
    """The cumulative work in S (na + 1,): each actuator's (as :func:`actuator_views`), then
    the joint friction's, which ``energy_momentum`` counts (its ``awork`` in :data:`Drive`)."""
    nb, ns, nq, nv, na = I[0], I[1], I[2], I[3], I[4]
    nf_model, ni_model = model_sizes(nb, ns, na)
    n_state = state_size(nb, nq, nv, na)
    S = sections(F, I, nf_model, ni_model, n_state, applied_size(nb, nv, na))[0]
    return view(S, n_state - 1 - na, (na + 1,))


@jit_inline
def carve(work, nb, nq, nv):
    """The scratch arrays of :func:`work_layout`, in that order, as a :data:`Scratch`."""
    o = 0
    R = view(work, o, (nb, 3, 3))
    o += 9 * nb
    rj = view(work, o, (nb, 3))
    o += 3 * nb
    G = view(work, o, (nb, JOINT_ROWS, 3))
    o += 3 * JOINT_ROWS * nb
    V = view(work, o, (nb, 6))
    o += 6 * nb
    cb = view(work, o, (nb, 6))
    o += 6 * nb
    IA = view(work, o, (nb, 6, 6))
    o += 36 * nb
    U = view(work, o, (nb, 6, 6))
    o += 36 * nb
    Dinv = view(work, o, (nb, 6, 6))
    o += 36 * nb
    W = view(work, o, (nb, 6, 6))
    o += 36 * nb
    pA = view(work, o, (nb, 6))
    o += 6 * nb
    acc = view(work, o, (nb, 6))
    o += 6 * nb
    fext = view(work, o, (nb, 6))
    o += 6 * nb
    I6 = view(work, o, (6, 6))
    o += 36
    tau = view(work, o, (nv,))
    o += nv
    Q0 = view(work, o, (nq,))
    o += nq
    nu0 = view(work, o, (nv,))
    o += nv
    kQ = view(work, o, (2, nq))  # RK4: a stage's derivative, and the sum
    o += 2 * nq
    knu = view(work, o, (2, nv))
    o += 2 * nv
    Qs = view(work, o, (nq,))
    o += nq
    nus = view(work, o, (nv,))
    o += nv
    nudot = view(work, o, (nv,))
    o += nv
    # joint limits (see .limits): impulse columns, their k x k matrix, per active joint
    # (rate index, away sign, target rate, aux), the rate jump
    Lc = view(work, o, (nb, nv))
    o += nb * nv
    La = view(work, o, (nb, nb))
    o += nb * nb
    Lv = view(work, o, (4, nb))
    o += 4 * nb
    Ld = view(work, o, (nv,))
    o += nv
    # joint friction (see .friction): the step's friction torques on the sliding joints, and
    # +inf on the rates held still (0 elsewhere)
    Ff = view(work, o, (nv,))
    o += nv
    Fs = view(work, o, (nv,))
    return Scratch(R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau, Q0, nu0, kQ, knu, Qs,
                   nus, nudot, Lc, La, Lv, Ld, Ff, Fs)


@jit_inline
def pass_arrays(scr):
    """The scratch arrays the tree's passes take, as a :data:`Passes`: (R, rj, G, V, cb, IA,
    U, Dinv, W, pA, acc, fext, I6, tau)."""
    return Passes(scr.R, scr.rj, scr.G, scr.V, scr.cb, scr.IA, scr.U, scr.Dinv, scr.W, scr.pA,
                  scr.acc, scr.fext, scr.I6, scr.tau)


@jit_inline
def limit_arrays(scr):
    """The joint limits' scratch (:mod:`.limits`): (Lc, La, Lv, Ld)."""
    return scr.Lc, scr.La, scr.Lv, scr.Ld
