"""Joint armature (rotor inertia) under the jointed ``energy_momentum`` and ``energy_momentum4``.

The rotor's rate is a state of the step, advanced by the midpoint rule as the bodies' momenta
are, so its energy a r²/2 enters the step's energy balance exactly: with dampers the energy
lost is their discrete dissipation plus what the actuators did, to round-off.  The motion
converges to the RK4 reference (``nullspace_rk4``, which moves MuJoCo's files with armature
as MuJoCo does) at the scheme's order; limits stay inelastic; a snapshot holds the rotors.
"""

import warnings

import numpy as np
import pytest

from tests.kernels.test_em_joint_springs import D, springy_chain

ARMATURE = (0.2, 1.0, 0.05)  # per joint: revolute, prismatic, revolute on a skew axis


def armature_chain(integrator, dt, damping=D, servo=False, limit=None, step_budget=None):
    """The springy chain of the springs' tests, with an armature on each joint."""
    return springy_chain(integrator, dt, servo=servo, damping=damping, armature=ARMATURE,
                         limit=limit, step_budget=step_budget)


def _rotor_energy(sim):
    return 0.5 * float(np.dot(ARMATURE, sim.qvel() ** 2))


@pytest.mark.parametrize("servo", [False, True])
@pytest.mark.parametrize("dt", [1e-3, 1.0 / 60.0])
def test_the_energy_lost_is_the_dampers_dissipation(dt, servo):
    sim = armature_chain("energy_momentum", dt, servo=servo)
    e0 = sim.energy()
    assert _rotor_energy(sim) > 0.1 * sim.kinetic_energy()  # the rotors carry a good part
    dissipated = 0.0
    c0 = sim.qpos()
    for _ in range(round(3.0 / dt)):
        sim.step(1)
        c1 = sim.qpos()
        dissipated += D * np.sum((c1 - c0) ** 2) / dt
        c0 = c1
    work = sim.actuator_work().sum()
    assert dissipated > 0.1 * e0
    assert abs(sim.energy() - e0 - work + dissipated) < 1e-9 * abs(e0)


@pytest.mark.parametrize("dt", [1e-3, 1.0 / 60.0])
def test_energy_momentum4_keeps_the_energy_with_armature(dt):
    """Springs and rotors without dampers: the energy stays put, step after step."""
    sim = armature_chain("energy_momentum4", dt, damping=0.0)
    e0 = sim.energy()
    worst = 0.0
    for _ in range(round(2.0 / dt)):
        sim.step(1)
        worst = max(worst, abs(sim.energy() - e0))
    assert worst < 1e-10 * abs(e0)


def _error(integrator, dt, reference):
    sim = armature_chain(integrator, dt)
    sim.step(round(1.0 / dt))
    return float(np.max(np.abs(sim.qpos() - reference)))


@pytest.fixture(scope="module")
def reference():
    """The chain at t = 1 s by RK4 at 1e-4 s (its error is ~1e-12 here)."""
    sim = armature_chain("nullspace_rk4", 1e-4)
    sim.step(10000)
    return sim.qpos()


@pytest.mark.parametrize("integrator, order", [("energy_momentum", 2), ("energy_momentum4", 4)])
def test_the_motion_converges_to_the_rk4_reference_at_the_schemes_order(
    integrator, order, reference
):
    coarse = _error(integrator, 1.0 / 50.0, reference)
    fine = _error(integrator, 1.0 / 100.0, reference)
    assert 1e-9 < fine < 2e-3
    assert 0.75 * 2**order < coarse / fine < 1.25 * 2**order, (coarse, fine)


def test_a_limit_stays_inelastic_with_armature():
    """The first joint swings into its limit: it stops there (its rate, the rotor's
    included, zero), the energy never grows (beyond the solver's tolerance, ~1e-12 of it per
    step), the joint stays within its range and the hit takes energy out."""
    lo, hi = -0.2, 0.75
    sim = armature_chain("energy_momentum", 1e-3, damping=0.0, limit=(lo, hi))
    e = e0 = sim.energy()
    stops = []
    for _ in range(3000):
        sim.step(1)
        e1 = sim.energy()
        assert e1 <= e + 1e-11 * abs(e0)
        q = sim.qpos()[0]
        assert lo - 1e-12 <= q <= hi + 1e-12
        if q >= hi - 1e-12:
            stops.append(sim.qvel()[0])
        e = e1
    assert stops and abs(stops[0]) < 1e-9, stops
    assert e < e0 - 1e-3 * abs(e0)


def test_a_snapshot_holds_the_rotors():
    """The rotors' rates are part of the state: a restored snapshot repeats the steps."""
    sim = armature_chain("energy_momentum", 1.0 / 60.0, servo=True)
    sim.step(20)
    snap = sim.snapshot()
    sim.step(30)
    after, energy = sim.qpos(), sim.energy()
    sim.step(5)
    sim.restore(snap)
    sim.step(30)
    np.testing.assert_array_equal(sim.qpos(), after)
    assert sim.energy() == energy


@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum4"])
def test_the_budget_outcome_counts_the_rotors_energy(integrator):
    """A step budget of 2 iterations at 1/30 s: steps that run out of it take the budget
    outcome (an explicit step, its energy capped at the start's); with the rotors' energy in
    the cap, the energy -- theirs included -- never grows and stays finite."""
    sim = armature_chain(integrator, 1.0 / 30.0, damping=0.0, step_budget=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(90):
            e0 = sim.energy()
            sim.step()
            assert np.all(np.isfinite(sim.qvel()))
            assert sim.energy() <= e0 + 1e-12 * (abs(e0) + 1.0)
    assert sim.solver_stats()["budget_steps"] >= 10
