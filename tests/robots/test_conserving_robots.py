"""The KUKA iiwa from its URDF, with the file's joint dampers (0.5 N m s on each joint) and
7 position servos driving it to a new pose, under ``energy_momentum``: over 10 s its energy
changes by exactly the servos' work less the dampers' discrete dissipation."""

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
