"""Heads-up display: a text panel (pyglet labels), the key help on its own panel, and a strip
chart of the drifts with its legend and the events (pushes, resets) marked.

The text is laid out again only a few times a second (layout is the costly part); the chart
is redrawn every frame from the monitor's history, as log10 of the relative drift.
"""
from __future__ import annotations

import time

import moderngl
import numpy as np

from .camera import ortho_pixels
from .monitor import log_drift

PANEL = (1.0, 1.0, 1.0, 0.6)
HELP_PANEL = (1.0, 1.0, 1.0, 0.82)   # the key help stays readable over dark bodies
ENERGY_COLOR = (0.90, 0.45, 0.10, 1.0)
MOMENTUM_COLOR = (0.15, 0.45, 0.85, 1.0)
CHART_RANGE = (-17.0, 0.0)  # log10 of the drift


def _quad(x0, y0, x1, y1, color):
    c = color
    return [(x0, y0, 0, *c), (x1, y0, 0, *c), (x1, y1, 0, *c),
            (x0, y0, 0, *c), (x1, y1, 0, *c), (x0, y1, 0, *c)]


class Hud:
    def __init__(self, pyglet, size, refresh=0.25):
        self.pyglet = pyglet
        self.batch = pyglet.graphics.Batch()
        self.font_size = 10 if size[1] < 500 else 11
        self.label = pyglet.text.Label("", x=12, y=size[1] - 10, anchor_y="top", multiline=True,
                                       width=max(size[0] - 24, 100), font_size=self.font_size,
                                       color=(25, 25, 30, 255), batch=self.batch)
        self.help = pyglet.text.Label("", x=size[0] - 10, y=10, anchor_x="right",
                                      anchor_y="bottom", multiline=True, width=size[0],
                                      align="right", font_size=self.font_size - 2,
                                      color=(60, 60, 70, 255), batch=self.batch)
        self.legend = pyglet.text.Label("", x=8, y=0, anchor_y="bottom",
                                        font_size=self.font_size - 2, color=(40, 40, 50, 255),
                                        batch=self.batch)
        self.axis_labels = [
            pyglet.text.Label(f"1e{e}", x=0, y=0, font_size=self.font_size - 2,
                              color=(60, 60, 60, 255), anchor_y="center", batch=self.batch)
            for e in (-15, -10, -5, 0)]
        self.refresh = refresh
        self._last = -1e9
        self.size = (0, 0)
        self.resize(size)

    def resize(self, size):
        self.size = size
        self.label.y = size[1] - 10
        self.label.width = max(size[0] - 24, 100)
        self.help.x, self.help.width = size[0] - 10, size[0]
        w = min(320, size[0] // 3)
        h = min(110, size[1] // 5)
        self.chart = (48, 12, 48 + w, 12 + h)
        x0, y0, x1, y1 = self.chart
        self.legend.y = y1 + 8
        for label, e in zip(self.axis_labels, (-15, -10, -5, 0)):
            label.x = 8
            label.y = y0 + (e - CHART_RANGE[0]) / (CHART_RANGE[1] - CHART_RANGE[0]) * (y1 - y0)

    def set_text(self, lines, help_text="", force=False):
        now = time.perf_counter()
        if force or now - self._last >= self.refresh:
            self.label.text = "\n".join(lines)
            if self.help.text != help_text:
                self.help.text = help_text
            self._last = now

    def draw(self, renderer, energy, momentum, events=(), legend=""):
        """Panels, chart (histories of relative drift, ``events`` as (index, label) marked by
        a vertical line) and text, over the finished scene."""
        w, h = self.size
        mvp = ortho_pixels(w, h)
        if legend != self.legend.text:
            self.legend.text = legend
        text_h = self.label.content_height
        quads = _quad(6, h - 16 - text_h, min(w - 6, 12 + self.label.content_width + 12), h - 4,
                      PANEL)
        x0, y0, x1, y1 = self.chart
        quads += _quad(4, y0 - 6, max(x1 + 6, 8 + self.legend.content_width + 6),
                       y1 + 12 + self.legend.content_height, PANEL)
        if self.help.text:
            hw, hh = self.help.content_width, self.help.content_height
            quads += _quad(w - 16 - hw, 4, w - 4, 16 + hh, HELP_PANEL)
        renderer.lines(np.array(quads, np.float32), mvp, mode=moderngl.TRIANGLES, depth=False)
        lo, hi = CHART_RANGE
        grid = []
        for e in (-15, -10, -5, 0):
            y = y0 + (e - lo) / (hi - lo) * (y1 - y0)
            grid += [(x0, y, 0, 0.6, 0.6, 0.6, 1), (x1, y, 0, 0.6, 0.6, 0.6, 1)]
        cap = energy.maxlen or max(len(energy), 1)
        for index, _ in events:
            x = x0 + (x1 - x0) * (index + cap - len(energy)) / max(cap - 1, 1)
            grid += [(x, y0, 0, 0.25, 0.25, 0.3, 1), (x, y1, 0, 0.25, 0.25, 0.3, 1)]
        renderer.lines(np.array(grid, np.float32), mvp, depth=False)
        for history, color in ((energy, ENERGY_COLOR), (momentum, MOMENTUM_COLOR)):
            if len(history) < 2:
                continue
            values = np.array([log_drift(v) for v in history])
            cap = history.maxlen or len(history)
            xs = x0 + (x1 - x0) * (np.arange(len(values)) + cap - len(values)) / max(cap - 1, 1)
            ys = y0 + (np.clip(values, lo, hi) - lo) / (hi - lo) * (y1 - y0)
            strip = np.zeros((len(values), 7), np.float32)
            strip[:, 0], strip[:, 1] = xs, ys
            strip[:, 3:] = color
            renderer.lines(strip, mvp, mode=moderngl.LINE_STRIP, depth=False)
        # pyglet draws the text into whatever framebuffer is bound: ours
        self.batch.draw()

    def release(self):
        self.label.delete()
        self.help.delete()
        self.legend.delete()
        for label in self.axis_labels:
            label.delete()
