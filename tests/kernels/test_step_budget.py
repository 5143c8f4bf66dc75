"""The step budget of the jointed energy-momentum schemes (the real-time contract):
a step that runs out of ``step_budget`` Newton iterations takes the budget outcome, an explicit
step whose energy is capped at the start's plus the loads' work.  Through the public API."""
import warnings

import numpy as np
import pytest

import rtrigid as rt
from tests.helpers import random_chain

DT = 1.0 / 60.0
TIGHT = 2  # a budget most steps of a lively random chain at 1/60 run out of


def _round_off(sim):
    """Round-off of an energy balance: relative to the energies that enter it."""
    return 1e-12 * (abs(sim.potential_energy()) + sim.kinetic_energy() + 1.0)


def _turn_vector(q0, q1):
    """b = 2 tan(phi/2) n (world axes) of the turn from q0 to q1: the spatial Cayley vector by
    which the scheme counts a torque's work (its M.b)."""
    w0, v0 = q0[0], -np.asarray(q0[1:])
    w1, v1 = q1[0], np.asarray(q1[1:])
    d0 = w1 * w0 - v1 @ v0
    dv = w1 * v0 + w0 * v1 + np.cross(v1, v0)  # q1 o conj(q0)
    return 2.0 * dv / d0


@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum4"])
def test_budget_outcome_never_gains_energy_on_a_conservative_chain(integrator):
    """Gravity only: every step, budget outcomes included, ends with energy() at most the
    start's (to round-off), never NaN; the outcomes are counted apart from the fallbacks."""
    sim = random_chain(3, DT, integrator, step_budget=TIGHT)
    outcomes = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(60):
            e0 = sim.energy()
            before = sim.solver_stats()["budget_steps"]
            sim.step()
            assert np.all(np.isfinite(sim.qpos())) and np.all(np.isfinite(sim.qvel()))
            assert sim.energy() <= e0 + _round_off(sim)
            outcomes += sim.solver_stats()["budget_steps"] - before
    stats = sim.solver_stats()
    assert outcomes == stats["budget_steps"] >= 10
    assert stats["fallback_steps"] == 0  # (the budget ran out before any sub-step could)
    assert stats["charged_iterations"] <= TIGHT * stats["steps"]
    assert sim.constraint_error() < 1e-9


def test_budget_outcome_energy_within_the_work_of_the_loads():
    """A constant force and torque on bodies, a held revolute torque and motors: on every
    budget outcome energy() grows by at most the loads' work by the scheme's rule -- F.(x1 -
    x0), M.b (b the turn's spatial Cayley vector), tau (theta1 - theta0), and the actuators'
    work, which actuator_work() adds."""
    sim = random_chain(5, DT, motors=True, step_budget=TIGHT)
    assert sim.na > 0
    revolute = [j for j in sim.joint_names if len(sim.joint_position(j)) == 1]
    sim.set_joint_force(revolute[0], 3.0)
    sim.set_controls(np.linspace(-2.0, 2.0, sim.na))
    force, torque = np.array([4.0, -1.0, 6.0]), np.array([0.5, 1.5, -1.0])
    sim.apply_force(1, force)
    sim.apply_torque(2, torque)
    outcomes = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(60):
            e0, w0 = sim.energy(), sim.actuator_work().sum()
            x0, q0 = sim.pose(1)[0].copy(), sim.pose(2)[1].copy()
            th0 = sim.joint_position(revolute[0])[0]
            before = sim.solver_stats()["budget_steps"]
            sim.step()
            if sim.solver_stats()["budget_steps"] == before:
                continue
            outcomes += 1
            work = (force @ (sim.pose(1)[0] - x0) + torque @ _turn_vector(q0, sim.pose(2)[1])
                    + 3.0 * (sim.joint_position(revolute[0])[0] - th0)
                    + sim.actuator_work().sum() - w0)
            assert sim.energy() - e0 <= work + _round_off(sim)
    assert outcomes >= 10


def test_budget_outcome_warns_once_and_is_counted():
    sim = random_chain(3, DT, step_budget=TIGHT)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(30):
            sim.step()
        sim.step(10)
    budget = [w for w in seen if "step_budget" in str(w.message)]
    assert len(budget) == 1 and budget[0].category is RuntimeWarning
    assert sim.solver_stats()["budget_steps"] > 1


def test_snapshot_around_budget_outcomes_repeats_bit_for_bit():
    sim = random_chain(3, DT, motors=True, step_budget=TIGHT)
    sim.set_controls(np.full(sim.na, 1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sim.step(5)
        snap, at = sim.snapshot(), sim.solver_stats()["budget_steps"]
        runs = []
        for _ in range(2):
            sim.restore(snap)
            sim.step(15)
            runs.append((sim.qpos(), sim.qvel(), sim.energy(), sim.actuator_work(),
                         sim.solver_stats()))
    (q1, v1, e1, a1, s1), (q2, v2, e2, a2, s2) = runs
    assert s1 == s2 and s1["budget_steps"] > at  # budget outcomes among the 15 steps
    assert np.array_equal(q1, q2) and np.array_equal(v1, v2) and np.array_equal(a1, a2)
    assert e1 == e2


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10", True])
def test_step_budget_must_be_a_positive_integer(bad):
    model = random_chain(0, DT).model
    with pytest.raises(ValueError, match="step_budget"):
        rt.Simulation(model, "energy_momentum", DT, step_budget=bad)


def test_scenario_chain_never_takes_the_budget_outcome():
    """A real-time budget (40, docs/guide/step-budget.md) is not reached by the scenario's
    chain as built: its steps are the unbudgeted ones."""
    for n in (10, 20):
        sim = rt.scenarios.build("chain", integrator="energy_momentum", dt=DT, n=n)
        assert sim.step_budget is None  # (the default)
        sim = rt.Simulation(sim.model, "energy_momentum", DT, step_budget=40)
        sim.step(60)
        stats = sim.solver_stats()
        assert stats["budget_steps"] == 0 and stats["fallback_steps"] == 0
        assert stats["charged_iterations"] <= 40 * 60


def test_no_budget_is_the_unbudgeted_solver():
    """step_budget=None keeps no budget: the same steps as a budget no step reaches."""
    runs = []
    for budget in (None, 10 ** 6):
        sim = random_chain(3, DT, step_budget=budget)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sim.step(30)
        runs.append((sim.qpos(), sim.solver_stats()))
    assert np.array_equal(runs[0][0], runs[1][0]) and runs[0][1] == runs[1][1]
    assert runs[0][1]["budget_steps"] == 0


def test_set_step_budget_steps_as_the_constructor_budget():
    """set_step_budget(B) on a built Simulation steps bit for bit as Simulation(...,
    step_budget=B); None takes it off again.  A bad value is a ValueError naming step_budget
    and changes nothing; a snapshot taken before a change is refused after it."""
    a = random_chain(3, DT, step_budget=TIGHT)
    b = random_chain(3, DT)
    snap = b.snapshot()
    for bad in (0, -3, 2.5, "2", True):
        with pytest.raises(ValueError, match="^step_budget"):
            b.set_step_budget(bad)
    assert b.step_budget is None
    b.restore(snap)  # the failed calls changed no setting
    b.set_step_budget(TIGHT)
    assert b.step_budget == TIGHT
    with pytest.raises(ValueError, match="^snap: .*step_budget"):
        b.restore(snap)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        a.step(30)
        b.step(30)
    assert np.array_equal(a.qpos(), b.qpos()) and np.array_equal(a.qvel(), b.qvel())
    assert a.solver_stats() == b.solver_stats() and b.solver_stats()["budget_steps"] > 0
    b.set_step_budget(None)
    before = b.solver_stats()["budget_steps"]
    b.step(10)
    assert b.solver_stats()["budget_steps"] == before
