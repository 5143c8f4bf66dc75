"""Hostile values: nothing the API accepts leaves a non-finite state, a refused call changes
nothing, snapshots refuse foreign simulations, and a second thread cannot step a simulation
another thread is stepping."""
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtrigid import scenarios


def _state(sim):
    be = sim.backend
    return (be.S.copy(), be.S_prev.copy(), be.A.copy(), sim.t, sim.steps_taken,
            sim._accumulator, sim.dropped_time)


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def _refused(sim, call, field):
    before = _state(sim)
    with pytest.raises(ValueError, match=f"^{field}"):
        call()
    assert _same(before, _state(sim))


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_findings_f5_to_f10_are_refused_and_change_nothing(integrator):
    top = scenarios.build("gyro_top", integrator=integrator)
    body = scenarios.build("free_body", integrator=integrator)
    chain = scenarios.build("chain", integrator=integrator)
    _refused(body, lambda: body.set_velocity(0, (1e308,) * 3), "v")                 # F6
    _refused(body, lambda: body.set_angular_velocity(0, (1e308, 0, 0)), "omega")    # F7
    pair = scenarios.build("two_body_spherical", integrator=integrator)  # springs and gravity
    _refused(pair, lambda: pair.set_position(0, (1e308, 1e308, 0)), "x")
    body.set_position(0, (1e308, 1e308, 0))  # without gravity or springs that is finite
    body.step(3)
    assert np.all(np.isfinite(body.backend.S))
    body.set_position(0, (0.0, 0.0, 0.0))
    body.apply_force(0, (1e308, 0, 0))
    _refused(body, lambda: body.apply_force(0, (1e308, 0, 0)), "force")              # F7
    _refused(body, lambda: body.apply_force(0, (0, 1e308, 0), point=(1e308, 0, 0)), "force")
    _refused(body, lambda: body.apply_torque(0, (np.inf, 0, 0)), "torque")
    _refused(body, lambda: body.apply_impulse(0, (1e308, 1e308, 0)), "impulse")
    _refused(top, lambda: top.advance(1e308), "elapsed")                              # F8
    top.advance(0.0105)  # and the clock still works afterwards
    assert top.steps_taken == 10
    _refused(top, lambda: top.step(np.uint64(2 ** 63)), "n")                          # F9
    _refused(top, lambda: top.step(2 ** 63), "n")                                     # F10
    _refused(top, lambda: top.advance("0.01"), "elapsed")
    with pytest.raises(ValueError, match="^n"):
        scenarios.build("chain", n=True)
    # F5: a huge quaternion is a direction like any other, normalised without overflow
    top.set_orientation("top", (1e200, 0, 0, 0))
    np.testing.assert_array_equal(top.pose("top")[1], [1.0, 0.0, 0.0, 0.0])
    chain.set_joint_position(0, (0.0, 1e300, 1e300, 0.0))
    np.testing.assert_allclose(chain.joint_position(0), [0, 2 ** -0.5, 2 ** -0.5, 0], atol=1e-15)
    _refused(chain, lambda: chain.set_joint_position(0, (0.0, 0.0, 0.0, 0.0)), "value")
    top.step(10)
    assert np.isfinite(top.energy())


def test_any_integer_type_steps_the_one_kernel():
    sim = scenarios.build("gyro_top", integrator="nullspace_rk4")
    sim.step(1)
    kernel = sim._kernel
    compiled = len(kernel.signatures)
    for n in (np.uint64(3), np.int32(2), np.int8(1), 4):
        sim.step(n)
    assert sim.steps_taken == 11 and len(kernel.signatures) == compiled


def test_restore_refuses_a_snapshot_of_another_model_with_the_same_sizes():   # F11
    a = scenarios.build("free_body", integrator="nullspace_rk4")
    b = scenarios.build("tennis_racket", integrator="nullspace_rk4")
    assert a.backend.S.shape == b.backend.S.shape
    _refused(b, lambda: b.restore(a.snapshot()), "snap")
    c = scenarios.build("free_body", integrator="nullspace_rk4", dt=0.01)
    _refused(c, lambda: c.restore(a.snapshot()), "snap")
    d = scenarios.build("free_body", integrator="nullspace_rk4")
    d.restore(a.snapshot())  # the same model, scheme and step: accepted
    assert _same(_state(a), _state(d))


def test_a_second_thread_cannot_step_a_simulation_being_stepped():
    sim = scenarios.build("chain", integrator="energy_momentum", n=20)
    sim.step(1)
    inside, release = threading.Event(), threading.Event()
    real_kernel = sim._kernel

    def slow_kernel(n, dt, F, I):  # holds the simulation until the main thread has tried
        inside.set()
        release.wait(10)
        return real_kernel(n, dt, F, I)

    sim._kernel = slow_kernel
    worker = threading.Thread(target=sim.step, args=(1,))
    worker.start()
    try:
        assert inside.wait(10)
        for call in (lambda: sim.step(1), lambda: sim.advance(0.1)):
            with pytest.raises(RuntimeError, match="second thread"):
                call()
    finally:
        release.set()
        worker.join(10)
    assert sim.steps_taken == 2  # the first thread's step went through, the others did not


SETTERS = {
    "set_position": lambda s, v: s.set_position(0, v[:3]),
    "set_velocity": lambda s, v: s.set_velocity(0, v[:3]),
    "set_velocity_body": lambda s, v: s.set_velocity(0, v[:3], frame="body"),
    "set_angular_velocity": lambda s, v: s.set_angular_velocity(0, v[:3]),
    "set_angular_velocity_body": lambda s, v: s.set_angular_velocity(0, v[:3], frame="body"),
    "set_orientation": lambda s, v: s.set_orientation(0, v),
    "apply_force": lambda s, v: s.apply_force(0, v[:3]),
    "apply_force_at": lambda s, v: s.apply_force(0, v[:3], point=v[1:]),
    "apply_torque": lambda s, v: s.apply_torque(0, v[:3]),
    "apply_impulse": lambda s, v: s.apply_impulse(0, v[:3], point=v[1:]),
    "set_joint_position": lambda s, v: s.set_joint_position(0, v),
    "set_joint_velocity": lambda s, v: s.set_joint_velocity(0, v[:3]),
}
MAGNITUDE = st.floats(min_value=-1e308, max_value=1e308, allow_nan=False)


@pytest.mark.parametrize("scenario", ["free_body", "gyro_top", "chain"])
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.sampled_from(sorted(SETTERS)),
                                st.lists(MAGNITUDE, min_size=4, max_size=4)),
                      min_size=1, max_size=6))
def test_no_setter_sequence_leaves_a_non_finite_state(scenario, calls):
    sim = scenarios.build(scenario, integrator="nullspace_rk4")
    for name, values in calls:
        before = _state(sim)
        try:
            SETTERS[name](sim, np.array(values))
        except ValueError:
            assert _same(before, _state(sim)), name
        be = sim.backend
        assert np.all(np.isfinite(be.S)) and np.all(np.isfinite(be.A)), name
        assert np.isfinite(sim.energy()), name
