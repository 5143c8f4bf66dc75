"""Robots from their files under ``energy_momentum``: the KUKA iiwa, with the file's joint
dampers (0.5 N m s on each joint), and the A1 held in the air (its file has no dampers), each
driven by position servos to a new pose; over 10 s the energy changes by exactly the servos'
work less the dampers' discrete dissipation."""

import numpy as np
import pytest

pytest.importorskip("pybullet_data")

from rtrigid.demos import robots  # noqa: E402


@pytest.mark.parametrize("dt", [1.0 / 240.0, pytest.param(1e-3, marks=pytest.mark.slow)])
def test_the_iiwa_with_its_dampers_balances_its_energy(dt):
    sim = robots.iiwa("energy_momentum", dt)
    damping = np.array(
        [sim.model.joints[sim.model.joint_index(n)].damping for n in sim.joint_names]
    )
    assert np.all(damping == 0.5)  # the file's
    sim.set_controls(np.array(robots.IIWA_POSE) + (0.8, -0.5, 0.6, 0.7, -0.4, 0.5, 0.9))
    e0 = sim.energy()
    dissipated = 0.0
    c0 = np.array([sim.joint_position(n)[0] for n in sim.joint_names])
    for _ in range(round(10.0 / dt)):
        sim.step(1)
        c1 = np.array([sim.joint_position(n)[0] for n in sim.joint_names])
        dissipated += np.sum(damping * (c1 - c0) ** 2) / dt  # the scheme's d (c1 - c0)^2 / h
        c0 = c1
    work = sim.actuator_work().sum()
    assert work > 10.0 and dissipated > 1.0  # it moved: the servos worked, the dampers took
    assert abs(sim.energy() - e0 - work + dissipated) < 1e-9 * abs(e0)
    assert sim.solver_stats()["fallback_steps"] == 0


def test_the_a1_held_in_the_air_balances_its_energy():
    sim = robots.a1("energy_momentum", 1.0 / 240.0)
    sim.set_controls(np.array(robots.A1_STANCE * 4) + np.tile((0.3, -0.4, 0.5), 4))
    e0 = sim.energy()
    sim.step(2400)
    work = sim.actuator_work().sum()
    assert abs(work) > 0.1  # the servos moved the legs (and their dampers took energy)
    assert abs(sim.energy() - e0 - work) < 1e-9 * abs(e0)
    assert sim.solver_stats()["fallback_steps"] == 0
