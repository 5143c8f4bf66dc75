"""The Franka Panda from its URDF picks a 4 cm cube up from a table with its two fingers
(one servo, the second finger mimic-coupled to the first), lifts it 10 cm and holds it 5 s:
the ``panda_grasp`` demo, stepped as the viewer steps it (its script called before every
step)."""
import numpy as np
import pytest

pytest.importorskip("pybullet_data")

from rtrigid.demos import DEMOS, robots  # noqa: E402


def _run(sim, script, seconds):
    for _ in range(round(seconds / sim.dt)):
        script(sim)
        sim.step()


def test_the_panda_lifts_a_cube_from_the_table_and_holds_it_without_slip():
    demo = DEMOS["panda_grasp"]
    sim = demo.build()
    script = demo.controller(sim)
    _run(sim, script, 3.7)  # above it, down, the gripper closed, lifted (by 3.6 s)
    held = script.cube_in_hand(sim)
    lifted = sim.pose("cube")[0][2] - robots.CUBE_AT[2]
    fingers = sim.qpos()[7:9]
    assert 0.095 <= lifted <= 0.105
    assert abs(fingers[0] - fingers[1]) < 1e-12  # the mimic coupling: one motion
    assert abs(fingers[0] - robots.CUBE_HALF) < 1e-3  # closed on the cube's faces
    _run(sim, script, 5.0)
    slip = np.linalg.norm(script.cube_in_hand(sim) - held)
    assert slip <= 1e-3, slip
    assert sim.pose("cube")[0][2] - robots.CUBE_AT[2] >= 0.095
    # the cube touches the fingers only: both of them, neither the table nor the floor
    names = [None if c["other"] is None else sim.names[c["other"]] for c in sim.contacts()]
    touching = {other if c["name"] == "cube" else c["name"]
                for c, other in zip(sim.contacts(), names) if "cube" in (c["name"], other)}
    assert touching == {"panda_leftfinger", "panda_rightfinger"}, touching
    assert sim.constraint_error() < 1e-12
