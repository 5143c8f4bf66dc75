"""The viewer's HUD panels: the text lines (time, speed, cost, drifts, selection, spin,
feedback, legend, a controller's lines), the key help and the chart's legend.

:class:`HudMixin` holds these methods of :class:`viewer.app.Viewer`; :mod:`viewer.hud`
lays them out and draws them.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .monitor import fmt_drift, kept_to

KEY_HELP = ("space pause   . one step   , one frame   -/= speed   r reset   h hud   f follow\n"
            "t traces   w omega   l momentum   c contacts   k kick   u spin up   tab select   esc deselect/quit\n"
            "drag a body: pull/push   drag elsewhere: orbit   right-drag: pan   wheel: zoom")
FEEDBACK_SECONDS = 4.0  # how long the HUD says what a push, kick, spin-up or reset did


class HudMixin:
    """The HUD's text and chart legend, for :class:`viewer.app.Viewer`."""

    def _draw_hud(self, fresh_text=False):
        lines = self.hud_lines()
        roomy = self.renderer.size[0] >= 900
        help_text = KEY_HELP
        if getattr(self.controller, "key_help", None):
            help_text = self.controller.key_help + "\n" + help_text
        self.hud.set_text(lines, help_text if self._keys and roomy else "", force=fresh_text)
        mon = self.monitor
        self.hud.draw(self.renderer, mon.energy_history, mon.momentum_history,
                      mon.event_positions(), self._chart_legend())

    def hud_lines(self):
        """The HUD's text now, line by line."""
        sim, mon, tim = self.sim, self.monitor, self.timer
        state = "PAUSED" if self.paused else f"speed x{self.speed:g}"
        lines = [
            f"t = {sim.t:.3f} s   {state}   real-time factor {tim.real_time_factor:.2f}   "
            f"{tim.fps:.0f} fps",
            f"{sim.integrator}, dt = {sim.dt:g} s: {tim.step_cost * 1e6:.1f} us/step in the loop, "
            f"{tim.steps_per_frame:.1f} steps/frame",
        ]
        since = "" if mon.since[0] == "the start" else f" since the {mon.since[0]} at t = {mon.since[1]:.2f} s"
        if mon.loads_applied:
            lines.append("applied loads act: energy and momentum change (that is their work, "
                         "not an error)")
        else:
            what = mon.energy_label.capitalize()
            if mon.damped:
                drift = (f"{what} ({mon.energy:.6g} J) changed by {fmt_drift(mon.energy_drift)} "
                         f"(relative){since}: the joint dampers take energy out")
            else:
                drift = (f"{what} ({mon.energy:.6g} J) kept {kept_to(mon.max_energy_drift)}"
                         f"{since}: drift now {fmt_drift(mon.energy_drift)}, worst "
                         f"{fmt_drift(mon.max_energy_drift)}")
            lines.append(drift)
            if mon.conserved:
                lines.append(f"momentum {mon.label} kept {kept_to(mon.max_momentum_drift)}: "
                             f"drift now {fmt_drift(mon.momentum_drift)}, worst "
                             f"{fmt_drift(mon.max_momentum_drift)}")
        status = f"joints hold to {fmt_drift(mon.max_constraint_error)} m"
        if self.selected is not None:
            follow = ", followed" if self.follow == self.selected else ""
            status += (f"   selected: {sim.names[self.selected]}{follow} (Esc or a click on "
                       "empty space clears)")
        lines.append(status)
        lines += self._spin_lines()
        if self.feedback is not None and time.perf_counter() - self.feedback[1] < FEEDBACK_SECONDS:
            lines.append(self.feedback[0])
        legend = [text for show, text in (
            (self.show_omega, "yellow arrow: angular velocity ω (length ∝ rad/s)"),
            (self.show_momentum, "magenta arrow: angular momentum L about the pivot or centre "
                                 "of mass (length ∝ N·m·s)"),
            (any(np.any(self.sim.applied(b)[0]) for b in range(self.sim.nb)),
             "green arrow: applied force"),
            (self.show_traces and bool(self._traces), "blue line: the path of the traced point"),
            (self.show_contacts, "red ball, blue arrow: a contact point and its normal (last "
                                 "step)"))
            if show]
        lines += legend
        if self.controller is not None and hasattr(self.controller, "hud_lines"):
            lines += list(self.controller.hud_lines(sim))
        return lines

    def _chart_legend(self):
        mon = self.monitor
        t = np.asarray(mon.times, dtype=np.float64)
        span = float(np.clip(np.diff(t), 0.0, None).sum()) if len(t) > 1 else 0.0
        what = "orange: " + mon.energy_label
        if mon.conserved:
            what += f", blue: momentum {mon.label}"
        return f"relative drift (log scale) over the last {span:.2f} s; {what}; | an event"

    def _spin_lines(self):
        """The fastest spin in words, and whether the frames can show it turning."""
        if self.sim.nb == 0:
            return []
        rates = [float(np.linalg.norm(self.sim.velocity(b)[1])) for b in range(self.sim.nb)]
        b = int(np.argmax(rates))
        rate, turn = rates[b], rates[b] * self._frame_time()
        if rate < 1.0:
            return []
        line = (f"fastest spin: {self.sim.names[b]} at {abs(rate):.3g} rad/s "
                f"({abs(rate) / (2 * math.pi):.3g} rev/s), {math.degrees(turn):.0f} deg a frame")
        stripes, marks = self.spin_visibility(b)
        if stripes < 1.0 or marks < 1.0:
            line += ": too fast for the frames, drawn blurred; press - to slow down"
        return [line]
