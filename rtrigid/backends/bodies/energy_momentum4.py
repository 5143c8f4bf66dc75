"""``energy_momentum4``: a symmetric composition of the energy-momentum step, order 4.

The step of :mod:`.energy_momentum` is symmetric: a step of size h followed by one of size -h
returns to the start (to round-off; ``tests/kernels/test_energy_momentum4.py``), because QUAT.EM's
equations are unchanged when (z0, z1, h) is replaced by (z1, z0, -h) -- the discrete gradient
and the mid-point quantities are symmetric in z0, z1, and the Cayley factor of -h is the
inverse of that of h.  A symmetric method of order 2 composed as Phi(g_s h) ... Phi(g_1 h)
with symmetric weights g (g_i = g_{s+1-i}), sum g = 1 and sum g^3 = 0 is of order 4
(Yoshida 1990; Hairer, Lubich & Wanner, Geometric Numerical Integration, V.3).  Each stage
is a full energy-momentum step of its own size, so every stage keeps the energy and the
angular momentum, and so does the composition; only one stage of each composition is
negative, and it is a step backwards in time like any other (the step is symmetric).

The weights are those of :mod:`rtrigid.backends.compositions`: ``suzuki`` (the default, five
stages) or ``triple_jump`` (three).  The triple jump costs 0.6-0.8x as much per step, but its
stages are long (1.35 h forwards, 1.70 h back): at equal dt its error is about 70x the 5-stage
one on the free body, the heavy top and the gyro top, so at equal cost the 5-stage
composition is still 10-30x more accurate (a 3-link chain too), and reaches an error of 1e-6
at about half the cost.  Within the symmetric 5-stage family
(g1, g2, 1 - 2 g1 - 2 g2, g2, g1) none of g1 = 0.15 ... 0.5 measured beats Suzuki's
g1 = g2 on these bodies (the nearest, g1 = 0.45, by 3 % less accurate).  Measured by
``rtrigid bench --accuracy`` (README, ``assets/figures/accuracy.md``).

Each stage is its own Newton solve, with the single-body solver of :mod:`.energy_momentum`
(Appendix D for bodies with springs).  The fallback is that scheme's: a step whose solve fails
in any stage is redone from its start as 2, 4, ..., 2**max_halvings composed sub-steps, so a
fallback step is still of order 4.  Solver statistics count every stage's iterations
(``mean_iterations`` is per step, all stages together).
"""
from rtrigid._jit import jit
from rtrigid.backends.bodies import energy_momentum as em
from rtrigid.backends.compositions import SUZUKI, TRIPLE_JUMP


def work_size(nb):
    return em.work_size(nb)


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel contract of rtrigid.backends.buffers)."""
    return em.step_loop(n, dt, F, I, False, SUZUKI)


@jit
def step_rigid(n, dt, F, I):
    """:func:`step` for a model without springs (the Appendix D solver is not compiled)."""
    return em.step_loop(n, dt, F, I, None, SUZUKI)


@jit
def step_triple_jump(n, dt, F, I):
    """The triple-jump composition (option ``composition="triple_jump"``)."""
    return em.step_loop(n, dt, F, I, False, TRIPLE_JUMP)


@jit
def step_triple_jump_rigid(n, dt, F, I):
    return em.step_loop(n, dt, F, I, None, TRIPLE_JUMP)
