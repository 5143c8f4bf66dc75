"""rtrigid.realtime: the paced runner's schedule, catch-up policy and statistics.

Almost every test runs on a ManualClock: the fake simulation and the callbacks advance it by
set amounts, so each overrun, each folded tick and each dropped nanosecond is known in advance
and checked exactly -- no test depends on how fast or how loaded the machine is.
"""
import json
import math
import os
import socket

import numpy as np
import pytest

from rtrigid import cli, scenarios
from rtrigid.io.realtime import (ManualClock, MonotonicClock, RealtimeRunner, restore_priority,
                              set_fifo_priority)

MS = 1e-3


class CostlySim:
    """Stands in for a Simulation: each step costs ``cost`` seconds of the manual clock."""

    def __init__(self, clock, dt=1e-3, cost=1e-4):
        self.clock, self.dt, self.cost = clock, dt, cost
        self.steps = 0
        self.calls = []

    def step(self, n=1):
        self.steps += n
        self.calls.append(n)
        self.clock.advance(self.cost * n)


class Recorder:
    """A callback that logs what each tick was told and can stall the clock on chosen ticks."""

    def __init__(self, clock, stall=None, every=0.0):
        self.clock, self.stall, self.every = clock, stall or {}, every
        self.log = []

    def __call__(self, sim, tick):
        self.log.append((tick.index, tick.ticks, tick.steps, round(tick.lateness * 1e9)))
        self.clock.advance(self.stall.get(tick.index, self.every))


def test_on_schedule_every_tick_starts_on_time_and_rtf_is_one():
    clock = ManualClock(start_ns=123)
    sim = CostlySim(clock, cost=1e-4)
    stats = RealtimeRunner(sim, clock=clock).run(ticks=50)
    assert sim.calls == [1] * 50
    assert stats["steps"] == stats["ticks"] == stats["scheduled_ticks"] == 50
    assert stats["overruns"] == stats["caught_up_ticks"] == 0 and stats["dropped_s"] == 0.0
    assert stats["wall_time_s"] == pytest.approx(0.05, abs=1e-15)
    assert stats["real_time_factor"] == pytest.approx(1.0, abs=1e-12)
    assert stats["tick_jitter_us_max"] == 0.0
    assert stats["step_latency_us_p50"] == stats["step_latency_us_max"] == pytest.approx(100.0)
    assert "callback_us_p50" not in stats


def test_slow_callback_counts_overruns_and_catches_up_in_bounded_bursts():
    # 1 kHz, 0.1 ms per step; tick 10's callback stalls 5.5 ms.  Tick 10 ends at 15.6 ms,
    # past its 11 ms deadline: overrun 1.  The next tick starts at 15.6 ms with ticks 11..15
    # released; the bound of 4 steps lets it fold 11..14 and it ends at 16.0 ms, past tick
    # 14's 15 ms deadline: overrun 2.  The next starts at 16.0 ms and folds 15 and 16 (2
    # steps), ending at 16.2 ms, before 17 ms: back on schedule from tick 17.
    clock = ManualClock()
    sim = CostlySim(clock, cost=1e-4)
    cb = Recorder(clock, stall={10: 5.5 * MS})
    stats = RealtimeRunner(sim, cb, clock=clock, max_steps_per_tick=4).run(ticks=30)
    covered = [(index, ticks, steps) for index, ticks, steps, _ in cb.log]
    assert covered[:10] == [(k, 1, 1) for k in range(10)]
    assert covered[10:13] == [(10, 1, 1), (11, 4, 4), (15, 2, 2)]
    assert covered[13:] == [(k, 1, 1) for k in range(17, 30)]
    assert [lateness for *_, lateness in cb.log if lateness] == [4_600_000, 1_000_000]
    assert max(sim.calls) <= 4 and sum(sim.calls) == 30
    assert stats["overruns"] == 2
    assert stats["caught_up_ticks"] == 4
    assert stats["ticks"] == 26 and stats["steps"] == 30
    assert stats["dropped_s"] == 0.0
    assert stats["real_time_factor"] == pytest.approx(1.0, abs=1e-12)  # all time made up
    assert stats["callback_us_max"] == pytest.approx(5500.0)
    assert stats["step_latency_us_max"] == pytest.approx(400.0)
    assert stats["tick_jitter_us_max"] == pytest.approx(4600.0)


def test_every_tick_done_after_its_deadline_is_listed_with_how_late():
    # the run above: tick 10 ends at 15.6 ms (deadline 11 ms); ticks 11..14 are folded into a
    # call that ends at 16.0 ms (deadlines 12..15 ms); 15 and 16 into one ending at 16.2 ms
    # (deadlines 16 and 17 ms).  Two overruns, but six ticks done late.
    clock = ManualClock()
    runner = RealtimeRunner(CostlySim(clock, cost=1e-4), Recorder(clock, stall={10: 5.5 * MS}),
                            clock=clock, max_steps_per_tick=4)
    stats = runner.run(ticks=30)
    late = [(j, round(s * 1e6, 6)) for j, s in runner.late_ticks()]
    assert late == [(10, 4600.0), (11, 4000.0), (12, 3000.0), (13, 2000.0), (14, 1000.0),
                    (15, 200.0)]
    assert stats["overruns"] == 2
    assert stats["missed_deadlines"] == 6
    assert stats["folded_ticks"] == stats["caught_up_ticks"] == 4
    assert stats["worst_lateness_us"] == pytest.approx(4600.0)
    assert stats["worst_step_us"] == pytest.approx(400.0)
    assert stats["worst_start_lateness_us"] == pytest.approx(4600.0)
    # a run on time lists nothing
    clock = ManualClock()
    runner = RealtimeRunner(CostlySim(clock, cost=1e-4), clock=clock)
    assert runner.run(ticks=50)["missed_deadlines"] == 0 and runner.late_ticks() == []


def test_persistent_overload_drops_time_beyond_max_lag():
    # every callback costs 5 ms; a tick may run at most 4 steps (4 ms of schedule), so the
    # loop loses 1 ms per tick until it is max_lag behind; from then on the excess is dropped
    # and the simulation runs at 4 steps per 5 ms of wall time.
    clock = ManualClock()
    sim = CostlySim(clock, cost=0.0)
    cb = Recorder(clock, every=5 * MS)
    max_lag = 0.010
    stats = RealtimeRunner(sim, cb, clock=clock, max_steps_per_tick=4,
                           max_lag=max_lag).run(duration=1.0)
    assert max(sim.calls) == 4
    assert max(lateness for *_, lateness in cb.log) <= round(max_lag * 1e9)
    assert stats["overruns"] == stats["ticks"]
    assert stats["dropped_s"] > 0.0
    # wall time = scheduled time + dropped time (+ the last tick's lag, at most max_lag)
    slack = stats["wall_time_s"] - (stats["steps"] * sim.dt + stats["dropped_s"])
    assert -1e-12 <= slack <= max_lag + 1e-12
    assert stats["real_time_factor"] == pytest.approx(0.8, abs=0.02)
    assert stats["steps"] == sim.steps == stats["scheduled_ticks"]


def test_max_lag_zero_slows_down_instead_of_catching_up():
    clock = ManualClock()
    sim = CostlySim(clock, cost=1e-4)
    cb = Recorder(clock, stall={10: 5.5 * MS})
    stats = RealtimeRunner(sim, cb, clock=clock, max_lag=0.0).run(ticks=30)
    assert sim.calls == [1] * 30
    assert all(ticks == 1 for _, ticks, _, _ in cb.log)
    assert stats["overruns"] == 1 and stats["caught_up_ticks"] == 0
    assert stats["dropped_s"] == pytest.approx(4.6e-3, abs=1e-12)  # 15.6 ms end - 11 ms due
    assert stats["wall_time_s"] == pytest.approx(0.0346, abs=1e-12)
    assert stats["real_time_factor"] == pytest.approx(0.030 / 0.0346, rel=1e-12)


@pytest.mark.parametrize("rate, dt, pattern", [
    (60.0, 1e-3, None),          # 16 or 17 steps per tick, 1000 per second exactly
    (60.0, 1.0 / 240.0, [4]),    # exactly 4, not 3 through round-off
    (2000.0, 1e-3, [0, 1]),      # faster ticks than steps: every other tick steps
])
def test_steps_follow_the_rate_without_drift(rate, dt, pattern):
    clock = ManualClock()
    sim = CostlySim(clock, dt=dt, cost=0.0)
    cb = Recorder(clock)
    stats = RealtimeRunner(sim, cb, clock=clock, rate=rate).run(duration=1.0)
    per_tick = [steps for _, _, steps, _ in cb.log]
    assert stats["scheduled_ticks"] == stats["ticks"] == round(rate)
    assert sum(per_tick) == stats["steps"] == round(1.0 / dt)
    if pattern is None:
        assert set(per_tick) == {16, 17}
        assert all(sum(per_tick[:k]) == (k * 1000) // 60 for k in range(61))
    else:
        assert per_tick == (pattern * len(per_tick))[:len(per_tick)]
    assert stats["real_time_factor"] == pytest.approx(1.0, rel=1e-6)  # period rounded to 1 ns


def test_stop_from_the_callback_ends_the_run_after_that_tick():
    clock = ManualClock()
    sim = CostlySim(clock)
    runner = RealtimeRunner(sim, lambda s, tick: tick.index == 6 and runner.stop(), clock=clock)
    stats = runner.run()
    assert stats["steps"] == 7 and stats["wall_time_s"] == pytest.approx(0.007)


def test_an_exception_in_the_callback_propagates_and_keeps_the_statistics():
    clock = ManualClock()
    sim = CostlySim(clock)

    def boom(s, tick):
        if tick.index == 3:
            raise KeyError("sensor gone")

    runner = RealtimeRunner(sim, boom, clock=clock)
    with pytest.raises(KeyError):
        runner.run(ticks=10)
    assert runner.stats()["steps"] == 3


def test_callback_inputs_act_on_the_steps_of_their_tick():
    """A torque set in the callback drives exactly that tick's steps: same bits as a plain loop."""
    def torque(k):
        return (0.0, 1e-3 * math.sin(0.3 * k), 2e-4 * k)

    def control(sim, tick):
        sim.clear_applied()
        sim.apply_torque("top", torque(tick.index))

    sim = scenarios.build("gyro_top", dt=1e-3)
    ref = scenarios.build("gyro_top", dt=1e-3)
    clock = ManualClock()
    RealtimeRunner(sim, control, clock=clock, rate=250.0).run(ticks=40)  # 4 steps per tick
    for k in range(40):
        ref.clear_applied()
        ref.apply_torque("top", torque(k))
        ref.step(4)
    assert sim.t == ref.t
    for a, b in zip(sim.pose("top") + sim.velocity("top"), ref.pose("top") + ref.velocity("top")):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("kwargs, field", [
    (dict(rate=0.0), "rate"),
    (dict(rate=float("nan")), "rate"),
    (dict(max_steps_per_tick=0), "max_steps_per_tick"),
    (dict(max_steps_per_tick=2.5), "max_steps_per_tick"),
    (dict(rate=50.0, max_steps_per_tick=10), "max_steps_per_tick"),  # a tick needs 20
    (dict(max_lag=-1.0), "max_lag"),
    (dict(callback=3), "callback"),
    (dict(after=3), "after"),
    (dict(clock=object()), "clock"),
    (dict(spin=-1e-4), "spin"),
])
def test_bad_runner_arguments_are_refused_by_name(kwargs, field):
    sim = CostlySim(ManualClock())
    with pytest.raises(ValueError, match=f"^{field}:"):
        RealtimeRunner(sim, **kwargs)


@pytest.mark.parametrize("kwargs, field", [
    (dict(duration=-1.0), "duration"),
    (dict(duration=float("inf")), "duration"),
    (dict(ticks=2.5), "ticks"),
    (dict(duration=1.0, ticks=3), "duration"),
])
def test_bad_run_arguments_are_refused_by_name(kwargs, field):
    clock = ManualClock()
    sim = CostlySim(clock)
    with pytest.raises(ValueError, match=f"^{field}:"):
        RealtimeRunner(sim, clock=clock).run(**kwargs)
    assert sim.steps == 0 and clock.ns == 0


def test_after_runs_past_the_steps_and_counts_in_the_deadline_not_the_step():
    """``after`` sees the tick's steps done; its time makes the tick late (it is the tick's
    work) but is not part of the step's latency."""
    clock = ManualClock()
    sim = CostlySim(clock, cost=1e-4)
    seen = []

    def after(s, tick):
        seen.append((tick.index, s.steps))
        clock.advance(0.95e-3 if tick.index == 2 else 0.0)

    stats = RealtimeRunner(sim, after=after, clock=clock).run(ticks=5)
    assert seen == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert stats["overruns"] == 1 and stats["missed_deadlines"] == 1  # tick 2 ends at 3.05 ms
    assert stats["worst_lateness_us"] == pytest.approx(50.0)
    assert stats["worst_step_us"] == pytest.approx(100.0)


def test_monotonic_clock_reads_what_it_watches_while_it_sleeps():
    """With ``watch=(fd, callback)`` the clock calls back when the fd is readable, and still
    wakes no earlier than the deadline."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    got = []
    with a, b:
        b.setblocking(False)
        clock = MonotonicClock(spin=1e-4, watch=(b, lambda: got.append(b.recv(64))))
        deadline = clock.now_ns() + 2_000_000
        clock.sleep_until(deadline)
        assert got == [] and clock.now_ns() >= deadline
        a.send(b"datagram")
        deadline = clock.now_ns() + 50_000_000
        clock.sleep_until(deadline)
        assert got == [b"datagram"] and clock.now_ns() >= deadline
    with pytest.raises(ValueError, match="^watch:"):
        MonotonicClock(watch=(b, "not callable"))


def test_monotonic_clock_never_wakes_before_the_deadline():
    clock = MonotonicClock(spin=1e-4)
    for delay_ns in [0, 50_000, 100_000, 250_000, 1_000_000] * 4:
        deadline = clock.now_ns() + delay_ns
        clock.sleep_until(deadline)
        assert clock.now_ns() >= deadline


def test_cli_realtime_run_reports_the_figures(capsys):
    code = cli.main(["run", "gyro_top", "--realtime", "--duration", "0.05", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(out)
    for key in ("real_time_factor", "steps", "overruns", "step_latency_us_p99",
                "tick_jitter_us_p99", "dropped_s"):
        assert key in r
    assert r["scenario"] == "gyro_top" and r["integrator"] == "energy_momentum"
    assert r["steps"] == r["scheduled_ticks"]  # one step per tick at the default rate
    # ticks are released until 50 ms of wall time have passed, less any dropped time
    assert r["steps"] == math.ceil(round((0.05 - r["dropped_s"]) / r["dt"], 6))
    assert np.isfinite(r["real_time_factor"]) and r["real_time_factor"] > 0.0


@pytest.mark.parametrize("priority", [-1, 100, 1.5, True, "20"])
def test_bad_fifo_priority_is_refused_by_name(priority):
    with pytest.raises(ValueError, match="^priority:"):
        set_fifo_priority(priority)


def test_priority_zero_is_the_default_policy_and_restores():
    previous = set_fifo_priority(0)
    try:
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
    finally:
        restore_priority(previous)
    assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == previous
