"""``energy_momentum4`` for jointed systems: a symmetric composition of the jointed
energy-momentum step of :mod:`.energy_momentum`, order 4.

The jointed step is symmetric (h then -h returns to the start to round-off: the mean arms,
the mean axes and the mid-point rule are symmetric in the two configurations, and the Cayley
turn of -h inverts that of h; ``tests/kernels/test_energy_momentum4.py``), so the composition with
the weights of :mod:`rtrigid.backends.compositions` is of order 4, and every stage
keeps the energy and the momenta as the base step does.  Each stage is one solve of
:func:`.energy_momentum.solve_step`, with its iteration, stopping rule and canonical roots.

State and rates.  As for the base scheme, ``nu`` after a step holds the mean rates of the
step (so the module declares ``MEAN_RATES``, and the rates reported at t are derived from the
bodies' momenta by the backend): the increments from the coordinates at its start to those at its end, divided by h
(Cayley increments on the near root for quaternions; :func:`.energy_momentum.mean_rates`).
A joint with an armature keeps its rotor's rate there, the last stage's (a state).

Stage predictor.  A stage's unknowns are its mean rates, close to the rates at its mid-time.
The base scheme's explicit predictor gives the step's mean rates p (one RK4 step from the
present state) and the change d = h nudot at its start; the first stage starts from
p + (c_1 - 1/2) d, stage k from the converged mean rate of stage k - 1 plus (c_k - c_{k-1}) d,
with c_k the mid-time of stage k as a fraction of the step.  Where the explicit prediction
fails (a singular inertia or a non-finite value along the RK4 step) the first stage starts
from the stored rates (the last step's mean rates) and d = 0.  In the fallback's sub-steps
each stage starts from the last stage's rates.

Fallback: a step whose solve fails in any stage is redone from its start as 2, 4, ...,
2**max_halvings composed sub-steps (the base scheme's rule), so a fallback step is still of
order 4; if that fails too the state is left at the start of the step and FAILED returned.
The step budget (``step_budget``) is the base scheme's: the stages' solves of one step, sub-steps
included, share it, and a step that runs out of it takes the base scheme's budget outcome
(:func:`.energy_momentum.out_of_budget`, an explicit step with its energy capped).
"""

from rtrigid._jit import jit
from rtrigid.backends.compositions import SUZUKI, TRIPLE_JUMP, mid_times
from rtrigid.backends.buffers import (
    FAILED,
    OK,
    SOLVER_BUDGET,
    SOLVER_HALVINGS,
    SOLVER_MAX_ITER,
    STAT_FALLBACKS,
    STAT_SPENT,
    STAT_STEPS,
    USED_BUDGET,
    USED_FALLBACK,
    all_finite,
)
from rtrigid.backends.tree import energy_momentum as em
from rtrigid.backends.tree.kinematics import (
    open_buffers,
    state_views,
)
from rtrigid.backends.tree.layout import Drive, TreeModel, TreeState
from rtrigid.backends.tree.limits import has_limits


# nu holds the step's mean rates (see the module docstring): the backend derives the rates at
# t_{n+1} from the bodies' momenta, as for the base scheme
MEAN_RATES = em.MEAN_RATES
_SUZUKI_MIDS = mid_times(SUZUKI)
_TRIPLE_JUMP_MIDS = mid_times(TRIPLE_JUMP)


def work_size(nb, nq, nv):
    """The base scheme's scratch and two rate vectors (change per step, stage rates)."""
    return em.work_size(nb, nq, nv) + 2 * nv


@jit
def _run(n, dt, F, I, stages, mids):
    """The step loop: the base scheme's, with a step made of the ``stages``."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    Qg_prev = state_views(S_prev, nb, nq, nv)[0]  # the step's start (S_prev is set first)
    scr, emw, jx, o = em.scratch_views(work, nb, nq, nv)
    forces = False  # any joint force held (A after the body loads; constant over the call)
    for i in range(6 * nb, 6 * nb + nv):
        forces = forces or A[i] != 0.0
    pred = jx.pred
    act, ctrl = em.actuator_views(F, I)[:2]
    awork = em.work_accounts(F, I)  # (as the base scheme's)
    change = work[o:o + nv]
    rates = work[o + nv:o + 2 * nv]
    max_iter = int(solver[SOLVER_MAX_ITER])
    most = 2 ** int(solver[SOLVER_HALVINGS])
    budget = int(solver[SOLVER_BUDGET])
    limited = has_limits(tf, ti)
    model = TreeModel(gravity, tf, ti, pf, pi, A, forces)
    state = TreeState(Qg, nu, x, q, v, w, L)
    ws = em.EmWork(scr, emw, jx)
    drive = Drive(act, ctrl, awork)
    ns_ = len(stages)
    flags = OK
    for _ in range(n):
        end = stats[STAT_SPENT] + (budget if budget > 0 else em.UNBUDGETED)
        # the prediction is charged to the step budget, and made only if it leaves some
        afford = end - stats[STAT_SPENT] > em.PREDICT_CHARGE
        if afford:
            stats[STAT_SPENT] += em.PREDICT_CHARGE
        if not (afford and em.predict_rates(dt, model, state, ws, drive, pred, change)):
            for j in range(nv):  # no explicit prediction: start from the stored rates
                pred[j] = nu[j]
                change[j] = 0.0
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        m = 1
        while True:
            ok = True
            hm = dt / m
            for i in range(m * ns_):
                k = i % ns_
                if m > 1:
                    for j in range(nv):
                        rates[j] = nu[j]
                elif k == 0:
                    for j in range(nv):
                        rates[j] = pred[j] + (mids[0] - 0.5) * change[j]
                else:
                    for j in range(nv):
                        rates[j] = nu[j] + (mids[k] - mids[k - 1]) * change[j]
                ok = em.solve_step(stages[k] * hm, max_iter, end, limited, model, state, ws, rates,
                                   stats, drive)
                if not ok:
                    break
            ok = ok and all_finite(S)
            if ok or m >= most or stats[STAT_SPENT] >= end:
                break
            for i in range(S.shape[0]):
                S[i] = S_prev[i]
            m *= 2
        if not ok and stats[STAT_SPENT] >= end:
            em.out_of_budget(dt, model, limited, S, S_prev, Qg_prev, state, ws, stats, drive)
            flags |= USED_BUDGET
            ok = True
            m = 1
        if not ok:
            for i in range(S.shape[0]):
                S[i] = S_prev[i]
            return FAILED | flags
        for j in range(nv):
            rates[j] = nu[j]
        em.mean_rates(ti, Qg_prev, Qg, dt, nu)
        em.keep_rotor_rates(tf, ti, rates, nu)  # (the armatures' rotor rates stay the last stage's)
        if m > 1:
            stats[STAT_FALLBACKS] += 1
            flags |= USED_FALLBACK
        stats[STAT_STEPS] += 1
    return flags


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel contract of rtrigid.backends.buffers)."""
    return _run(n, dt, F, I, SUZUKI, _SUZUKI_MIDS)


@jit
def step_triple_jump(n, dt, F, I):
    """The triple-jump composition (option ``composition="triple_jump"``)."""
    return _run(n, dt, F, I, TRIPLE_JUMP, _TRIPLE_JUMP_MIDS)
