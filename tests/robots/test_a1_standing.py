"""The Unitree A1 from pybullet's URDF, its base free, standing on its collision geometry on 12
position servos (the ``a1_standing`` demo model), against MuJoCo compiling the same file with
the same servos, floor and friction: its base height after 2 s within 1 cm of MuJoCo's, no
contact deeper than 2 mm at any step, and a base that stays put (within 1 cm) from 2 s to
10 s."""

import numpy as np
import pytest

pytest.importorskip("pybullet_data")
mujoco = pytest.importorskip("mujoco")

from rtrigid.demos import robots  # noqa: E402
from rtrigid.tools import mujoco_ref  # noqa: E402

DT = 1e-3
FRICTION = 0.8  # robots.a1_standing's ground


def _mujoco_twin(sim):
    """MuJoCo's model of the same URDF, servos, floor and friction, at ``sim``'s state."""
    m, d = mujoco_ref.servoed_on_floor(sim, robots.path(robots.A1), dt=DT, friction=FRICTION)
    assert m.nu == 12 and m.ngeom == 23
    return m, d


@pytest.mark.slow
@pytest.mark.parametrize("integrator", ["semi_implicit_euler", "nullspace_rk4"])
def test_the_a1_stands_on_its_servos_as_in_mujoco(integrator):
    sim = robots.a1_standing(integrator, DT)
    m, d = _mujoco_twin(sim)
    root = m.body(1).name
    deepest = 0.0
    heights, theirs = {}, {}
    for k in range(1, round(10.0 / DT) + 1):
        sim.step(1)
        mujoco.mj_step(m, d)
        deepest = max([deepest] + [c["depth"] for c in sim.contacts()])
        if k in (round(2.0 / DT), round(10.0 / DT)):
            heights[k] = sim.link_pose(root)[0].copy()
            theirs[k] = d.qpos[0:3].copy()
    at2, at10 = round(2.0 / DT), round(10.0 / DT)
    # MuJoCo's soft contact lets its feet sink about 1.3 mm; the servos sag the same way
    assert abs(heights[at2][2] - theirs[at2][2]) < 0.01, (heights[at2], theirs[at2])
    assert 0.25 < heights[at2][2] < 0.35
    assert deepest <= 2e-3, deepest
    assert np.linalg.norm(heights[at10] - heights[at2]) <= 0.01, (heights[at2], heights[at10])
    assert np.linalg.norm(theirs[at10] - theirs[at2]) <= 0.01  # the reference stands too
    assert np.linalg.norm(sim.velocity(0)[0]) < 1e-3
