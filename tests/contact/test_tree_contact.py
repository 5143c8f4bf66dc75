"""Contacts through joints: links of a tree, pivoted and free bodies in a model with
joints touch the ground and each other; the impulses act through the mechanism (the tree
backend's rates), the push-out moves the tree's coordinates, and no contact adds energy."""
import numpy as np
import pytest

import rtrigid as rt
from tests.helpers import random_contact_chain

G = 9.81
SCHEMES = ("nullspace_rk4", "energy_momentum", "energy_momentum4")
CAPSULE = ("capsule", {"radius": 0.03, "half_length": 0.2})
LINK_INERTIA = (0.014, 0.014, 0.0005)


def _pendulum(n=2, pivot=0.6, box=None, first=False):
    """n capsule links (0.4 m) hanging from a hinge about x at height ``pivot``, and
    optionally a free box (half extents ``box``) added first or last."""
    m = rt.Model(gravity=(0.0, 0.0, -G))
    m.add_ground(friction=0.5)

    def add_box():
        m.add_body("box", 2.0, _box_inertia(2.0, box), shape=("box", {"half_extents": box}))

    if box is not None and first:
        add_box()
    parent = None
    for i in range(n):
        name = f"link{i}"
        m.add_body(name, 1.0, LINK_INERTIA, shape=CAPSULE)
        m.add_joint("revolute", parent, name,
                    anchor_parent=(0.0, 0.0, pivot) if parent is None else (0.0, 0.0, -0.2),
                    anchor_child=(0.0, 0.0, 0.2), axis_parent=(1.0, 0.0, 0.0))
        parent = name
    if box is not None and not first:
        add_box()
    return m


def _box_inertia(mass, half):
    a, b, c = (2.0 * np.asarray(half, float)) ** 2
    return mass / 12.0 * np.array([b + c, a + c, a + b])


def _deepest(sim, radius=0.03, half_length=0.2):
    """How far the capsule links of ``sim`` lie below the ground (z = 0) at the end of the
    step (the contacts' depths are those before the push-out)."""
    worst = 0.0
    for x, (w, a, b, c) in zip(sim.x, sim.q):
        axis = np.array([2 * (a * c + w * b), 2 * (b * c - w * a), 1 - 2 * (a * a + b * b)])
        low = min(x[2] + half_length * axis[2], x[2] - half_length * axis[2]) - radius
        worst = max(worst, -low)
    return worst


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_double_pendulum_dropped_on_the_ground_comes_to_rest_on_it(scheme):
    """Released from near horizontal, its lower link hits the ground (the pivot is 0.6 m
    up, the links 0.8 m): it comes to rest lying on it, never more than 1 mm in, with its
    joints closed, and the contact steps never add energy (energy_momentum keeps it exactly
    in flight, so every rise there would be the contacts')."""
    sim = rt.Simulation(_pendulum(), scheme, 1 / 240)
    sim.set_joint_position(0, [1.5])
    energy = [sim.energy()]
    deepest = 0.0
    touched = False
    for _ in range(720):
        sim.step(1)
        energy.append(sim.energy())
        deepest = max(deepest, _deepest(sim))
        touched = touched or bool(sim.contacts())
    assert touched
    assert deepest <= 1e-3
    assert np.max(np.abs(sim.qvel())) < 1e-4  # at rest
    assert sim.constraint_error() < 1e-12
    # every body above the ground (capsule radius 0.03), within the 1 mm
    for c in sim.contacts():
        assert c["other"] is None and c["impulse"][2] >= 0.0
    assert sim.x[1, 2] < 0.3  # the lower link lies low, on the ground
    rise = np.max(np.diff(energy))
    if scheme == "nullspace_rk4":
        assert rise < 1e-6 * energy[0]  # RK4's own flight error only
    else:
        assert rise <= 1e-12 * energy[0]
    assert energy[-1] < energy[0] - 1.0  # the impacts took energy out


@pytest.mark.parametrize("scheme", SCHEMES[:2])
def test_a_swinging_link_pushes_a_free_box(scheme):
    """A one-link pendulum swings through the place of a box resting on the ground: the
    box is pushed along the swing (+y), no faster than the link's tip was moving and not
    sideways, and the impact adds no energy."""
    m = _pendulum(n=1, pivot=0.5, box=(0.05, 0.05, 0.05))
    sim = rt.Simulation(m, scheme, 1 / 480)
    box = sim.names.index("box")
    sim.set_position(box, (0.0, 0.06, 0.05))
    sim.set_joint_position(0, [-1.2])  # swung back to -y, will swing through y = 0
    tip_speed, e0, hit, peak = 0.0, sim.energy(), False, 0.0
    for _ in range(240):
        before = sim.energy()
        sim.step(1)
        hit = hit or any(c["other"] is not None for c in sim.contacts())
        if not hit:
            tip_speed = abs(sim.qvel()[0]) * 0.43
        peak = max(peak, sim.v[box, 1])
        if scheme == "energy_momentum":
            assert sim.energy() <= before + 1e-12 * e0
    assert hit
    assert sim.x[box, 1] > 0.065  # pushed along the swing
    assert 0.1 < peak <= tip_speed
    assert abs(sim.x[box, 0]) < 1e-5  # the swing's plane is the box's symmetry plane
    assert abs(sim.x[box, 2] - 0.05) < 2e-3  # still on the ground, not thrown through it
    assert sim.energy() < e0


def test_bodies_joined_by_a_joint_do_not_collide_with_each_other():
    """The two links overlap at their hinge (capsule ends), yet no contact joins them."""
    sim = rt.Simulation(_pendulum(pivot=2.0), "nullspace_rk4", 1 / 240)
    sim.set_joint_position(1, [1.0])
    sim.step(20)
    assert sim.contacts() == []


def _order_run(first):
    m = _pendulum(n=1, pivot=0.5, box=(0.05, 0.05, 0.05), first=first)
    sim = rt.Simulation(m, "nullspace_rk4", 1 / 480)
    sim.set_position("box", (0.01, 0.06, 0.06))
    sim.set_angular_velocity("box", (0.5, 1.0, 3.0))
    sim.set_joint_position(0, [-1.2])
    out, pairs = [], set()
    for i in range(240):
        sim.step(1)
        pairs |= {(c["name"], None if c["other"] is None else sim.names[c["other"]])
                  for c in sim.contacts()}
        if i % 60 == 59:
            out.append([np.r_[sim.x[sim.names.index(n)], sim.q[sim.names.index(n)]]
                        for n in ("link0", "box")])
    return np.array(out), sim, pairs


def test_results_are_bit_identical_whatever_order_the_bodies_were_added_in():
    """A link swings into a spinning free box on the ground; the box added before the link or
    after it: the same trajectory, bit for bit."""
    a, sa, pa = _order_run(False)
    b, sb, pb = _order_run(True)
    assert sa.names != sb.names
    assert any(None not in p and "box" in p for p in pa)  # the box touched a link
    assert pa == pb
    assert np.array_equal(a, b)


STAND = rt.scenarios.QUADRUPED_STAND


@pytest.mark.parametrize("scheme", SCHEMES + ("semi_implicit_euler",))
def test_a_quadruped_stands_on_its_feet_carrying_its_weight(scheme):
    """Dropped from 2 cm, it settles on its four feet at the height its geometry gives, and
    the feet's normal impulses per step carry its weight m g (within 0.5 %)."""
    dt = 1 / 240
    sim = rt.scenarios.build("quadruped_on_ground", integrator=scheme, dt=dt)
    assert abs(sim.x[0, 2] - STAND - 0.02) < 1e-12
    sim.step(480)
    assert abs(sim.x[0, 2] - STAND) < 1e-3
    assert np.max(np.abs(sim.qvel())) < 1e-3
    cs = sim.contacts()
    feet = {c["name"] for c in cs if c["other"] is None}
    assert feet == {"leg0", "leg1", "leg2", "leg3"}
    weight = 5.2 * G
    assert abs(sum(c["impulse"][2] for c in cs) / dt - weight) < 5e-3 * weight


@pytest.mark.parametrize("scheme", ("nullspace_rk4", "semi_implicit_euler"))
def test_the_quadruped_stands_as_mujoco_s_twin_does(scheme):
    """The same model in MuJoCo (mujoco_ref.build_tree with contacts: its default soft
    contacts, Euler): the torso's standing height agrees within 2 mm (MuJoCo's soft contact
    sinks by about a millimetre) and the total normal force within 1 %."""
    mujoco = pytest.importorskip("mujoco")
    from rtrigid.references import mujoco_ref

    dt = 1 / 240
    sim = rt.scenarios.build("quadruped_on_ground", integrator=scheme, dt=dt)
    mm, md, qadr, _ = mujoco_ref.build_tree(sim.model, dt=dt, integrator="Euler",
                                            contacts=True)
    md.qpos[qadr] = sim.qpos()
    for _ in range(480):
        mujoco.mj_step(mm, md)
    force = np.zeros(6)
    total = 0.0
    for i in range(md.ncon):
        mujoco.mj_contactForce(mm, md, i, force)
        total += force[0]
    sim.step(480)
    mine = sum(c["impulse"][2] for c in sim.contacts()) / dt
    assert md.ncon >= 4
    assert abs(md.xpos[1, 2] - sim.x[0, 2]) < 2e-3
    assert abs(total - mine) < 0.01 * mine


@pytest.mark.parametrize("scheme", SCHEMES[:2])
def test_an_arm_under_a_position_servo_presses_on_the_ground(scheme):
    """A one-link arm hinged 0.3 m up, its servo aiming the 0.4 m link 0.5 rad below the
    ground: it rests on the ground (<= 1 mm in) and the torques about the hinge balance --
    servo kp (target - angle), gravity's and the contact's (from the reported impulses)."""
    m = rt.Model(gravity=(0.0, 0.0, -G))
    m.add_ground(friction=0.5)
    m.add_body("arm", 1.0, LINK_INERTIA, shape=CAPSULE)
    m.add_joint("revolute", None, "arm", anchor_parent=(0.0, 0.0, 0.3),
                anchor_child=(0.0, 0.0, 0.2), axis_parent=(1.0, 0.0, 0.0), name="shoulder")
    kp = 20.0
    m.add_actuator("shoulder", "position", kp=kp)
    dt = 1 / 240
    sim = rt.Simulation(m, scheme, dt)
    sim.set_joint_position(0, [1.0])
    sim.set_control(0, 0.0)  # hanging straight down would be 0.1 m below the ground
    sim.step(960)
    angle = sim.qpos()[0]
    cs = sim.contacts()
    assert cs and _deepest(sim) <= 1e-3 and max(c["depth"] for c in cs) <= 1e-3
    assert abs(sim.qvel()[0]) < 1e-4
    pivot = np.array([0.0, 0.0, 0.3])
    axis = np.array([1.0, 0.0, 0.0])
    contact = sum(np.cross(c["point"] - pivot, c["impulse"] / dt) @ axis for c in cs)
    gravity = np.cross(sim.x[0] - pivot, (0.0, 0.0, -G)) @ axis
    servo = kp * (0.0 - angle)
    # within 0.5 %: over a step's flight the arm sinks by alpha dt^2 / 2 before the contact
    # stops it, which changes the servo's torque by about kp alpha dt^2 / 4 (0.2 % here)
    assert abs(servo + gravity + contact) < 5e-3 * abs(servo)
    assert abs(contact) > 1.0  # it does press


def _drops(count, seed):
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(count):
        m = random_contact_chain(rng)
        sim = rt.Simulation(m, "energy_momentum", 1 / 240)
        q = rng.normal(size=4)
        sim.set_position(0, (0.0, 0.0, rng.uniform(0.3, 0.8)))
        sim.set_orientation(0, q / np.linalg.norm(q))
        sim.set_velocity(0, rng.normal(size=3))
        sim.set_angular_velocity(0, rng.normal(size=3) * 3)
        for _ in range(240):
            e = sim.energy()
            scale = sim.kinetic_energy() + abs(sim.potential_energy()) + 1e-3
            sim.step(1)
            worst = max(worst, (sim.energy() - e) / scale)
    return worst


def test_random_drops_of_random_chains_never_gain_energy():
    """Under energy_momentum (exact in flight), over random floating chains dropped with random
    spins, no step -- contact events included -- raises the energy beyond round-off."""
    assert _drops(6, 1) < 1e-11


@pytest.mark.slow
def test_many_random_drops_of_random_chains_never_gain_energy():
    assert _drops(60, 2) < 1e-11


def test_snapshot_restore_is_bit_exact_with_tree_contacts():
    sim = rt.scenarios.build("quadruped_on_ground")
    sim.step(100)
    snap = sim.snapshot()
    sim.step(50)
    x1 = sim.x.copy()
    sim.restore(snap)
    sim.step(50)
    assert np.array_equal(sim.x, x1)


def test_spin_friction_on_a_jointed_model_is_refused_naming_the_field():
    m = _pendulum()
    m.bodies[0].torsional_friction = 0.01
    with pytest.raises(ValueError, match="^torsional_friction:"):
        rt.Simulation(m, "nullspace_rk4", 1 / 240)
