"""A refusal never sends a user in circles: every scheme it names steps the whole model.

Each model below has one or more features some scheme does not step (joint dampers, limits
that rebound, loop joints, contacts, servos beyond an explicit scheme's stable
range).  For every scheme of the registry: it either builds the simulation, or refuses with a
message whose named alternatives each build it -- and the schemes named are exactly the
product schemes that build it.
"""
import ast
import re

import pytest

import rtrigid as rt
from rtrigid import integrators


def _pendulum(*, damping=0.0, limit_restitution=0.0, ground=False):
    m = rt.Model()
    m.add_body("base", 2.0, (0.1, 0.1, 0.1))
    m.add_body("arm", 1.0, (0.02, 0.02, 0.01), shape=("sphere", {"radius": 0.05}))
    m.add_joint("fixed", None, "base")
    limits = (-1.0, 1.0) if limit_restitution else None
    m.add_joint("revolute", "base", "arm", anchor_parent=(0.0, 0.0, -0.1),
                anchor_child=(0.0, 0.0, 0.2), axis_parent=(0.0, 1.0, 0.0), damping=damping,
                limits=limits, limit_restitution=limit_restitution)
    if ground:
        m.add_ground(height=-5.0)
    return m


def _four_bar(damping=0.0):
    m = rt.scenarios.build("four_bar").model
    if damping:
        m.joints[0].damping = damping
    return m


def _stiff_servo_with_damper():
    """A servo beyond nullspace_rk4's stable range on a damped joint: the explicit schemes
    refuse the gain, and energy_momentum (implicit, with joint dampers) steps it."""
    m = _pendulum(damping=0.1)
    m.add_actuator(1, "position", kp=1e7, kv=0.0)
    return m


MODELS = {
    "damper": lambda: _pendulum(damping=0.3),
    "bouncing limit": lambda: _pendulum(limit_restitution=0.5),
    "contacts": lambda: _pendulum(ground=True),
    "loop": _four_bar,
    "loop with a damper": lambda: _four_bar(damping=0.2),
    "bodies on a ground": lambda: rt.scenarios.build("ball_on_incline").model,
    "stiff servo on a damped joint": _stiff_servo_with_damper,
}


def _builds(model, name):
    try:
        rt.Simulation(model, name, 1e-3)
    except ValueError as e:
        return str(e)
    return None


def _named(message):
    found = re.search(r"schemes that step this model(?: batched)?: (\[.*?\])", message)
    if found:
        return ast.literal_eval(found.group(1))
    found = re.search(r"or use ([\w ]+?), whose servos", message)
    return found.group(1).split(" or ") if found else []


@pytest.mark.parametrize("case", list(MODELS))
def test_every_scheme_a_refusal_names_steps_the_whole_model(case):
    model = MODELS[case]()
    outcome = {name: _builds(model, name) for name in integrators.names()}
    stepping = [n for n in integrators.product_names() if outcome[n] is None]
    assert outcome != {n: None for n in outcome}, "each case is refused by some scheme"
    assert integrators.for_model(model) == stepping or case.startswith("stiff servo")
    for name, why in outcome.items():
        if why is None:
            continue
        named = _named(why)
        for other in named:
            assert outcome[other] is None, f"{name} names {other}, which refuses: {outcome[other]}"
        if why.startswith("integrator:"):
            # a scheme's refusal names every product scheme that steps the model
            assert named == stepping, (name, why)
            assert named or "no scheme steps this model as a whole" in why


def test_a_refusal_of_a_batch_names_the_schemes_that_batch_the_model():
    model = _four_bar()
    why = integrators.get("semi_implicit_euler").refusal(
        "tree", model.inbound_joints(), model.loop_joints, model.actuators, batched=True)
    named = _named(why)
    assert named == integrators.for_model(model, batched=True)
    assert named and all(integrators.get(n).batched_loops for n in named)


def test_the_capability_table_is_the_registry():
    table = integrators.capability_table()
    rows = [line for line in table.splitlines()[2:]]
    assert [re.match(r"\| `(\w+)`", r).group(1) for r in rows] == integrators.product_names()
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    for row in rows:
        cells = dict(zip(header, (c.strip() for c in row.strip("|").split("|"))))
        entry = integrators.get(cells["scheme"].strip("`"))
        assert cells["closed loops"] == ("yes" if entry.loops else "no")
        assert cells["contacts"] == ("yes" if entry.contacts else "no")
        springs = "not with loops" if entry.loops and not entry.loop_springs else "yes"
        assert cells["joint springs and dampers"] == (springs if entry.joint_springs else "no")
        rotors = "not with loops" if entry.loops and not entry.loop_armature else "yes"
        assert cells["joint armature"] == (rotors if entry.armature else "no")
