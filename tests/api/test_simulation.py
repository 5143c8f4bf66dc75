"""Properties of rtrigid.simulation.Simulation (and scenarios.build): reproducibility (snapshot /
restore and determinism, bit for bit), input validation that leaves the state untouched,
robustness to huge impulses, impulse and work-energy physics against hand computations, the
real-time stepping helpers and the implicit solver's fallback.
"""
import math
import warnings

import numpy as np
import pytest

import rtrigid as rt
from rtrigid import quat, scenarios
from rtrigid.model import Model
from rtrigid.simulation import Simulation, SimulationError, Snapshot

# the contract: every registered integrator (the bodies backend has a kernel for each)
INTEGRATORS = rt.integrators.names()


def _build(scenario, integrator):
    """The scenario at its own step, but semi_implicit_euler at a tenth of it: its explicit
    Euler's equations gain energy every step, and the tumbling free body at dt = 0.02 went
    non-finite at step 55 (these tests check bit-exactness, not that)."""
    if integrator == "semi_implicit_euler":
        return scenarios.build(scenario, integrator=integrator,
                               dt=0.1 * scenarios.build(scenario).dt)
    return scenarios.build(scenario, integrator=integrator)
IMPLICIT = [n for n in INTEGRATORS if rt.integrators.get(n).implicit]
NAN = float("nan")


def full_state(sim):
    """Everything a refused call must leave untouched, as copies."""
    return (sim.backend.S.copy(), sim.backend.S_prev.copy(), sim.backend.A.copy(), sim.backend.stats.copy(), sim._steps,
            sim._accumulator, sim.dropped_time, sim.t)


def assert_same_state(before, after):
    for a, b in zip(before[:4], after[:4]):
        assert np.array_equal(a, b)
    assert before[4:] == after[4:]


def random_unit_quaternion(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def free_model(rng, gravity=(0.0, 0.0, 0.0)):
    a = rng.uniform(0.2, 1.5, 3) ** 2
    mass = rng.uniform(0.5, 3.0)
    inertia = mass / 3.0 * np.array([a[1] + a[2], a[0] + a[2], a[0] + a[1]])
    m = Model(gravity=gravity)
    m.add_body("body", mass, inertia)
    return m


def random_free_sim(rng, integrator="energy_momentum", dt=0.01):
    sim = Simulation(free_model(rng), integrator, dt)
    sim.set_position(0, rng.normal(size=3))
    sim.set_orientation(0, random_unit_quaternion(rng))
    sim.set_velocity(0, rng.normal(size=3))
    sim.set_angular_velocity(0, rng.normal(size=3) * 3.0, frame="body")
    return sim


def gyro_copy(g, integrator="energy_momentum", dt=None, **kw):
    """A new Simulation on a scenario's model, in the same state."""
    sim = Simulation(g.model, integrator, g.dt if dt is None else dt, **kw)
    sim.set_orientation(0, g.q[0])
    sim.set_angular_velocity(0, g.w[0], frame="body")
    return sim


# -- reproducibility --------------------------------------------------------------------------

@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("scenario", ["gyro_top", "free_body"])
def test_snapshot_restore_is_bit_exact(scenario, integrator):
    sim = _build(scenario, integrator)
    sim.step(50)
    snap = sim.snapshot()
    assert isinstance(snap, Snapshot)
    sim.step(100)
    a, ta, stats_a = sim.backend.S.copy(), sim.t, sim.solver_stats()
    sim.restore(snap)
    assert sim.t == 50 * sim.dt
    sim.step(100)
    assert np.array_equal(sim.backend.S, a) and sim.t == ta
    assert sim.solver_stats() == stats_a
    # the snapshot is a copy: stepping after a restore does not alter it, it restores again
    sim.restore(snap)
    sim.step(100)
    assert np.array_equal(sim.backend.S, a) and sim.t == ta


def test_restore_brings_back_loads_clock_and_accumulator():
    sim = scenarios.build("free_body", dt=0.01)
    sim.apply_force(0, (1.0, 2.0, 3.0))
    sim.advance(0.025)
    snap = sim.snapshot()
    before = full_state(sim)
    sim.clear_applied()
    sim.apply_torque(0, (0.0, 0.0, 5.0))
    sim.advance(10.0)
    sim.restore(snap)
    assert_same_state(before, full_state(sim))
    assert sim.alpha == pytest.approx(0.5)
    np.testing.assert_array_equal(sim.applied(0)[0], (1.0, 2.0, 3.0))


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("scenario", ["gyro_top", "free_body", "heavy_top"])
def test_identically_built_simulations_agree_bitwise(scenario, integrator):
    a = _build(scenario, integrator)
    b = _build(scenario, integrator)
    a.step(200)
    b.step(200)
    assert np.array_equal(a.backend.S, b.backend.S) and a.t == b.t
    assert np.array_equal(a.backend.S_prev, b.backend.S_prev)


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("scenario", ["gyro_top", "free_body"])
def test_step_one_at_a_time_equals_one_call(scenario, integrator):
    a = _build(scenario, integrator)
    b = _build(scenario, integrator)
    for _ in range(100):
        a.step(1)
    b.step(100)
    assert np.array_equal(a.backend.S, b.backend.S)
    assert np.array_equal(a.backend.S_prev, b.backend.S_prev)
    assert a.t == b.t == 100 * a.dt
    assert a.solver_stats() == b.solver_stats()


# -- refused inputs ---------------------------------------------------------------------------

def _bad_calls(pivoted):
    two = Model(gravity=(0.0, 0.0, 0.0))
    two.add_body("a", 1.0, (1.0, 1.0, 1.0))
    two.add_body("b", 1.0, (1.0, 1.0, 1.0))
    snap_two = Simulation(two).snapshot()
    calls = [
        ("body", lambda s: s.pose("nope")),
        ("body", lambda s: s.velocity(3)),
        ("body", lambda s: s.set_orientation("nope", (1.0, 0.0, 0.0, 0.0))),
        ("body", lambda s: s.apply_force(-1, (1.0, 0.0, 0.0))),
        ("body", lambda s: s.apply_impulse(1, (1.0, 0.0, 0.0), (0.0, 0.0, 0.0))),
        ("body", lambda s: s.clear_applied("nope")),
        ("body", lambda s: s.interpolated_pose("nope")),
        ("omega", lambda s: s.set_angular_velocity(0, (NAN, 0.0, 0.0), frame="body")),
        ("omega", lambda s: s.set_angular_velocity(0, (1.0, 2.0), frame="body")),
        ("omega", lambda s: s.set_angular_velocity(0, (1.0, 2.0, float("inf")), frame="world")),
        ("frame", lambda s: s.set_angular_velocity(0, (1.0, 2.0, 3.0), frame="inertial")),
        ("frame", lambda s: s.set_angular_velocity(0, (1.0, 2.0, 3.0), frame=None)),
        ("q", lambda s: s.set_orientation(0, (NAN, 0.0, 0.0, 0.0))),
        ("q", lambda s: s.set_orientation(0, (1.0, 0.0, 0.0))),
        ("q", lambda s: s.set_orientation(0, (0.0, 0.0, 0.0, 0.0))),
        ("q", lambda s: s.set_orientation(0, (1e-300, 0.0, 0.0, 0.0))),
        ("x", lambda s: s.set_position(0, (0.0, NAN, 0.0))),
        ("x", lambda s: s.set_position(0, (0.0, 0.0))),
        ("v", lambda s: s.set_velocity(0, (0.0, 0.0, float("-inf")))),
        ("v", lambda s: s.set_velocity(0, [[0.0, 0.0, 1.0]])),
        ("force", lambda s: s.apply_force(0, (NAN, 0.0, 0.0))),
        ("force", lambda s: s.apply_force(0, (1.0, 0.0))),
        ("point", lambda s: s.apply_force(0, (1.0, 0.0, 0.0), point=(0.0, NAN, 0.0))),
        ("point", lambda s: s.apply_force(0, (1.0, 0.0, 0.0), point=(0.0, 0.0))),
        ("torque", lambda s: s.apply_torque(0, (0.0, 0.0, NAN))),
        ("torque", lambda s: s.apply_torque(0, "spin")),
        ("impulse", lambda s: s.apply_impulse(0, (NAN, 0.0, 0.0), (0.0, 0.0, 0.0))),
        ("impulse", lambda s: s.apply_impulse(0, (1.0, 0.0), (0.0, 0.0, 0.0))),
        ("point", lambda s: s.apply_impulse(0, (1.0, 0.0, 0.0), (0.0, float("inf"), 0.0))),
        ("point", lambda s: s.apply_impulse(0, (1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))),
        ("n", lambda s: s.step(-1)),
        ("n", lambda s: s.step(1.5)),
        ("n", lambda s: s.step(2.0)),
        ("n", lambda s: s.step(True)),
        ("n", lambda s: s.step("3")),
        ("n", lambda s: s.step(np.int64(-3))),
        ("elapsed", lambda s: s.advance(-0.001)),
        ("elapsed", lambda s: s.advance(NAN)),
        ("elapsed", lambda s: s.advance(float("inf"))),
        ("alpha", lambda s: s.interpolated_pose(0, alpha=-0.1)),
        ("alpha", lambda s: s.interpolated_pose(0, alpha=1.5)),
        ("alpha", lambda s: s.interpolated_pose(0, alpha=NAN)),
        ("snap", lambda s: s.restore("snapshot")),
        ("snap", lambda s: s.restore(None)),
        ("snap", lambda s: s.restore(snap_two)),
    ]
    if pivoted:
        calls += [
            ("x", lambda s: s.set_position(0, (0.0, 0.0, 1.0))),
            ("v", lambda s: s.set_velocity(0, (0.0, 0.0, 1.0))),
        ]
    return calls


@pytest.mark.parametrize("scenario", ["gyro_top", "free_body"])
def test_every_bad_input_refused_naming_field_state_unchanged(scenario):
    sim = scenarios.build(scenario, dt=0.01)
    sim.apply_force(0, (0.1, 0.2, 0.3), point=(1.0, 0.0, 0.0))
    sim.step(3)
    sim.advance(0.004)
    for field, call in _bad_calls(pivoted=scenario == "gyro_top"):
        before = full_state(sim)
        with pytest.raises(ValueError, match=rf"^{field}\b"):
            call(sim)
        assert_same_state(before, full_state(sim))


@pytest.mark.parametrize("dt", [0.0, -0.01, NAN, float("inf"), "fast", None])
def test_constructor_refuses_bad_dt(dt):
    with pytest.raises(ValueError, match=r"^dt"):
        Simulation(free_model(np.random.default_rng(0)), "energy_momentum", dt)


@pytest.mark.parametrize("field,kwargs", [
    ("integrator", dict(integrator="rk45")),
    ("integrator", dict(integrator=None)),
    ("max_iter", dict(max_iter=0)),
    ("max_iter", dict(max_iter=2)),
    ("max_halvings", dict(max_halvings=-1)),
    ("max_steps_per_advance", dict(max_steps_per_advance=0)),
])
def test_constructor_refuses_bad_options(field, kwargs):
    with pytest.raises(ValueError, match=rf"^{field}"):
        Simulation(free_model(np.random.default_rng(0)), **{"dt": 0.01, **kwargs})


def test_constructor_refuses_a_non_model():
    with pytest.raises(ValueError, match=r"^model"):
        Simulation("gyro_top", "energy_momentum", 0.01)


@pytest.mark.parametrize("field,args,kwargs", [
    ("name", ("nope",), {}),
    ("spin", ("gyro_top",), dict(spin=3.0)),
    ("case", ("geradin_top",), dict(case=3)),
    ("length", ("heavy_top",), dict(length=5.0)),
    ("omega_p", ("gyro_top",), dict(omega_p=0.0)),
    ("integrator", ("gyro_top",), dict(integrator="euler")),
    ("dt", ("gyro_top",), dict(dt=0.0)),
    ("dt", ("free_body",), dict(dt=NAN)),
    ("inertia", ("free_body",), dict(inertia=(1.0, 1.0, 3.0))),
])
def test_build_refuses_bad_scenarios_and_parameters(field, args, kwargs):
    with pytest.raises(ValueError, match=rf"^{field}"):
        scenarios.build(*args, **kwargs)


def test_heavy_top_length_refusal_boundary():
    """The centroidal inertia is inertia_pivot - (m L) L (1, 1, 0): positive for L < 42/11.09
    and physical (I3 <= I1 + I2) for L <= 41/11.09; lengths up to there are accepted."""
    sim = scenarios.build("heavy_top", length=0.99 * 41.0 / 11.09)
    assert np.all(sim.backend.frozen.inertia > 0.0)
    np.testing.assert_allclose(np.diag(sim.backend.frozen.jref[0]), (50.0, 42.0, 10.0), rtol=1e-12)
    with pytest.raises(ValueError, match=r"^length"):
        scenarios.build("heavy_top", length=1.01 * 42.0 / 11.09)


@pytest.mark.parametrize("length", [3.75, 5.0])
def test_heavy_top_nonphysical_length_refusal_names_length_and_advises_shorter(length):
    """Regression: 41/11.09 < L < 42/11.09 (positive, non-physical centroidal inertia) was
    refused as 'inertia: ... pass allow_nonphysical_inertia', and a too-long L was told to
    'choose a longer length', though m L^2 = (m L) L only grows with L."""
    with pytest.raises(ValueError, match=r"^length") as info:
        scenarios.build("heavy_top", length=length)
    assert "longer" not in str(info.value)
    assert "shorter" in str(info.value)


def test_model_edits_after_construction_do_not_reach_the_simulation():
    """Regression: bodies were resolved through the live Model, so one added after
    construction passed the check and then failed with IndexError."""
    sim = scenarios.build("free_body")
    sim.model.add_body("late", 1.0, (1.0, 1.0, 1.0))
    before = full_state(sim)
    with pytest.raises(ValueError, match=r"^body"):
        sim.pose("late")
    with pytest.raises(ValueError, match=r"^body"):
        sim.apply_force(1, (1.0, 0.0, 0.0))
    assert_same_state(before, full_state(sim))


# -- huge impulses ----------------------------------------------------------------------------

@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("scenario", ["free_body", "gyro_top"])
def test_huge_finite_impulse_never_produces_nan(scenario, integrator):
    rng = np.random.default_rng(7)
    outcomes = set()
    for magnitude in (1e3, 1e8, 1e30, 1e200):
        sim = scenarios.build(scenario, integrator=integrator)
        x, _ = sim.pose(0)
        direction = rng.normal(size=3)
        point = x + 0.05 * rng.normal(size=3)
        before = full_state(sim)
        try:
            sim.apply_impulse(0, magnitude * direction / np.linalg.norm(direction), point)
        except ValueError as exc:
            assert str(exc).startswith("impulse")
            assert_same_state(before, full_state(sim))
            outcomes.add("refused")
        else:
            outcomes.add("applied")
        assert np.all(np.isfinite(sim.backend.S))
        t0 = sim.t
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                sim.step(50)
            except SimulationError:
                outcomes.add("step failed")
                assert sim.t < t0 + 50 * sim.dt
        assert np.all(np.isfinite(sim.backend.S)), magnitude
        assert np.all(np.isfinite(sim.backend.S_prev)), magnitude
        assert np.isfinite(sim.energy())
    # 1e200 cannot give finite kinetic energy, 1e3 can: both branches were exercised
    assert {"refused", "applied"} <= outcomes


# -- impulse physics --------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_impulse_on_free_body_changes_momenta_by_j_and_r_cross_j(seed, integrator):
    rng = np.random.default_rng(seed)
    sim = random_free_sim(rng, integrator)
    sim.step(5)
    p0, l0 = sim.momentum()
    x, _ = sim.pose(0)
    r = x + rng.normal(size=3)
    j = rng.normal(size=3) * rng.uniform(0.1, 10.0)
    applied_before = sim.applied(0)
    sim.apply_impulse(0, j, r)
    p1, l1 = sim.momentum()
    scale_p = max(np.linalg.norm(p0), np.linalg.norm(p1))
    scale_l = max(np.linalg.norm(l0), np.linalg.norm(l1))
    np.testing.assert_allclose(p1 - p0, j, rtol=0, atol=1e-12 * scale_p)
    np.testing.assert_allclose(l1 - l0, np.cross(r, j), rtol=0, atol=1e-12 * scale_l)
    # the centre of mass does not jump, and the impulse is not a persistent load
    np.testing.assert_array_equal(sim.pose(0)[0], x)
    for a, b in zip(applied_before, sim.applied(0)):
        np.testing.assert_array_equal(a, b)
    # the momentum representation the kernels integrate agrees with the velocities
    np.testing.assert_allclose(sim.backend._P[0], sim.backend.frozen.mass[0] * sim.v[0], rtol=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_impulse_on_pivoted_top_changes_angular_momentum_about_pivot(seed):
    rng = np.random.default_rng(seed)
    sim = scenarios.build("gyro_top")
    sim.step(10)
    assert np.array_equal(sim.backend.frozen.pivot[0], np.zeros(3))
    _, l0 = sim.momentum()
    r = rng.normal(size=3) * 0.1
    j = rng.normal(size=3) * 0.01
    sim.apply_impulse(0, j, r)
    _, l1 = sim.momentum()
    scale = max(np.linalg.norm(l0), np.linalg.norm(l1))
    np.testing.assert_allclose(l1 - l0, np.cross(r, j), rtol=0, atol=1e-12 * scale)
    # the tip stays on the pivot, the centre of mass moves with the body
    assert sim.constraint_error() < 1e-15
    v, w = sim.velocity(0)
    x, _ = sim.pose(0)
    np.testing.assert_allclose(v, np.cross(w, x), rtol=0, atol=1e-14 * np.linalg.norm(v))


def test_impulse_through_the_pivot_does_nothing():
    sim = scenarios.build("gyro_top")
    before = sim.backend.S.copy()
    sim.apply_impulse(0, (3.0, -1.0, 2.0), (0.0, 0.0, 0.0))
    np.testing.assert_array_equal(sim.backend.S, before)


# -- setters ----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scenario", ["gyro_top", "free_body"])
def test_world_angular_velocity_round_trips(scenario, seed):
    rng = np.random.default_rng(seed)
    sim = scenarios.build(scenario)
    sim.set_orientation(0, random_unit_quaternion(rng))
    omega = rng.normal(size=3) * 5.0
    tol = 1e-14 * np.linalg.norm(omega)
    sim.set_angular_velocity(0, omega, frame="world")
    np.testing.assert_allclose(sim.velocity(0)[1], omega, rtol=0, atol=tol)
    # body frame: the stored body vector is R^T omega, independently via the rotation matrix
    r = quat.rotmat(sim.pose(0)[1], np.empty((3, 3)))
    np.testing.assert_allclose(sim.w[0], r.T @ omega, rtol=0, atol=tol)
    sim.set_angular_velocity(0, omega, frame="body")
    np.testing.assert_array_equal(sim.w[0], omega)
    np.testing.assert_allclose(sim.velocity(0)[1], r @ omega, rtol=0, atol=tol)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scenario", ["gyro_top", "free_body"])
def test_set_orientation_normalises(scenario, seed):
    rng = np.random.default_rng(seed)
    sim = scenarios.build(scenario)
    raw = rng.normal(size=4) * rng.uniform(1e-3, 1e3)
    sim.set_orientation(0, raw)
    x, q = sim.pose(0)
    np.testing.assert_allclose(q, raw / np.linalg.norm(raw), rtol=0, atol=1e-15)
    assert abs(np.linalg.norm(q) - 1.0) < 4e-16
    assert sim.constraint_error() < 1e-15
    if scenario == "gyro_top":
        # the centre of mass sits at L along the body axis from the pivot at the origin
        r = quat.rotmat(q, np.empty((3, 3)))
        np.testing.assert_allclose(x, r @ np.array([0.0, 0.0, scenarios.info(sim)["length"]]), atol=1e-15)


def test_set_position_and_velocity_on_a_free_body():
    rng = np.random.default_rng(3)
    sim = random_free_sim(rng)
    x, v = rng.normal(size=3), rng.normal(size=3)
    sim.set_position(0, x)
    sim.set_velocity(0, v)
    np.testing.assert_array_equal(sim.pose(0)[0], x)
    np.testing.assert_array_equal(sim.velocity(0)[0], v)
    np.testing.assert_array_equal(sim.momentum()[0], sim.backend.frozen.mass[0] * v)


# -- applied loads ----------------------------------------------------------------------------

@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_applied_loads_persist_and_are_independent_of_impulses(integrator):
    rng = np.random.default_rng(11)
    sim = random_free_sim(rng, integrator)
    f = rng.normal(size=3)
    tq = rng.normal(size=3)
    sim.apply_force(0, f)
    sim.apply_torque(0, tq)
    sim.apply_force(0, f)  # loads add up
    p0 = sim.momentum()[0]
    sim.step(20)
    np.testing.assert_array_equal(sim.applied(0)[0], 2 * f)
    np.testing.assert_array_equal(sim.applied(0)[1], tq)
    # constant force: the linear momentum grows by F t for every scheme (RK4 is exact here)
    np.testing.assert_allclose(sim.momentum()[0], p0 + 2 * f * 20 * sim.dt, rtol=1e-12)
    sim.apply_impulse(0, rng.normal(size=3), sim.pose(0)[0] + rng.normal(size=3))
    np.testing.assert_array_equal(sim.applied(0)[0], 2 * f)
    np.testing.assert_array_equal(sim.applied(0)[1], tq)
    p1 = sim.momentum()[0]
    sim.step(10)
    np.testing.assert_allclose(sim.momentum()[0], p1 + 2 * f * 10 * sim.dt, rtol=1e-12)
    sim.clear_applied(0)
    assert not np.any(sim.applied(0)[0]) and not np.any(sim.applied(0)[1])
    p2 = sim.momentum()[0]
    sim.step(10)
    np.testing.assert_allclose(sim.momentum()[0], p2, rtol=1e-13)


def test_clear_applied_all_bodies():
    m = Model(gravity=(0.0, 0.0, 0.0))
    m.add_body("a", 1.0, (1.0, 1.0, 1.0))
    m.add_body("b", 2.0, (1.0, 1.0, 1.0))
    sim = Simulation(m, "energy_momentum", 0.01)
    sim.apply_force("a", (1.0, 0.0, 0.0))
    sim.apply_torque("b", (0.0, 2.0, 0.0))
    sim.clear_applied("a")
    assert not np.any(sim.applied("a")[0])
    np.testing.assert_array_equal(sim.applied("b")[1], (0.0, 2.0, 0.0))
    sim.clear_applied()
    assert not np.any(sim.backend.A)


@pytest.mark.parametrize("seed", range(4))
def test_apply_force_at_a_point_adds_the_moment(seed):
    rng = np.random.default_rng(seed)
    sim = random_free_sim(rng)
    x = sim.pose(0)[0]
    f1, p1 = rng.normal(size=3), rng.normal(size=3)
    f2, p2 = rng.normal(size=3), rng.normal(size=3)
    t3 = rng.normal(size=3)
    sim.apply_force(0, f1, point=p1)
    sim.apply_force(0, f2, point=p2)
    sim.apply_torque(0, t3)
    force, torque = sim.applied(0)
    np.testing.assert_allclose(force, f1 + f2, rtol=1e-15)
    d1, d2 = p1 - x, p2 - x
    expected = np.array([d1[1] * f1[2] - d1[2] * f1[1], d1[2] * f1[0] - d1[0] * f1[2],
                         d1[0] * f1[1] - d1[1] * f1[0]])
    expected += np.array([d2[1] * f2[2] - d2[2] * f2[1], d2[2] * f2[0] - d2[0] * f2[2],
                          d2[0] * f2[1] - d2[1] * f2[0]])
    expected += t3
    np.testing.assert_allclose(torque, expected, rtol=1e-13, atol=1e-15)
    # a force through the centre of mass adds no moment
    sim.clear_applied()
    sim.apply_force(0, f1, point=x)
    np.testing.assert_array_equal(sim.applied(0)[1], np.zeros(3))


# -- work and energy --------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("integrator", IMPLICIT)
def test_work_energy_theorem_under_constant_force(integrator, seed):
    rng = np.random.default_rng(seed)
    sim = random_free_sim(rng, integrator, dt=0.01)
    f = rng.normal(size=3) * 5.0
    sim.apply_force(0, f)
    e0, x0 = sim.energy(), sim.pose(0)[0]
    for _ in range(4):
        sim.step(50)
        work = f @ (sim.pose(0)[0] - x0)
        assert abs(work) > 1e-3 * abs(e0)
        assert abs((sim.energy() - e0) - work) <= 1e-10 * max(abs(work), abs(e0))


# -- real-time stepping -----------------------------------------------------------------------

def test_advance_consumes_whole_steps_and_keeps_the_remainder():
    sim = scenarios.build("free_body", dt=0.01)
    assert sim.advance(0.025) == 2
    assert sim.alpha == pytest.approx(0.5, abs=1e-12)
    assert sim.t == 0.02 and sim.steps_taken == 2
    assert sim.advance(0.006) == 1
    assert sim.alpha == pytest.approx(0.1, abs=1e-12)
    assert sim.t == pytest.approx(0.03, abs=1e-15)
    assert sim.advance(0.0) == 0
    assert sim.dropped_time == 0.0


def test_interpolated_pose_spans_previous_and_current_step():
    a = scenarios.build("gyro_top", dt=0.01)
    b = scenarios.build("gyro_top", dt=0.01)
    a.step(7)
    b.step(6)
    prev_x, prev_q = b.pose(0)
    x, q = a.pose(0)
    x0, q0 = a.interpolated_pose(0, alpha=0.0)
    np.testing.assert_array_equal(x0, prev_x)
    np.testing.assert_allclose(q0, prev_q, rtol=0, atol=1e-15)
    x1, q1 = a.interpolated_pose(0, alpha=1.0)
    np.testing.assert_array_equal(x1, x)
    np.testing.assert_allclose(q1, q, rtol=0, atol=1e-15)
    xh, qh = a.interpolated_pose(0, alpha=0.5)
    np.testing.assert_allclose(xh, 0.5 * (x + prev_x), atol=1e-15)
    assert abs(np.linalg.norm(qh) - 1.0) < 1e-15
    # slerp half-way: equal angles to both ends
    assert abs(abs(qh @ q) - abs(qh @ prev_q)) < 1e-14
    # alpha=None uses the accumulator
    a.advance(0.0025)
    xa, _ = a.interpolated_pose(0)
    np.testing.assert_allclose(xa, 0.75 * a.backend.S_prev[:3] + 0.25 * a.x[0], atol=1e-15)


def test_interpolated_pose_before_the_first_step_is_the_current_pose():
    """Regression: the previous-step buffer was filled at construction, before the scenario
    set the initial orientation, so interpolation blended towards the identity pose."""
    sim = scenarios.build("gyro_top", dt=0.01)
    x, q = sim.pose(0)
    for alpha in (0.0, 0.5):
        xi, qi = sim.interpolated_pose(0, alpha=alpha)
        np.testing.assert_allclose(xi, x, atol=1e-15)
        np.testing.assert_allclose(qi, q, atol=1e-15)


@pytest.mark.parametrize("scenario", ["gyro_top", "free_body"])
def test_impulse_does_not_disturb_render_interpolation(scenario):
    """Regression: an impulse used to reset the previous-step pose like a teleport."""
    a = scenarios.build(scenario, dt=0.01)
    b = scenarios.build(scenario, dt=0.01)
    if scenario == "free_body":
        a.set_velocity(0, (1.0, 2.0, 3.0))
        b.set_velocity(0, (1.0, 2.0, 3.0))
    a.step(7)
    b.step(6)
    x, _ = a.pose(0)
    assert not np.array_equal(x, b.pose(0)[0])
    a.apply_impulse(0, (0.0, 0.01, 0.0), x + np.array([0.0, 0.0, 0.05]))
    # an impulse changes velocities only: the pose and the previous pose stay as they were
    np.testing.assert_array_equal(a.pose(0)[0], x)
    np.testing.assert_array_equal(a.interpolated_pose(0, alpha=0.0)[0], b.pose(0)[0])


def test_advance_caps_steps_per_call_and_drops_time():
    sim = scenarios.build("free_body", dt=0.01)
    sim2 = Simulation(sim.model, "energy_momentum", 0.01, max_steps_per_advance=5)
    assert sim.advance(10.0) == 64
    assert sim.steps_taken == 64
    assert sim.dropped_time > 0.0
    assert 0.0 <= sim.alpha < 1.0
    assert sim2.advance(1.0) == 5 and sim2.dropped_time > 0.0
    # the next frame is not burdened by the dropped backlog
    assert sim.advance(0.01) in (1, 2)


def test_advance_accounts_for_all_elapsed_time():
    """Regression: the backlog beyond max_steps_per_advance was counted as dropped twice
    (advance(10) with dt=0.01 reported dropped_time 18.71 s instead of 9.36 s)."""
    sim = scenarios.build("free_body", dt=0.01)
    total = 0.0
    for elapsed in (10.0, 0.013, 3.0, 0.0049):
        sim.advance(elapsed)
        total += elapsed
        accounted = sim.t + sim.dropped_time + sim.alpha * sim.dt
        assert accounted == pytest.approx(total, abs=1e-9)


# -- solver statistics and the implicit fallback ----------------------------------------------

@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_solver_stats_keys(integrator):
    sim = scenarios.build("gyro_top", integrator=integrator)
    sim.step(30)
    stats = sim.solver_stats()
    assert stats["steps"] == 30
    if not rt.integrators.get(integrator).implicit:
        assert stats == {"steps": 30}
    else:
        assert set(stats) == {"steps", "newton_iterations", "mean_iterations", "max_iterations",
                              "fallback_steps"}
        assert stats["newton_iterations"] >= 30 and stats["max_iterations"] >= 1
        assert stats["mean_iterations"] == stats["newton_iterations"] / 30
        assert stats["fallback_steps"] == 0


def _smallest_working_max_iter(g, integrator, most=12):
    """Smallest Newton cap with which a step of ``g``'s model completes (fallback allowed)."""
    for max_iter in range(3, most):
        sim = gyro_copy(g, integrator, max_iter=max_iter)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                sim.step(1)
            except SimulationError:
                continue
        return max_iter
    pytest.fail(f"no max_iter below {most} completes a step")


# energy_momentum_appd shares the fallback loop; its Appendix D solver needs more than 3
# iterations even on small sub-steps, so a tight cap does not isolate the fallback there.
@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum4"])
def test_fallback_is_taken_reported_and_conserves_energy(integrator):
    """With the smallest Newton cap that works at all (3 at the time of writing: the solver
    accepts only an exactly-zero or a stalled residual, and smaller caps are refused), a
    0.01 s gyro-top step does not converge in one piece and falls back to sub-steps."""
    g = scenarios.build("gyro_top", dt=0.01)
    max_iter = _smallest_working_max_iter(g, integrator)
    sim = gyro_copy(g, integrator, max_iter=max_iter)
    assert np.array_equal(sim.backend.S, g.backend.S)
    e0, lz0 = sim.energy(), sim.momentum()[1][2]
    with pytest.warns(RuntimeWarning, match="sub-steps"):
        sim.step(100)
    stats = sim.solver_stats()
    assert stats["steps"] == 100 and sim.t == 100 * 0.01
    assert stats["fallback_steps"] > 0
    assert stats["max_iterations"] <= max_iter
    assert abs(sim.energy() - e0) <= 1e-10 * abs(e0)
    assert abs(sim.momentum()[1][2] - lz0) <= 1e-10 * np.linalg.norm(sim.momentum()[1])
    # a call of one step that falls back counts its step too (step(1) counts it from the
    # status, not from the step counter)
    for k in range(100):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sim.step(1)
        if caught:
            break
    assert caught and sim.steps_taken == 101 + k == sim.solver_stats()["steps"]
    # without the cap no step falls back, and no warning is emitted
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        g.step(100)
    assert g.solver_stats()["fallback_steps"] == 0


@pytest.mark.parametrize("integrator", IMPLICIT)
def test_failed_step_raises_and_leaves_state_untouched(integrator):
    g = scenarios.build("gyro_top", dt=0.01)
    sim = gyro_copy(g, integrator, max_iter=_smallest_working_max_iter(g, integrator),
                    max_halvings=0)
    sim.step(0)
    before = full_state(sim)
    with pytest.raises(SimulationError, match="not taken"):
        sim.step(5)
    assert sim.t == 0.0 and sim.steps_taken == 0
    assert np.all(np.isfinite(sim.backend.S))
    assert np.array_equal(sim.backend.S, before[0])
    assert np.array_equal(sim.backend.A, before[2])
    assert sim.solver_stats()["steps"] == 0


def test_failure_mid_call_keeps_completed_steps():
    """A run that fails part-way through one step(n) call keeps the completed steps.

    RK4 on a stiff spring far past its stability limit (omega dt = 10) completes some steps
    while the energy grows, then the energy overflows: the call raises, and the state is
    exactly that after the last completed step.
    """
    def stiff():
        m = Model(gravity=(0.0, 0.0, 0.0))
        m.add_body("b", 1.0, (1.0, 1.0, 1.0))
        m.add_spring("b", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), stiffness=1e6)
        sim = Simulation(m, "nullspace_rk4", 0.01)
        sim.set_position("b", (1.0, 0.0, 0.0))
        return sim

    sim = stiff()
    with pytest.raises(SimulationError) as exc:
        sim.step(2000)
    done = sim.steps_taken
    assert f"step {done + 1} " in str(exc.value)
    assert 0 < done < 2000
    assert sim.t == done * sim.dt
    assert np.all(np.isfinite(sim.backend.S))
    ref = stiff()
    ref.step(done)
    assert np.array_equal(sim.backend.S, ref.backend.S)
    # retrying fails at the same step and changes nothing
    before = sim.backend.S.copy()
    with pytest.raises(SimulationError):
        sim.step(1)
    assert sim.steps_taken == done and np.array_equal(sim.backend.S, before)


@pytest.mark.parametrize("unstable", [0, 1, 2])
def test_failure_mid_call_stops_every_body_at_the_same_step(unstable):
    """RK4 runs each body through all n steps of a call on its own; when one body turns
    non-finite, every body, including those already run further, is left at the start of
    the failed step, exactly as if the call had asked for that many steps (S_prev too).
    """
    def three_springs():
        m = Model(gravity=(0.0, 0.0, 0.0))
        for b in range(3):
            m.add_body(f"b{b}", 1.0, (0.1, 0.2, 0.25))
            # the unstable spring overflows within ~20 steps, the others some steps later
            m.add_spring(b, (0.1, 0.0, 0.0), (0.0, 0.0, 0.0),
                         stiffness=3300.0 if b == unstable else 3200.0 - 10.0 * b)
        sim = Simulation(m, "nullspace_rk4", 0.05)
        for b in range(3):
            sim.set_position(b, (0.01, 0.0, 0.01))
            sim.set_angular_velocity(b, (1.0, 2.0, 3.0), frame="body")
        return sim

    sim = three_springs()
    sim.step(2)
    with pytest.raises(SimulationError):
        sim.step(100)
    done = sim.steps_taken
    assert 2 < done < 102
    ref = three_springs()
    ref.step(2)
    ref.step(done - 2)
    assert np.array_equal(sim.backend.S, ref.backend.S)
    assert np.array_equal(sim.backend.S_prev, sim.backend.S)
    assert sim.solver_stats()["steps"] == done


@pytest.mark.parametrize("max_iter", [1, 2])
def test_newton_caps_that_cannot_converge_are_refused(max_iter):
    """Regression: max_iter=1 and 2 were accepted, but Newton accepts only an exactly-zero or
    a stalled residual, which takes three iterations to observe: every step failed, even
    with 64 sub-steps."""
    g = scenarios.build("gyro_top")
    with pytest.raises(ValueError, match=r"^max_iter"):
        gyro_copy(g, "energy_momentum", max_iter=max_iter)
    sim = gyro_copy(g, "energy_momentum", max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sim.step(10)
    assert sim.t == 10 * sim.dt


def test_momentum_matches_independent_sum():
    rng = np.random.default_rng(5)
    sim = random_free_sim(rng)
    m = sim.backend.frozen.mass[0]
    x, q = sim.pose(0)
    v, w = sim.velocity(0)
    r = quat.rotmat(q, np.empty((3, 3)))
    inertia_world = r @ np.diag(sim.backend.frozen.inertia[0]) @ r.T
    lin, ang = sim.momentum()
    np.testing.assert_allclose(lin, m * v, rtol=1e-15)
    np.testing.assert_allclose(ang, np.cross(x, m * v) + inertia_world @ w, rtol=1e-13, atol=1e-13)
    ke = 0.5 * m * v @ v + 0.5 * w @ inertia_world @ w
    assert sim.energy() == pytest.approx(ke, rel=1e-13)
    assert math.isfinite(sim.potential_energy()) and sim.potential_energy() == 0.0


def test_joints_lists_world_pivot_of_top():
    import rtrigid as rt
    sim = rt.scenarios.build("gyro_top")
    joints = sim.joints()
    assert len(joints) == 1
    j = joints[0]
    assert (j["kind"], j["parent"], j["child"]) == ("spherical", -1, 0)
    np.testing.assert_allclose(j["anchor"], sim.backend.frozen.pivot[0])
    assert rt.scenarios.build("free_body").joints() == []
