"""Contacts under semi_implicit_euler (both backends): the contact solve after Euler's free
flight, with the event's energy budget taken from the step's start
(:func:`rtrigid.contact.solver.flight_allowance`): a resting box stays exactly at rest, a
sliding box stops where Coulomb's law says, a bouncing ball keeps e^2 of its energy per bounce,
and no contact event ends a step with more energy than the step began with or the flight
left; a falling chain comes to rest.  (The stack and the quadruped stand, and the sliding
box stops where PyBullet's semi-implicit Euler stops, in tests/contact/test_contact.py and
tests/contact/test_tree_contact.py, parametrized with the scheme.)"""
import numpy as np
import pytest

import rtrigid as rt
from tests.helpers import random_contact_chain, random_drop

G = 9.81
EULER = "semi_implicit_euler"


def _box(dt, friction=0.5):
    """A 0.2 m cube of 1 kg resting on the ground (both of ``friction``)."""
    m = rt.Model(gravity=(0.0, 0.0, -G))
    m.add_ground(friction=friction)
    m.add_body("b", 1.0, (1.0 / 150.0,) * 3, shape=("box", {"half_extents": (0.1, 0.1, 0.1)}),
               friction=friction)
    sim = rt.Simulation(m, EULER, dt)
    sim.set_position("b", (0.0, 0.0, 0.1))
    return sim


@pytest.mark.parametrize("dt", (1e-3, 1 / 60))
def test_a_box_resting_on_the_ground_stays_exactly_at_rest(dt):
    """Over 10 s its centre moves by round-off only, it never ends a step below the ground,
    and the depth the flight digs before the solve takes it out is Euler's fall of a step,
    g dt^2 (9.8 um at 1 ms, 2.7 mm at 1/60)."""
    sim = _box(dt)
    x0 = sim.pose("b")[0].copy()
    drift = sink = deepest = 0.0
    for _ in range(int(round(10.0 / dt))):
        sim.step(1)
        x = sim.pose("b")[0]
        drift = max(drift, np.abs(x - x0).max())
        sink = max(sink, 0.1 - x[2])
        deepest = max([deepest] + [c["depth"] for c in sim.contacts()])
    assert drift < 1e-15 and sink <= 0.0
    assert deepest == pytest.approx(G * dt * dt, rel=1e-9)
    assert np.abs(sim.velocity("b")[0]).max() < 1e-15
    assert np.abs(sim.velocity("b")[1]).max() < 1e-15


@pytest.mark.parametrize("dt", (1e-3, 1 / 240, 1 / 60))
def test_a_sliding_box_stops_where_coulomb_says_and_rests_without_creep(dt):
    """From 2 m/s at mu = 0.5 it stops after v^2 / (2 mu g) = 0.4077 m plus the step's
    flight at the speed before friction acts, dt v / 2 (the contact solve follows the flight:
    0.25 % at 1 ms, 1 % at 1/240, 4 % at 1/60), to 5e-4 of the distance; then it stays."""
    sim = _box(dt)
    sim.set_velocity("b", (2.0, 0.0, 0.0))
    sim.step(int(round(0.6 / dt)))
    stop = sim.pose("b")[0].copy()
    assert stop[0] == pytest.approx(2.0 ** 2 / (2 * 0.5 * G) + 0.5 * dt * 2.0, rel=5e-4)
    # straight on and flat (the Gauss-Seidel sweeps over its four corners turn it: at 1/60
    # 2e-6 m sideways, and it ends tilted, its centre 1.8e-6 m up)
    assert abs(stop[1]) < 1e-5 and abs(stop[2] - 0.1) < 1e-5
    assert np.linalg.norm(sim.velocity("b")[0]) < 1e-12
    sim.step(int(round(2.0 / dt)))
    assert np.abs(sim.pose("b")[0] - stop).max() < 1e-12


def _ball(e, dt):
    r = 0.1
    m = rt.Model(gravity=(0.0, 0.0, -G))
    m.add_ground(restitution=e)
    m.add_body("b", 1.0, (0.004,) * 3, shape=("sphere", {"radius": r}), restitution=e)
    sim = rt.Simulation(m, EULER, dt)
    sim.set_position("b", (0.0, 0.0, 1.0 + r))
    return sim, G * r  # the energy at rest on the ground


@pytest.mark.parametrize("e", (0.5, 0.8, 1.0))
def test_a_bouncing_ball_keeps_e_squared_per_bounce_and_no_contact_adds_energy(e):
    """Dropped from 1 m at dt = 1 ms: the energy above rest at each apex is e^2 times the
    last (within 1 %, apexes above 0.1 m: Euler's own flight loses g dt T / (2 H) of it per
    bounce of height H and flight time T, 0.44 % from 1 m), and no step with a contact ends
    with more energy than it began with (Euler's flight under gravity loses m g^2 dt^2 / 2 a
    step; the event may not give it back)."""
    dt = 1e-3
    sim, rest = _ball(e, dt)
    apexes = [sim.energy() - rest]
    rise, vz, bounces = -np.inf, 0.0, 0
    for _ in range(int(3.0 / dt)):
        e0 = sim.energy()
        sim.step(1)
        if sim.contacts():
            rise = max(rise, sim.energy() - e0)
        v = sim.velocity("b")[0][2]
        if vz > 0.0 >= v:
            apexes.append(sim.energy() - rest)
        if vz <= 0.0 < v:
            bounces += 1
        vz = v
    assert bounces >= 3 and -np.inf < rise <= 1e-14 * apexes[0]
    ratios = [b / a / e ** 2 for a, b in zip(apexes, apexes[1:]) if b > 0.1 * G]
    assert len(ratios) >= 1
    assert all(0.99 < r <= 1.0 + 1e-3 for r in ratios), ratios


def _flight_twin(model):
    """The same model without its grounds: one step of it from a state is the free flight
    of the contact model's step from that state."""
    import copy

    twin = copy.deepcopy(model)
    twin.grounds.clear()
    return twin


def _worst_event_gain(sim, twin, steps, copy_state):
    """The largest energy a step's contact event added beyond both the step's start and the
    free flight's end (the rule), relative to the energy's scale; copy_state(sim, twin)
    gives the twin sim's state."""
    worst = -np.inf
    for _ in range(steps):
        copy_state(sim, twin)
        start = sim.energy()
        twin.step(1)
        sim.step(1)
        if sim.contacts():
            scale = sim.kinetic_energy() + abs(sim.potential_energy()) + 1e-3
            worst = max(worst, (sim.energy() - max(start, twin.energy())) / scale)
    return worst


def _copy_body(sim, twin):
    twin.set_position(0, sim.pose(0)[0])
    twin.set_orientation(0, sim.pose(0)[1])
    twin.set_velocity(0, sim.velocity(0)[0])
    twin.set_angular_velocity(0, sim.velocity(0)[1])


def test_contact_events_never_add_energy_on_random_drops_of_free_bodies():
    """Random shapes (sphere, capsule, box, cylinder, cone), spins and steps (1/60, 1/240,
    1 ms): every contact step ends with no more energy than max(the step's start, its free
    flight's end), to round-off; the free flight is that of a twin model without the
    ground."""
    rng = np.random.default_rng(23)
    worst = -np.inf
    for _ in range(12):
        sim = random_drop(rng, EULER)
        twin = rt.Simulation(_flight_twin(sim.model), EULER, sim.dt)
        worst = max(worst, _worst_event_gain(sim, twin, int(0.6 / sim.dt), _copy_body))
    assert -np.inf < worst < 1e-12


def _copy_tree(sim, twin):
    twin.set_qpos(sim.qpos())
    twin.set_qvel(sim.qvel())


def test_contact_events_never_add_energy_on_random_drops_of_chains():
    """The same rule through joints (the tree backend): floating chains of 2-3 random shapes
    joined by random hinges or ball joints, dropped with random spins at dt = 1/240."""
    rng = np.random.default_rng(5)
    worst = -np.inf
    for _ in range(4):
        m = random_contact_chain(rng)
        sim = rt.Simulation(m, EULER, 1 / 240)
        twin = rt.Simulation(_flight_twin(m), EULER, 1 / 240)
        q = rng.normal(size=4)
        sim.set_position(0, (0.0, 0.0, rng.uniform(0.3, 0.6)))
        sim.set_orientation(0, q / np.linalg.norm(q))
        sim.set_velocity(0, rng.normal(size=3))
        sim.set_angular_velocity(0, 3 * rng.normal(size=3))
        worst = max(worst, _worst_event_gain(sim, twin, 240, _copy_tree))
    assert -np.inf < worst < 1e-11


def test_a_chain_falling_on_the_floor_comes_to_rest_lying_on_it():
    """Three 0.4 m capsule links joined by hinges, dropped tilted from 0.5 m at dt = 1/240:
    they land and come to rest lying flat on the floor, exactly at their radius, with the
    joints closed.  Resting, the flight digs each contact g dt^2 deep (0.17 mm) before the
    solve takes it out (the impacts, up to one step's fall at 3 m/s: 4.8 mm)."""
    m = rt.Model(gravity=(0.0, 0.0, -G))
    m.add_ground(friction=0.5)
    parent = None
    for i in range(3):
        m.add_body(f"link{i}", 1.0, (0.014, 0.014, 0.0005),
                   shape=("capsule", {"radius": 0.03, "half_length": 0.2}))
        if parent is not None:
            m.add_joint("revolute", parent, f"link{i}", anchor_parent=(0.0, 0.0, -0.2),
                        anchor_child=(0.0, 0.0, 0.2), axis_parent=(1.0, 0.0, 0.0))
        parent = f"link{i}"
    sim = rt.Simulation(m, EULER, 1 / 240)
    sim.set_orientation(0, rt.quat.from_rotvec(np.array([1.2, 0.0, 0.0])))
    sim.set_position(0, (0.0, 0.0, 0.5))
    e0 = sim.energy()
    sim.step(240)
    deepest = 0.0
    for _ in range(720):
        sim.step(1)
        deepest = max([deepest] + [c["depth"] for c in sim.contacts()])
    assert deepest <= 1.001 * G / 240 ** 2
    assert np.max(np.abs(sim.qvel())) < 1e-12 and sim.constraint_error() < 1e-12
    np.testing.assert_allclose(sim.x[:, 2], 0.03, rtol=0, atol=1e-12)  # flat on the floor
    assert sim.energy() < e0
