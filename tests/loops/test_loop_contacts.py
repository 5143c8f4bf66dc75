"""Contacts on a mechanism with loop joints (``nullspace_rk4``): the contact solve's responses
go through the loops, so a contact on one link carries the loads the loops bring to it."""

import numpy as np
import pytest

import rtrigid as rt

G = 9.81
ARM, SPAN, RADIUS = 0.3, 0.4, 0.05
CRANK, BAR = 0.5, 1.0  # masses (kg)
REST = 0.5  # the cranks' angle from the vertical where the bar's sphere meets the ground


def _parallelogram():
    """Two equal cranks on the world, SPAN apart, a bar pinned to both tips (the second pin a
    loop joint): the bar stays level, a sphere under its centre."""
    m = rt.Model()
    for n, mass in (("crank1", CRANK), ("crank2", CRANK), ("bar", BAR)):
        m.add_body(n, mass, (1e-3, 1e-3, 1e-3))
    for k, n in enumerate(("crank1", "crank2")):
        m.add_joint("revolute", None, n, anchor_parent=(k * SPAN, 0, 0),
                    anchor_child=(0, 0, ARM / 2), axis_parent=(0, 1, 0), name=n)
    m.add_joint("revolute", "crank1", "bar", anchor_parent=(0, 0, -ARM / 2),
                anchor_child=(-SPAN / 2, 0, 0), axis_parent=(0, 1, 0), name="pin")
    m.add_loop_joint("revolute", "crank2", "bar", anchor_parent=(0, 0, -ARM / 2),
                     anchor_child=(SPAN / 2, 0, 0), axis_parent=(0, 1, 0))
    m.add_geom("bar", "sphere", radius=RADIUS, friction=0.0)
    m.add_ground(height=-ARM * np.cos(REST) - RADIUS, friction=0.0)
    return m


def test_a_parallelogram_resting_on_its_bar_carries_the_cranks_through_the_loop():
    """At rest on a frictionless ground the contact's normal force N balances the mechanism:
    with the cranks at angle t, N l sin t = (m_bar + 2 m_crank / 2) g l sin t, so each step's
    impulse is (m_bar + m_crank) g dt, whatever t; the mechanism stays where it is."""
    sim = rt.Simulation(_parallelogram(), integrator="nullspace_rk4", dt=1e-3)
    sim.set_joint_position("crank1", [REST + 0.02])
    sim.step(1500)
    (contact,) = sim.contacts()
    assert contact["impulse"][2] == pytest.approx((BAR + CRANK) * G * 1e-3, rel=1e-4)
    assert np.allclose(sim.qpos()[:2], REST, atol=1e-5)
    assert np.max(np.abs(sim.qvel())) < 1e-12
    assert sim.constraint_error() < 1e-9
    # it stays: the lift is first order on the turning cranks, so the bar sinks 12 nm/s
    height = sim.pose("bar")[0][2]
    sim.step(10000)
    assert abs(sim.pose("bar")[0][2] - height) < 1e-6


def test_the_mechanism_falling_onto_the_ground_loses_energy_and_stays_closed():
    sim = rt.Simulation(_parallelogram(), integrator="nullspace_rk4", dt=1e-3)
    sim.set_qpos([1.2, 1.2, -1.2])  # cranks, and the bar level
    energy = [sim.energy()]
    for _ in range(600):
        sim.step()
        energy.append(sim.energy())
        assert sim.constraint_error() < 1e-9
    assert np.all(np.diff(energy) <= 1e-9 * abs(energy[0]))
    assert sim.contacts() and np.max(np.abs(sim.qvel())) < 1e-9


def test_schemes_without_loop_contacts_refuse_them():
    with pytest.raises(ValueError, match="does not step contacts on a model with loop joints"):
        rt.Simulation(_parallelogram(), integrator="energy_momentum", dt=1e-3)
    with pytest.raises(ValueError, match="does not batch contacts on a model with loop joints"):
        rt.Batch(_parallelogram(), 2, integrator="nullspace_rk4", dt=1e-3)
