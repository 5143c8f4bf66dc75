"""Static friction holds: a box at rest on a slope inside its friction cone stays put under
every contact scheme at game-sized steps, and one outside it slides at the analytic rate.

The reference is Coulomb's law on an incline: at rest while tan(theta) < mu, else the
acceleration g (sin(theta) - mu cos(theta)) down the slope.  Without anchors the free flight's
slide, which the contact impulse stops but does not undo, made the box creep down at
g sin(theta) dt / 2 (semi-implicit Euler: g sin(theta) dt) per second of rest.

The scene is :mod:`studies.resting_contact`'s, which prints the figures.
"""
import numpy as np
import pytest

import rtrigid as rt

from studies.resting_contact import G, MU, SCHEMES, STEPS, creep, slope_box


@pytest.mark.parametrize("dt", STEPS)
@pytest.mark.parametrize("integrator", SCHEMES)
def test_a_box_inside_its_friction_cone_stays_put_on_a_slope(integrator, dt):
    theta = np.arctan(0.3)
    sim, box = slope_box(integrator, dt, theta)
    # without anchors 1.4-47 mm/s (1/2 or 1 times g sin(theta) dt)
    assert creep(sim, box, dt) <= 0.02e-3  # m/s
    assert sim.contacts()  # it rests on the slope, it did not jump off it


@pytest.mark.parametrize("dt", STEPS)
@pytest.mark.parametrize("integrator", SCHEMES)
def test_a_box_outside_its_friction_cone_slides_at_coulombs_rate(integrator, dt):
    theta = np.arctan(0.7)
    sim, box = slope_box(integrator, dt, theta)
    seconds = 2.0
    sim.step(int(round(seconds / dt)))
    speed = np.linalg.norm(sim.velocity(box)[0])
    assert speed == pytest.approx(G * (np.sin(theta) - MU * np.cos(theta)) * seconds,
                                  rel=0.02)


@pytest.mark.parametrize("dt", (1e-3, 1.0 / 60.0))
@pytest.mark.parametrize("integrator", SCHEMES)
def test_static_friction_holds_on_a_tree_too(integrator, dt):
    sim, box = slope_box(integrator, dt, tree=True)
    assert creep(sim, box, dt) <= 0.02e-3


@pytest.mark.parametrize("integrator", SCHEMES)
def test_a_box_slides_at_coulombs_rate_on_a_tree_too(integrator):
    theta = np.arctan(0.7)
    sim, box = slope_box(integrator, 1.0 / 60.0, theta, tree=True)
    sim.step(120)
    assert np.linalg.norm(sim.velocity(box)[0]) == pytest.approx(
        G * (np.sin(theta) - MU * np.cos(theta)) * 2.0, rel=0.02)


@pytest.mark.parametrize("integrator", ("nullspace_rk4", "semi_implicit_euler"))
def test_a_ball_on_a_gentle_slope_still_rolls(integrator):
    """A ball released on a 2 degree slope rolls at 5/7 g sin(theta): friction holds its
    contact point, not the ball."""
    theta = np.radians(2.0)
    n = np.array([-np.sin(theta), 0.0, np.cos(theta)])
    m = rt.Model(gravity=(0.0, 0.0, -G))
    r = 0.1
    m.add_body("ball", 1.0, (0.4 * r * r,) * 3, shape=("sphere", {"radius": r}), friction=MU)
    m.add_ground(0.0, tuple(n), friction=MU)
    sim = rt.Simulation(m, integrator=integrator, dt=1.0 / 60.0)
    sim.set_position("ball", r * n)
    sim.step(60)
    down = np.array([-np.cos(theta), 0.0, -np.sin(theta)])
    a = 5.0 / 7.0 * G * np.sin(theta)
    assert sim.velocity("ball")[0] @ down == pytest.approx(a, rel=0.01)
    # and it is where rolling puts it, within the scheme's error (semi-implicit Euler's
    # position runs a step ahead: 3 % here): no anchor held its contact back
    assert (sim.pose("ball")[0] - r * n) @ down == pytest.approx(a / 2.0, rel=0.04)
