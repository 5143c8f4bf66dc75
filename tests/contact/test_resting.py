"""Resting contact comes to rest where a real box would: a box dropped onto a corner topples
and lies flat on a face, and ten boxes dropped from 0.5-5 m at random orientations all rest
flat (tilt at most 0.05 degrees, centres within 0.1 mm of their resting height) under every
contact scheme at 1/60 and 1/240 s.

The reference is statics: a rigid box on a plane under gravity rests only on a face (on a
corner or an edge its weight has an arm about the support).  A position correction by
translation alone used to stop boxes on a corner or an edge: it lifted the whole box by the
corner's depth, which costs all the kinetic energy the step's fall gave, so the energy rule
stopped the box there (one dropped box stood on a corner at 48.7 degrees for good).

The scene is :mod:`studies.resting_contact`'s, which prints the figures.
"""
import numpy as np
import pytest

import rtrigid as rt

from studies.resting_contact import G, HALF, MU, SCHEMES, dropped_boxes


def _tilt(sim, body):
    """Degrees between the body's nearest axis and the vertical."""
    up = rt.quat.to_matrix(sim.pose(body)[1])[2]
    return np.degrees(np.arccos(min(1.0, np.max(np.abs(up)))))


@pytest.mark.parametrize("integrator", ("nullspace_rk4", "energy_momentum"))
def test_a_box_dropped_onto_a_corner_topples_and_lies_flat_without_gaining_energy(integrator):
    m = rt.Model(gravity=(0.0, 0.0, -G))
    inertia = (2 * HALF) ** 2 / 6.0
    m.add_body("box", 1.0, (inertia,) * 3, shape=("box", {"half_extents": (HALF,) * 3}),
               friction=MU)
    m.add_ground(friction=MU)
    dt = 1.0 / 240.0
    sim = rt.Simulation(m, integrator=integrator, dt=dt)
    sim.set_position("box", (0.0, 0.0, 0.5))
    # a corner straight under the centre, tipped 0.1 rad off it: it lands on that corner
    corner = np.array([1.0, 1.0, 1.0]) / np.sqrt(3.0)
    axis = np.cross(corner, (0.0, 0.0, -1.0))
    angle = np.arccos(-corner[2]) + 0.1
    axis /= np.linalg.norm(axis)
    sim.set_orientation("box", (np.cos(angle / 2), *(np.sin(angle / 2) * axis)))
    energy = [sim.energy()]
    tilts = []
    for _ in range(int(round(3.0 / dt))):
        sim.step(1)
        energy.append(sim.energy())
        tilts.append(_tilt(sim, "box"))
    assert max(tilts[:60]) > 40.0  # it stood on its corner first
    assert _tilt(sim, "box") <= 0.05
    assert sim.pose("box")[0][2] == pytest.approx(HALF, abs=1e-4)
    assert np.max(np.diff(energy)) <= 1e-9 * energy[0]  # contact never adds energy


@pytest.mark.slow
@pytest.mark.parametrize("dt", (1.0 / 60.0, 1.0 / 240.0))
@pytest.mark.parametrize("integrator", SCHEMES)
def test_ten_dropped_boxes_come_to_rest_flat(integrator, dt):
    tilt, height = dropped_boxes(integrator, dt)
    assert tilt <= 0.05  # degrees
    assert height <= 1e-4  # m
