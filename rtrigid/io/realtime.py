"""Wall-clock pacing: run a Simulation in step with a monotonic clock and measure its deadlines.

    runner = RealtimeRunner(sim, callback=controller)   # rate 1/sim.dt: one step per tick
    stats = runner.run(duration=10.0)
    stats["real_time_factor"], stats["overruns"], stats["step_latency_us_p99"]

Schedule
    Tick ``k`` is released at ``origin + k*P`` (``P = 1/rate``) and has to be finished by the
    next release, its deadline.  It advances the simulation from step ``S(k)`` to ``S(k+1)``
    with ``S(k) = floor(k*P/dt)`` (exact rational arithmetic, so a 60 Hz loop over a 1 ms step
    runs 16, 17, 17, 16, ... steps and never drifts); at the default rate it is one step per
    tick, and simulated time equals wall time at every deadline.  A tick first calls
    ``callback(sim, tick)`` (read the state at ``sim.t``, set the inputs, e.g. with
    ``sim.apply_force``, that act over the tick's steps), then runs the tick's steps in one
    ``sim.step(n)`` call, then calls ``after(sim, tick)`` if given.

Waiting
    :class:`MonotonicClock` sleeps until ``spin`` seconds before the release and spins on
    ``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux) for the rest: ``time.sleep`` alone
    woke 0.1-0.4 ms late (p50-p99) on the 2-core VM this was built on.  A longer spin buys precision with CPU time.
    Any object with ``now_ns()`` and ``sleep_until(ns)`` can stand in for it
    (:class:`ManualClock` makes runs deterministic, for tests and offline replays).

Catch-up policy (overruns)
    A tick whose work ends after its deadline is an *overrun*.  The loop then does not sleep;
    the next tick starts at once and folds in every tick released meanwhile, as long as the
    folded ticks need at most ``max_steps_per_tick`` steps together -- so a late loop catches
    up in bursts of bounded cost.  If the loop is still more than ``max_lag`` seconds behind
    after a tick, the excess is dropped: the schedule moves later by that much (summed in
    ``dropped_s``) and the simulation runs slower than the wall clock instead of bursting
    for ever.  ``max_lag=0`` means "never catch up, just slow down": every late tick moves
    the schedule and no tick runs more than its own steps.

Statistics (:meth:`RealtimeRunner.stats`)
    ``steps``, ``ticks`` (callback invocations), ``overruns`` (calls whose work ended after
    their deadline), ``folded_ticks`` (ticks folded into a later call; also
    ``caught_up_ticks``), ``missed_deadlines`` (ticks, folded or not, done after their own
    deadline: :meth:`RealtimeRunner.late_ticks` lists each with how late it was),
    ``worst_lateness_us`` (the most a tick was done after its deadline), ``worst_step_us``
    (the longest ``sim.step(n)`` call), ``worst_start_lateness_us`` (the latest start after
    a release), ``dropped_s``, ``real_time_factor`` (simulated time advanced
    over wall time, from the first release to the end of the last tick's period, or of its
    work if that ends later),
    ``step_latency_us_p50/p99/max`` (duration of a tick's ``sim.step(n)`` call),
    ``callback_us_p50/p99/max`` and ``tick_jitter_us_p50/p99/max`` (how late a tick started
    after its release; late ticks of an overrun count with their full lateness).
    Percentiles are over the last ``sample_capacity`` ticks; counts and maxima over the run.
"""

from __future__ import annotations

import math
import select
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Protocol, cast

import numpy as np

from rtrigid import scenarios
from rtrigid.validate import as_scalar

if TYPE_CHECKING:
    from rtrigid.simulation import Simulation


class Clock(Protocol):
    """What :class:`RealtimeRunner` reads time from and waits on (:class:`MonotonicClock`,
    :class:`ManualClock`)."""

    def now_ns(self) -> int: ...

    def sleep_until(self, deadline_ns: int) -> None: ...


class Steppable(Protocol):
    """What :class:`RealtimeRunner` paces: a fixed step ``dt`` and ``step(n)`` (a Simulation)."""

    @property
    def dt(self) -> float: ...

    def step(self, n: int) -> object: ...


class MonotonicClock:
    """``time.perf_counter_ns`` with a sleep-then-spin wait (``spin`` seconds of spinning).

    ``watch=(fd, callback)``: while it sleeps, ``callback()`` runs whenever the file
    descriptor (or object with ``fileno()``) becomes readable -- a server reads its
    socket while it waits, and has little left to read at the release.
    """

    def __init__(
        self, spin: float = 3e-4, watch: tuple[Any, Callable[[], object]] | None = None
    ) -> None:
        self.spin = as_scalar(spin, "spin", nonnegative=True)
        self._spin_ns = int(round(self.spin * 1e9))
        if watch is not None and not (
            isinstance(watch, tuple) and len(watch) == 2 and callable(watch[1])
        ):
            raise ValueError(f"watch: expected (fd, callable), got {watch!r}")
        self.watch = watch

    @staticmethod
    def now_ns() -> int:
        """The clock reading, ns."""
        return time.perf_counter_ns()

    def sleep_until(self, deadline_ns: int) -> None:
        """Return at the first clock reading >= ``deadline_ns`` (at once if it has passed)."""
        now = time.perf_counter_ns
        wake = deadline_ns - self._spin_ns
        if self.watch is None:
            left = wake - now()  # read once: a second reading may already be past the wake
            if left > 0:
                time.sleep(left * 1e-9)
        else:
            fd, callback = self.watch
            while (left := wake - now()) > 0:
                if select.select((fd,), (), (), left * 1e-9)[0]:
                    callback()
        while now() < deadline_ns:
            pass


class ManualClock:
    """A clock that moves only when told to: ``sleep_until`` jumps, ``advance`` adds time."""

    def __init__(self, start_ns: int = 0) -> None:
        self.ns = int(start_ns)

    def now_ns(self) -> int:
        """The clock reading, ns."""
        return self.ns

    def sleep_until(self, deadline_ns: int) -> None:
        """Jump to ``deadline_ns`` (never backwards)."""
        self.ns = max(self.ns, int(deadline_ns))

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` on."""
        self.ns += int(round(as_scalar(seconds, "seconds", nonnegative=True) * 1e9))


class Tick:
    """What the callback is told about the tick it starts (one object, reused every tick)."""

    __slots__ = ("index", "ticks", "steps", "lateness")

    def __init__(self) -> None:
        self.index = 0  # index of the (first) tick this call covers
        self.ticks = 1  # ticks covered: > 1 when late ticks are folded in
        self.steps = 0  # steps that will run after the callback returns
        self.lateness = 0.0  # seconds between the tick's release and now


class _Samples:
    """Nanosecond samples in a ring buffer; exact count and maximum over all of them."""

    def __init__(self, capacity: int) -> None:
        self.buf = np.zeros(max(int(capacity), 1), dtype=np.int64)
        self.n = 0
        self.max = 0

    def add(self, value: int) -> None:
        self.buf[self.n % len(self.buf)] = value
        self.n += 1
        if value > self.max:
            self.max = value

    def summary(self, name: str) -> dict[str, float | None]:
        window = self.buf[: min(self.n, len(self.buf))]
        if not len(window):
            return {f"{name}_p50": None, f"{name}_p99": None, f"{name}_max": None}
        p50, p99 = np.percentile(window, [50, 99], method="higher")
        return {
            f"{name}_p50": float(p50) * 1e-3,
            f"{name}_p99": float(p99) * 1e-3,
            f"{name}_max": self.max * 1e-3,
        }


class RealtimeRunner:
    """Step a simulation at a fixed wall-clock rate (see the module docstring for the policy).

    Parameters
    ----------
    sim : Simulation
        Anything with ``dt`` and ``step(n)``.
    callback : callable(sim, tick) or None
        Called at the start of every tick, before its steps (``tick`` is a :class:`Tick`).
    after : callable(sim, tick) or None
        Called after a tick's steps, before the wait for the next release: work to have
        ready when it comes (part of the tick's work for its deadline, not of its step).
    rate : float or None
        Ticks per second; ``1/sim.dt`` (one step per tick) if None.
    max_steps_per_tick : int or None
        Bound on the steps one tick may run while catching up; default 4 ticks' worth.
    max_lag : float
        Seconds the loop may be behind schedule before the excess is dropped.
    clock : object with ``now_ns()`` and ``sleep_until(ns)``, or None
        Defaults to ``MonotonicClock(spin)``.
    spin : float
        Seconds spun (not slept) before each release by the default clock.
    sample_capacity : int
        Ticks kept for the percentiles (the most recent ones).
    """

    def __init__(
        self,
        sim: Steppable,
        callback: Callable[[Any, Tick], object] | None = None,
        *,
        after: Callable[[Any, Tick], object] | None = None,
        rate: float | None = None,
        max_steps_per_tick: int | None = None,
        max_lag: float = 0.1,
        clock: Clock | None = None,
        spin: float = 3e-4,
        sample_capacity: int = 1 << 20,
    ) -> None:
        dt = as_scalar(sim.dt, "sim.dt", positive=True)
        if callback is not None and not callable(callback):
            raise ValueError(f"callback: expected a callable or None, got {callback!r}")
        if after is not None and not callable(after):
            raise ValueError(f"after: expected a callable or None, got {after!r}")
        if rate is None:
            self.rate = 1.0 / dt
            ratio = Fraction(1)
        else:
            self.rate = as_scalar(rate, "rate", positive=True)
            # steps per tick as a small rational: 60 Hz over dt = 1/240 is exactly 4, not 3.9999...
            ratio = Fraction(1.0 / (self.rate * dt)).limit_denominator(1_000_000)
        self.period_ns = int(round(1e9 / self.rate))
        if self.period_ns < 1:
            raise ValueError(f"rate: {self.rate} Hz is beyond the nanosecond clock")
        self._num, self._den = ratio.numerator, ratio.denominator
        nominal = math.ceil(ratio)
        if max_steps_per_tick is None:
            max_steps_per_tick = 4 * max(nominal, 1)
        m = as_scalar(max_steps_per_tick, "max_steps_per_tick", positive=True)
        if m != int(m) or m < nominal:
            raise ValueError(
                f"max_steps_per_tick: must be an integer >= {nominal} (the steps "
                f"of one tick at {self.rate:g} Hz), got {max_steps_per_tick!r}"
            )
        self.max_steps_per_tick = int(m)
        self.max_lag = as_scalar(max_lag, "max_lag", nonnegative=True)
        self.clock: Clock = MonotonicClock(spin) if clock is None else clock
        for attr in ("now_ns", "sleep_until"):
            if not callable(getattr(self.clock, attr, None)):
                raise ValueError(f"clock: has no {attr}() method")
        self.sample_capacity = int(as_scalar(sample_capacity, "sample_capacity", positive=True))
        self.sim = sim
        self.callback = callback
        self.after = after
        self.dt = dt
        self._stop = False
        self._stats: dict[str, Any] | None = None
        self._late: list[tuple[int, float]] = []
        self._live: dict[str, int] = {}
        self._live_samples: tuple[_Samples, _Samples] | None = None

    def steps_due(self, k: int) -> int:
        """S(k): steps the schedule has run by the release of tick ``k``."""
        return (k * self._num) // self._den

    def stop(self) -> None:
        """Make :meth:`run` return after the current tick (callable from the callback)."""
        self._stop = True

    def run(self, duration: float | None = None, ticks: int | None = None) -> dict[str, Any]:
        """Run for ``duration`` wall-clock seconds, or ``ticks`` ticks, or until :meth:`stop`.

        With ``duration``, ticks are released while their release time is before the end;
        time dropped by the catch-up policy therefore costs steps, not wall time.  Returns
        :meth:`stats`.  An exception from the callback or the simulation ends the run and
        propagates; the statistics up to then stay available from :meth:`stats`.
        """
        if duration is not None and ticks is not None:
            raise ValueError("duration: give either duration or ticks, not both")
        stop_ns: int | None = None
        n_ticks: int | None = None
        if duration is not None:
            stop_ns = int(round(as_scalar(duration, "duration", nonnegative=True) * 1e9))
        if ticks is not None:
            t = as_scalar(ticks, "ticks", nonnegative=True)
            if t != int(t):
                raise ValueError(f"ticks: expected a whole number, got {ticks!r}")
            n_ticks = int(t)
        expected = (
            n_ticks
            if n_ticks is not None
            else (stop_ns // self.period_ns + 1 if stop_ns is not None else self.sample_capacity)
        )
        cap = min(self.sample_capacity, max(expected, 1))
        step_lat, cb_lat, jitter = _Samples(cap), _Samples(cap), _Samples(cap)
        clock, sim, callback, period = self.clock, self.sim, self.callback, self.period_ns
        after = self.after
        max_steps, max_lag_ns = self.max_steps_per_tick, int(round(self.max_lag * 1e9))
        tick = Tick()
        self._stop = False
        counts = self._live = dict(
            ticks=0,
            overruns=0,
            caught_up=0,
            missed=0,
            worst_late=0,
            scheduled=0,
            steps=0,
            dropped=0,
        )
        self._live_samples = (step_lat, jitter)
        late = self._late = []  # (tick, seconds late) of every tick done after its deadline
        k = done = 0
        dropped = 0
        start = origin = clock.now_ns()
        if stop_ns is not None:
            stop_ns += start

        def finish(end_ns: int) -> None:
            self._stats = self._summarize(
                counts, k, done, dropped, end_ns - start, step_lat, cb_lat, jitter
            )

        def releasable(j: int) -> bool:
            """Tick j belongs to the run (within ``ticks``, released before the end)."""
            return not (
                (n_ticks is not None and j >= n_ticks)
                or (stop_ns is not None and origin + j * period >= stop_ns)
            )

        try:
            while not self._stop and releasable(k):
                release = origin + k * period
                clock.sleep_until(release)
                begin = clock.now_ns()
                # fold in the ticks released since, as far as the step bound allows
                last = k
                released = (begin - origin) // period
                while (
                    last < released
                    and releasable(last + 1)
                    and self.steps_due(last + 2) - done <= max_steps
                ):
                    last += 1
                n = self.steps_due(last + 1) - done
                tick.index, tick.ticks, tick.steps = k, last - k + 1, n
                tick.lateness = (begin - release) * 1e-9
                jitter.add(begin - release)
                if callback is not None:
                    callback(sim, tick)
                    t_cb = clock.now_ns()
                    cb_lat.add(t_cb - begin)
                else:
                    t_cb = begin
                if n:
                    sim.step(n)
                end = clock.now_ns()
                if n:
                    step_lat.add(end - t_cb)
                if after is not None:
                    after(sim, tick)
                    end = clock.now_ns()
                done += n
                counts["ticks"] += 1
                counts["caught_up"] += last - k
                # every tick this call covered whose deadline passed before it was done
                for j in range(k, last + 1):
                    behind = end - (origin + (j + 1) * period)
                    if behind > 0:
                        counts["missed"] += 1
                        counts["worst_late"] = max(counts["worst_late"], behind)
                        if len(late) < self.sample_capacity:
                            late.append((j, behind * 1e-9))
                k = last + 1
                next_release = origin + k * period
                if end > next_release:
                    counts["overruns"] += 1
                    lag = end - next_release
                    if lag > max_lag_ns:
                        origin += lag - max_lag_ns
                        dropped += lag - max_lag_ns
                        counts["dropped"] = dropped
                counts["scheduled"], counts["steps"] = k, done
            clock.sleep_until(origin + k * period)
            finish(clock.now_ns())
        except BaseException:
            finish(clock.now_ns())
            raise
        return cast("dict[str, Any]", self.stats())

    def _summarize(
        self,
        counts: dict[str, int],
        k: int,
        done: int,
        dropped_ns: int,
        wall_ns: int,
        step_lat: _Samples,
        cb_lat: _Samples,
        jitter: _Samples,
    ) -> dict[str, Any]:
        sim_time = done * self.dt
        out: dict[str, Any] = {
            "rate_hz": self.rate,
            "dt": self.dt,
            "ticks": counts["ticks"],
            "scheduled_ticks": k,
            "steps": done,
            "sim_time_s": sim_time,
            "wall_time_s": wall_ns * 1e-9,
            "real_time_factor": sim_time / (wall_ns * 1e-9) if wall_ns > 0 else None,
            "overruns": counts["overruns"],
            "caught_up_ticks": counts["caught_up"],
            "folded_ticks": counts["caught_up"],
            "missed_deadlines": counts["missed"],
            "worst_lateness_us": counts["worst_late"] * 1e-3,
            "dropped_s": dropped_ns * 1e-9,
            "max_steps_per_tick": self.max_steps_per_tick,
            "max_lag_s": self.max_lag,
        }
        out.update(step_lat.summary("step_latency_us"))
        if self.callback is not None:
            out.update(cb_lat.summary("callback_us"))
        out.update(jitter.summary("tick_jitter_us"))
        out["worst_step_us"] = out["step_latency_us_max"]
        out["worst_start_lateness_us"] = out["tick_jitter_us_max"]
        if isinstance(self.clock, MonotonicClock):
            out["spin_s"] = self.clock.spin
        return out

    def progress(self) -> dict[str, Any]:
        """The deadline figures of the run in progress (or of the last one) so far, cheap
        enough to read between ticks (from the callback): ``ticks``, ``scheduled_ticks``,
        ``steps``, ``overruns``, ``folded_ticks``, ``late_ticks`` (ticks done after their
        deadline), ``worst_lateness_us``, ``worst_step_us``, ``worst_start_lateness_us``,
        ``dropped_s``; all 0 before the first run.  No percentiles: see :meth:`stats`."""
        c = self._live
        step_lat, jitter = self._live_samples or (_Samples(1), _Samples(1))
        return {
            "ticks": c.get("ticks", 0),
            "scheduled_ticks": c.get("scheduled", 0),
            "steps": c.get("steps", 0),
            "overruns": c.get("overruns", 0),
            "folded_ticks": c.get("caught_up", 0),
            "late_ticks": c.get("missed", 0),
            "worst_lateness_us": c.get("worst_late", 0) * 1e-3,
            "worst_step_us": step_lat.max * 1e-3,
            "worst_start_lateness_us": jitter.max * 1e-3,
            "dropped_s": c.get("dropped", 0) * 1e-9,
        }

    def stats(self) -> dict[str, Any] | None:
        """Figures of the last run (None before the first)."""
        return None if self._stats is None else dict(self._stats)

    def late_ticks(self) -> list[tuple[int, float]]:
        """Every tick of the last run done after its deadline, as (tick index, seconds
        late), in order (the first ``sample_capacity`` of them)."""
        return list(self._late)


def set_fifo_priority(priority: int) -> tuple[int, int]:
    """Run the calling thread under Linux SCHED_FIFO at ``priority`` (1-99); 0 means SCHED_OTHER.

    A real-time priority lets a paced loop or a lock-step server preempt ordinary processes
    the moment it wakes, instead of waiting out their time slice (milliseconds on a busy
    machine).  Needs CAP_SYS_NICE (root, or an rtprio limit); refusals raise ``ValueError``.
    The kernel's real-time throttling (95 % of each second by default) still bounds what a
    spinning loop can take from the rest of the machine.  Returns the previous
    ``(policy, priority)`` for :func:`restore_priority`.
    """
    import os

    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 99:
        raise ValueError(f"priority: expected an integer in [0, 99], got {priority!r}")
    if not hasattr(os, "sched_setscheduler"):
        raise ValueError("priority: this platform has no sched_setscheduler")
    previous = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    policy = os.SCHED_FIFO if priority else os.SCHED_OTHER
    try:
        os.sched_setscheduler(0, policy, os.sched_param(priority))
    except PermissionError:
        raise ValueError(
            f"priority: not permitted to use SCHED_FIFO {priority} "
            "(needs CAP_SYS_NICE or an rtprio limit)"
        ) from None
    return previous


def restore_priority(previous: tuple[int, int]) -> None:
    """Undo :func:`set_fifo_priority` with the value it returned."""
    import os

    os.sched_setscheduler(0, previous[0], os.sched_param(previous[1]))


def warm_up(sim: Simulation) -> None:
    """Load the step kernel (numba cache) with one step, then put the state back."""
    snap = sim.snapshot()
    sim.step(1)
    sim.restore(snap)


def print_stats(stats: dict[str, Any]) -> None:
    """Print ``stats`` as aligned ``key  value`` lines."""
    width = max(len(k) for k in stats)
    for key, value in stats.items():
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {text}")


def run_main(sim: Simulation, duration: float, as_json: bool = False, rt_priority: int = 0) -> int:
    """``rtrigid run SCENARIO --realtime``: a paced run of ``duration`` wall-clock seconds."""
    import json

    warm_up(sim)
    if rt_priority:
        set_fifo_priority(rt_priority)
    stats = RealtimeRunner(sim).run(duration=duration)
    stats = {
        "scenario": scenarios.info(sim).get("scenario"),
        "integrator": sim.integrator,
        "rt_priority": rt_priority,
        **stats,
    }
    if as_json:
        print(json.dumps(stats, indent=2))
    else:
        print_stats(stats)
    return 0
