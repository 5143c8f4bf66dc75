"""Joint springs and dampers under the jointed ``energy_momentum``: the step's energy balance is
exact (the energy lost is the dampers' discrete dissipation, sum d (c1 - c0)² / h, plus what
the actuators did), the trajectory converges to a tight reference, the Newton matrix is the
residual's Jacobian, and a model with loops keeps its refusal.  Under ``energy_momentum4``
(whose stages are that step) the springs' energy is kept exactly and the order is 4."""

import numpy as np
import pytest

import rtrigid as rt
from tests.helpers import newton_error

K, REST, D = 5.0, 0.2, 0.3


def springy_chain(
    integrator="energy_momentum",
    dt=1e-3,
    servo=False,
    damping=D,
    kinds=("revolute", "prismatic", "revolute"),
    axes=((0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.3, 1.0, 0.2)),
    armature=None,
    limit=None,
    step_budget=None,
):
    """A hanging chain (by default revolute, prismatic, revolute on a skew axis), each joint
    with a spring k (c - 0.2) and a damper ``damping`` c'; ``servo``: a position servo on the first
    joint too; ``armature``: each joint's; ``limit``: (lo, hi) on the first joint;
    ``step_budget``: the Simulation's.  Started off rest and moving."""
    m = rt.Model()
    prev = None
    for i, kind in enumerate(kinds):
        b = m.add_body(f"l{i}", 1.0 + 0.5 * i, (0.02, 0.015 + 0.005 * i, 0.02 + 0.005 * i))
        m.add_joint(
            kind,
            prev,
            b,
            anchor_parent=(0, 0, 2.0) if prev is None else (0, 0, -0.25),
            anchor_child=(0, 0, 0.25),
            axis_parent=axes[i],
            stiffness=K,
            rest=REST,
            damping=damping,
            armature=armature[i] if armature else 0.0,
            limits=limit if i == 0 else None,
            name=f"j{i}",
        )
        prev = b
    if servo:
        m.add_actuator("j0", "position", kp=20.0, kv=1.0, name="s0")
    sim = rt.Simulation(m, integrator, dt, step_budget=step_budget)
    for i, n in enumerate(sim.joint_names):
        sim.set_joint_position(n, [0.7 - 0.3 * i])
        sim.set_joint_velocity(n, [1.5 - i])
    if servo:
        sim.set_control("s0", -0.4)
    return sim


def _coordinates(sim):
    return np.array([sim.joint_position(n)[0] for n in sim.joint_names])


@pytest.mark.parametrize("servo", [False, True])
@pytest.mark.parametrize("dt", [1e-3, 1.0 / 60.0])
def test_the_energy_lost_is_the_dampers_dissipation(dt, servo):
    sim = springy_chain(dt=dt, servo=servo)
    e0 = sim.energy()
    dissipated = 0.0
    c0 = _coordinates(sim)
    for _ in range(round(3.0 / dt)):
        sim.step(1)
        c1 = _coordinates(sim)
        dissipated += D * np.sum((c1 - c0) ** 2) / dt
        c0 = c1
    work = sim.actuator_work().sum()
    assert dissipated > 0.1 * e0  # the dampers took a good part of it
    assert abs(sim.energy() - e0 - work + dissipated) < 1e-9 * abs(e0)


@pytest.mark.parametrize("dt", [1e-3, 1.0 / 60.0])
def test_energy_momentum4_keeps_the_springs_energy(dt):
    """Springs without dampers: energy minus the servo's work stays put (the composition's
    stages each keep it; the middle one runs backward, so a damper's dissipation in it is
    negative and not observable from outside, hence no dampers here)."""
    sim = springy_chain("energy_momentum4", dt=dt, servo=True, damping=0.0)
    e0 = sim.energy()
    sim.step(round(3.0 / dt))
    work = sim.actuator_work().sum()
    assert abs(work) > 0.1 * abs(e0)  # the servo worked
    assert abs(sim.energy() - e0 - work) < 1e-9 * abs(e0)


def test_energy_momentum4_with_dampers_is_fourth_order_and_never_gains():
    """With the dampers: halving the step divides the error by 16 against nullspace_rk4 at
    1e-4 s, and at 1/60 s no step raises energy minus the servo's work."""
    ref = springy_chain("nullspace_rk4", dt=1e-4, servo=True)
    ref.step(10000)
    errors = []
    for dt in (0.04, 0.02, 0.01):
        sim = springy_chain("energy_momentum4", dt=dt, servo=True)
        sim.step(round(1.0 / dt))
        errors.append(np.abs(_coordinates(sim) - _coordinates(ref)).max())
    assert errors[2] < 1e-6
    assert all(12.0 < a / b < 20.0 for a, b in zip(errors, errors[1:])), errors
    sim = springy_chain("energy_momentum4", dt=1.0 / 60.0, servo=True)
    start = sim.energy()
    rises = []
    for _ in range(180):
        before = sim.energy() - sim.actuator_work().sum()
        sim.step(1)
        rises.append(sim.energy() - sim.actuator_work().sum() - before)
    assert max(rises) < 0.0 and sum(rises) < -0.1 * abs(start)  # the dampers took a part


def test_it_converges_to_the_reference_trajectory():
    """Against nullspace_rk4 at a tenth of the step (its error ~1e-10 here): second order."""
    ref = springy_chain("nullspace_rk4", dt=1e-4, servo=True)
    ref.step(10000)
    errors = []
    for dt in (4e-3, 2e-3):
        sim = springy_chain(dt=dt, servo=True)
        sim.step(round(1.0 / dt))
        errors.append(np.abs(_coordinates(sim) - _coordinates(ref)).max())
    assert errors[1] < 1e-3
    assert 3.0 < errors[0] / errors[1] < 5.0, errors  # halving the step quarters the error


@pytest.mark.parametrize(
    "kinds, axes",
    [
        (("revolute",) * 3, ((0.0, 1.0, 0.0),) * 3),
        (("prismatic",), ((0.3, 0.2, 1.0),)),
    ],
    ids=["planar_revolute_chain", "slide"],
)
def test_newton_matrix_with_joint_springs_is_the_jacobian(kinds, axes):
    """Exact (to the finite differences' 1e-8) on planar chains and a slide, as the actuators'
    terms (em_newton.actuator_stiffness; on a chain mixing slides and turns both leave out a
    coupling, 1e-4 off here, and Newton converges a little slower there)."""
    sim = springy_chain(dt=1.0 / 60.0, servo=True, kinds=kinds, axes=axes)
    sim.step(10)
    mu = sim.dt * sim.backend.nu
    assert newton_error(sim, mu) < 1e-7
    assert newton_error(sim, 1.2 * mu + 1e-3, seed=1) < 1e-7


@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum4"])
def test_loops_with_joint_springs_stay_refused(integrator):
    m = rt.Model()
    a = m.add_body("a", 1.0, (0.01, 0.01, 0.01))
    b = m.add_body("b", 1.0, (0.01, 0.01, 0.01))
    m.add_joint(
        "revolute",
        None,
        a,
        anchor_parent=(0, 0, 1),
        anchor_child=(0, 0, 0.5),
        axis_parent=(0, 1, 0),
        damping=0.1,
    )
    m.add_joint(
        "revolute",
        a,
        b,
        anchor_parent=(0, 0, -0.5),
        anchor_child=(0, 0, 0.5),
        axis_parent=(0, 1, 0),
    )
    m.add_loop_joint(
        "revolute",
        None,
        b,
        anchor_parent=(0.0, 0.0, -1.0),
        anchor_child=(0, 0, -0.5),
        axis_parent=(0, 1, 0),
    )
    with pytest.raises(ValueError, match="joint springs or dampers in a model with loop"):
        rt.Simulation(m, integrator, 1e-3)
