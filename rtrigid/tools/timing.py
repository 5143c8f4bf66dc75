"""How long a simulation's steps take, for ``rtrigid bench`` and the accuracy study: the median
cost of a step within one compiled call, that of one ``sim.step()`` call, and how a scheme
whose state would not stay finite for the timed steps is timed over the steps it takes."""
from __future__ import annotations

import statistics
import time

from rtrigid.simulation import SimulationError


def median_step_cost(sim, steps, repeats):
    sim.step(1)  # compile / load from cache outside the timing
    snap = sim.snapshot()
    times = []
    for _ in range(repeats):
        sim.restore(snap)
        start = time.perf_counter()
        sim.step(steps)
        times.append((time.perf_counter() - start) / steps)
    sim.restore(snap)
    return statistics.median(times)


def steps_it_takes(sim, steps):
    """How many of ``steps`` steps ``sim`` takes from its present state before its state would
    become non-finite (``steps``: all of them), the state put back after."""
    snap = sim.snapshot()
    t0 = sim.t
    try:
        sim.step(steps)
        taken = steps
    except SimulationError:
        taken = int(round((sim.t - t0) / sim.dt))
    sim.restore(snap)
    return taken


def scheme_step_cost(sim, steps, repeats):
    """(median s/step, steps per timed call, or None where the scheme took all ``steps``):
    :func:`median_step_cost`, over the steps the scheme takes before its state would become
    non-finite where that is fewer (explicit Euler gains energy on a tumbling body: at the
    free body's dt of 0.02 its 55th step is not finite), each window from the same start and
    as many windows as give ``repeats`` x ``steps`` steps in all (at most 200)."""
    taken = steps_it_takes(sim, steps + 1)
    if taken > steps:
        return median_step_cost(sim, steps, repeats), None
    if taken < 2:
        return None, taken
    windows = min(200, max(repeats, repeats * steps // (taken - 1)))
    return median_step_cost(sim, taken - 1, windows), taken - 1


def single_call_cost(sim, calls=20000, repeats=5):
    sim.step(1)
    step = sim.step
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)
