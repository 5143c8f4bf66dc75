"""Live figures for the HUD and the headless demos: conservation drift and frame timing.

Drifts are relative, measured as ``rtrigid run`` measures them: energy against max(|E0|, T0);
each conserved momentum component (``scenarios.info(sim)["conserved"]``, pairs like ("angular", 2))
against the norm of its vector at the baseline.  The baseline is taken when the viewer opens
and again after anything that legitimately changes energy or momentum (an impulse from the
viewer, a reset): :meth:`Conservation.mark` names the event, which the chart marks while the
histories go on, and the worst drifts are then counted since that event.  While forces applied by the user act, nothing is conserved, and the
monitor says so instead of reporting a drift.  A model with actuators is watched by its
energy balance, energy minus the work the actuators did (``sim.actuator_work()``), which an
ideal actuator keeps constant under ``energy_momentum`` (joint dampers take energy out).
"""
from __future__ import annotations

import collections
import math
import time

import numpy as np

from rtrigid import scenarios


def _components(sim, conserved):
    linear, angular = sim.momentum()
    return np.array([(linear if kind == "linear" else angular)[axis] for kind, axis in conserved])


def conserved_label(conserved):
    names = {"linear": "P", "angular": "L"}
    return ", ".join(f"{names.get(k, k)}{'xyz'[a]}" for k, a in conserved)


class Conservation:
    """Energy and momentum drift since the last baseline, with a short history."""

    def __init__(self, sim, history=300):
        self.sim = sim
        self.conserved = list(scenarios.info(sim).get("conserved", []))
        self.label = conserved_label(self.conserved)
        self.actuated = sim.na > 0
        self.energy_label = "energy - actuator work" if self.actuated else "energy"
        self.damped = any(getattr(j, "damping", 0.0) for j in getattr(sim.model, "joints", ()))
        self.energy_history = collections.deque(maxlen=history)
        self.momentum_history = collections.deque(maxlen=history)
        self.times = collections.deque(maxlen=history)   # simulated time of each sample
        self.events = collections.deque(maxlen=16)       # (sample number, label)
        self.samples = 0
        self.since = ("the start", sim.t)
        self.rebaseline()

    def mark(self, label):
        """An event that changes energy or momentum on purpose (``label``: "push", "reset"):
        a new baseline, the event marked on the chart; the histories go on."""
        self.events.append((self.samples, label))
        self.since = (label, self.sim.t)
        self._baseline()

    def event_positions(self):
        """Where the events fall in the histories (indices, oldest sample 0)."""
        first = self.samples - len(self.energy_history)
        return [(n - first, label) for n, label in self.events if n >= first]

    def balance(self):
        """What should stay constant: the energy, less the actuators' work if there are any (J)."""
        if self.actuated:
            return self.sim.energy() - float(self.sim.actuator_work().sum())
        return self.sim.energy()

    def rebaseline(self):
        """Start again: a new baseline and empty histories."""
        self.energy_history.clear()
        self.momentum_history.clear()
        self.times.clear()
        self.events.clear()
        self.since = ("the start", self.sim.t)
        self._baseline()

    def _baseline(self):
        sim = self.sim
        self.e0 = self.balance()
        self.e_scale = max(abs(self.e0), sim.kinetic_energy(), 1e-300)
        linear, angular = sim.momentum()
        self.c0 = _components(sim, self.conserved)
        self.c_scale = np.array([max(np.linalg.norm(linear if k == "linear" else angular),
                                     1e-300) for k, _ in self.conserved])
        self.energy = self.e0
        self.energy_drift = 0.0
        self.momentum_drift = 0.0 if self.conserved else None
        self.max_energy_drift = 0.0
        self.max_momentum_drift = 0.0 if self.conserved else None
        self.max_constraint_error = self.sim.constraint_error()
        self.loads_applied = self._loads_applied()

    def _loads_applied(self):
        return any(np.any(f) or np.any(t) for f, t in
                   (self.sim.applied(b) for b in range(self.sim.nb)))

    def sample(self):
        """Measure the drifts now and record them."""
        sim = self.sim
        self.loads_applied = self._loads_applied()
        self.energy = self.balance()
        self.energy_drift = abs(self.energy - self.e0) / self.e_scale
        self.max_energy_drift = max(self.max_energy_drift, self.energy_drift)
        self.energy_history.append(self.energy_drift)
        self.times.append(sim.t)
        self.samples += 1
        if self.conserved:
            drift = np.abs(_components(sim, self.conserved) - self.c0) / self.c_scale
            self.momentum_drift = float(drift.max())
            self.max_momentum_drift = max(self.max_momentum_drift, self.momentum_drift)
            self.momentum_history.append(self.momentum_drift)
        self.max_constraint_error = max(self.max_constraint_error, sim.constraint_error())


class FrameTimer:
    """Frames per second, real-time factor and step cost over a sliding window of wall time."""

    def __init__(self, window=1.0):
        self.window = window
        self._frames = collections.deque()
        self._advances = collections.deque()  # (wall time, elapsed, simulated, steps, cost)
        self.fps = 0.0
        self.real_time_factor = 0.0
        self.step_cost = 0.0
        self.steps_per_frame = 0.0

    def frame(self, now=None):
        now = time.perf_counter() if now is None else now
        self._frames.append(now)
        while self._frames and self._frames[0] < now - self.window:
            self._frames.popleft()
        if len(self._frames) > 1:
            span = self._frames[-1] - self._frames[0]
            self.fps = (len(self._frames) - 1) / span if span > 0 else 0.0

    def advanced(self, elapsed, simulated, steps, cost, now=None):
        """Record one update: wall seconds given, simulated seconds, steps and their cost."""
        now = time.perf_counter() if now is None else now
        self._advances.append((now, elapsed, simulated, steps, cost))
        while self._advances and self._advances[0][0] < now - self.window:
            self._advances.popleft()
        wall = sum(a[1] for a in self._advances)
        sim = sum(a[2] for a in self._advances)
        steps = sum(a[3] for a in self._advances)
        cost = sum(a[4] for a in self._advances)
        self.real_time_factor = sim / wall if wall > 0 else 0.0
        self.step_cost = cost / steps if steps else 0.0
        self.steps_per_frame = steps / len(self._advances)


def fmt_drift(value):
    if value is None:
        return "n/a"
    if value == 0.0:
        return "0"
    return f"{value:.1e}"


def kept_to(value):
    """A relative drift in plain words: "to 1 part in 10^14", "exactly"."""
    if value is None:
        return "n/a"
    if value == 0.0:
        return "exactly"
    if value >= 0.1:
        return f"only to {100 * value:.0f} %"
    return f"to 1 part in 10^{int(math.floor(-math.log10(value)))}"


def log_drift(value, floor=1e-17):
    """log10 of a drift for the strip chart, with zero drawn at the floor."""
    return math.log10(max(value, floor))
