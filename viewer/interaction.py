"""How the viewer is handled: the key bindings, the mouse (orbit, pan, zoom), picking a body,
dragging it (a pull while held, an impulse on release), kicks and spin-ups, and a
controller's draggable target.

:class:`InteractionMixin` holds these methods of :class:`viewer.app.Viewer`, its window
event handlers included.
"""
from __future__ import annotations

import time

import numpy as np

from . import scene
from .picking import ray_part

DEFAULT_KEYS = {
    "pause": "SPACE", "step": "PERIOD", "frame": "COMMA", "slower": "MINUS", "faster": "EQUAL", "reset": "R",
    "hud": "H", "follow": "F", "traces": "T", "omega": "W", "momentum": "L", "kick": "K",
    "spin": "U", "select_next": "TAB", "axes": "A", "camera_home": "HOME", "quit": "ESCAPE",
    "contacts": "C",
}
SPEEDS = (1 / 64, 8.0)
PICK_TOLERANCE = 10.0  # pixels around a body that still pick it (thin links, rings)


def key_table(keys, keymod):
    if keys is False:
        return {}
    table = dict(DEFAULT_KEYS)
    if keys not in (None, True):
        if not isinstance(keys, dict):
            raise ValueError(f"keys: expected a dict action -> key name, True or False, got {keys!r}")
        for action, name in keys.items():
            if action not in DEFAULT_KEYS:
                raise ValueError(f"keys: unknown action {action!r}; known: {sorted(DEFAULT_KEYS)}")
            table[action] = name
    out = {}
    for action, name in table.items():
        if name is None:
            continue
        symbol = getattr(keymod, str(name).upper(), None)
        if not isinstance(symbol, int):
            raise ValueError(f"keys: {action}: unknown key name {name!r}")
        out[symbol] = action
    return out


class InteractionMixin:
    """Picking, dragging, impulses and the window's events, for :class:`viewer.app.Viewer`."""

    def _pick_exact(self, px, py, poses):
        """(body index, world point) of the first thing the ray through window pixel (px, py)
        meets, or None: every geom and ground through ``sim.raycast`` (exactly as they
        collide), and the parts that are drawn only (a torus, a robot file's visuals, a body
        without geoms) through their own ray casts, at ``poses``.  The nearest hit wins; the
        world's scenery and the grounds stop the ray but are not picked (None)."""
        origin, direction = self.camera.ray(px, py)
        hit = self.sim.raycast(origin, direction)
        best = (np.inf, None, None) if hit is None else (hit.distance, hit.body, hit.point)
        for v, (x, q) in zip(self.visuals, poses):
            drawn_only = [part for part in v.parts if not part.collides]
            if not drawn_only:
                continue
            rot = scene.rotation(q)
            o, d = rot.T @ (origin - x), rot.T @ direction
            for part in drawn_only:
                t = ray_part(part, o, d)
                if t is not None and t < best[0]:
                    best = (t, v.index, origin + t * direction)
        _, body, point = best
        return None if body is None else (body, point)

    def pick(self, px, py):
        """(body index, world point) of the body drawn at window pixel (px, py), or None.

        The first thing along the ray through the pixel decides, as in MuJoCo's viewer: a
        body's geom (``sim.raycast``: hulls, meshes, every geom of a compound body) or a part
        drawn only; the world's scenery or a ground there picks no body.  A click that misses
        every body by at most PICK_TOLERANCE pixels takes the nearest one (thin links and
        rings are a few pixels wide): rays through rings of pixels around the click, nearest
        ring first.  Picking reads the simulation's current state (``sim.pose``; what
        ``sim.raycast`` sees), which the frame shows at most one step behind.
        """
        poses = [self.sim.pose(b) for b in range(self.sim.nb)]
        hit = self._pick_exact(px, py, poses)
        for radius in PICK_TOLERANCE * np.array([0.25, 0.5, 0.75, 1.0]):
            if hit is not None:
                return hit
            for angle in np.linspace(0.0, 2.0 * np.pi, 12, endpoint=False):
                hit = self._pick_exact(px + radius * np.cos(angle), py + radius * np.sin(angle),
                                       poses)
                if hit is not None:
                    break
        return hit

    def _begin_drag(self, px, py):
        hit = self.pick(px, py)
        if hit is None:
            return False
        b, point = hit
        x, q = self.sim.pose(b)
        self.selected = b
        self._drag = {"body": b, "point_body": scene.rotation(q).T @ (point - x),
                      "cursor": (px, py)}
        return True

    def _drag_ends(self):
        """World (start, end) of the drag now: the picked point and the cursor in its plane."""
        d = self._drag
        x, q = self.sim.pose(d["body"])
        start = x + scene.rotation(q) @ d["point_body"]
        return start, self.camera.under_cursor(*d["cursor"], start)

    def pull_force(self):
        """The force (world, N) and its world point with which the held drag pulls now (see
        ``pull``), or None when no body is held."""
        if self._drag is None or self.pull == 0.0:
            return None
        start, end = self._drag_ends()
        b = self._drag["body"]
        v, w = self.sim.velocity(b)
        x = self.sim.pose(b)[0]
        v_point = v + np.cross(w, start - x)
        m = self.sim.body_mass[b]
        return m * (self.pull ** 2 * (end - start) - 2.0 * self.pull * v_point), start

    def _hold_pull(self):
        """Apply the held drag's pull for this frame's steps; what to take off after them."""
        pull = self.pull_force()
        if pull is None:
            return None
        b = self._drag["body"]
        f0, t0 = self.sim.applied(b)
        self.sim.apply_force(b, pull[0], point=pull[1])
        return (b, f0, t0) + self.sim.applied(b)

    def _let_go(self, held):
        """Take the frame's pull off again: the body's loads back to what they were, bit for
        bit, or (if a controller changed them meanwhile) less what the pull added."""
        if held is None:
            return
        b, f0, t0, f1, t1 = held
        f, t = self.sim.applied(b)
        if np.array_equal(f, f1) and np.array_equal(t, t1):
            self.sim.clear_applied(b)
            self.sim.apply_force(b, f0)
            self.sim.apply_torque(b, t0)
        else:
            self.sim.apply_force(b, f0 - f1)
            self.sim.apply_torque(b, t0 - t1)

    def _end_drag(self):
        start, end = self._drag_ends()
        b = self._drag["body"]
        self._drag = None
        impulse = self.impulse_gain * self.sim.body_mass[b] * (end - start)
        if np.linalg.norm(impulse) == 0.0:
            return None
        self.sim.apply_impulse(b, impulse, start)
        self.last_impulse = (b, impulse, start)
        self._event("push", f"push: {np.linalg.norm(impulse):.3g} N·s on {self.sim.names[b]} "
                            "at the picked point")
        return impulse

    def drag(self, start_px, end_px):
        """Pick the body at ``start_px``, drag to ``end_px``, release: the impulse applied.

        Returns the world impulse (N s), or None if nothing was picked.
        """
        if not self._begin_drag(*start_px):
            return None
        self._drag["cursor"] = tuple(end_px)
        return self._end_drag()

    def kick(self, body=None):
        """Upward impulse at the centre of mass: Δv of 3 body radii per second."""
        b = self._target(body)
        x, _ = self.sim.pose(b)
        j = np.array([0.0, 0.0, 3.0 * self.visuals[b].radius * self.sim.body_mass[b]])
        self.sim.apply_impulse(b, j, x)
        self._event("kick", f"kick: {j[2]:.3g} N·s upward on {self.sim.names[b]}")

    def spin_up(self, body=None):
        """Angular impulse about the principal axis nearest the spin: +20 % (at least 2 rad/s).

        Applied as a couple (two opposite point impulses), so no linear momentum is added.
        """
        b = self._target(body)
        x, q = self.sim.pose(b)
        _, omega = self.sim.velocity(b)
        rot = scene.rotation(q)
        k = int(np.argmax(np.abs(rot.T @ omega))) if np.any(omega) else 2
        axis = rot[:, k]
        rate = float(axis @ omega)
        sign = 1.0 if rate >= 0.0 else -1.0
        dl = self.sim.body_inertia[b][k] * max(0.2 * abs(rate), 2.0) * sign
        arm = rot[:, (k + 1) % 3] * self.visuals[b].radius
        j = dl / (2.0 * self.visuals[b].radius) * np.cross(axis, arm / np.linalg.norm(arm))
        self.sim.apply_impulse(b, j, x + arm)
        self.sim.apply_impulse(b, -j, x - arm)
        self._event("spin", f"spin-up: {abs(dl):.3g} N·m·s about {self.sim.names[b]}'s "
                            f"{'xyz'[k]} axis (a couple: no push)")

    def _event(self, label, text):
        """Mark an event on the chart and say in the HUD what was done, for a few seconds."""
        self.monitor.mark(label)
        self.feedback = (f"{text}  (t = {self.sim.t:.3f} s)", time.perf_counter())

    def _on_target(self, px, py):
        """Whether window pixel (px, py) is on the controller's target marker."""
        target = getattr(self.controller, "target", None)
        if target is None:
            return False
        target = np.asarray(target, dtype=np.float64)
        centre = np.asarray(self.project(target))
        rim = np.asarray(self.project(target + self._target_radius() * self.camera.up()))
        reach = np.linalg.norm(rim - centre) + PICK_TOLERANCE
        return bool(np.linalg.norm(centre - (px, py)) <= reach)

    def move_target(self, px, py):
        """Move the controller's target to under window pixel (px, py), in the plane through
        it facing the camera; returns the new world point."""
        point = self.camera.under_cursor(px, py, self.controller.target)
        self.controller.move_target(point)
        return point

    def _target(self, body):
        if body is not None:
            return self.sim.body_index(body)
        return 0 if self.selected is None else self.selected

    def on_key_press(self, symbol, modifiers):
        if self._keys and hasattr(self.controller, "on_key"):
            if self.controller.on_key(self.pyglet.window.key.symbol_string(symbol)):
                return self.pyglet.event.EVENT_HANDLED
        action = self._keys.get(symbol)
        if action is None:
            return self.pyglet.event.EVENT_HANDLED  # unbound keys do nothing (no ESC close)
        if action == "pause":
            self.paused = not self.paused
        elif action == "step":
            self.step_once()
        elif action == "frame":
            self.frame_once()
        elif action == "slower":
            self.speed = max(self.speed / 2.0, SPEEDS[0])
        elif action == "faster":
            self.speed = min(self.speed * 2.0, SPEEDS[1])
        elif action == "reset":
            self.reset()
        elif action == "hud":
            self.show_hud = not self.show_hud
        elif action == "follow":
            self.follow = None if self.follow is not None else self._target(None)
            if self.follow is None:
                self.camera.target = self.camera.home[0].copy()
        elif action == "traces":
            self.show_traces = not self.show_traces
        elif action == "omega":
            self.show_omega = not self.show_omega
        elif action == "momentum":
            self.show_momentum = not self.show_momentum
        elif action == "axes":
            self.show_axes = not self.show_axes
        elif action == "contacts":
            self.show_contacts = not self.show_contacts
        elif action == "kick":
            self.kick()
        elif action == "spin":
            self.spin_up()
        elif action == "select_next":
            self.selected = 0 if self.selected is None else (self.selected + 1) % self.sim.nb
        elif action == "camera_home":
            self.camera.reset()
            self.follow = None
        elif action == "quit" and self.selected is not None:
            self.deselect()
        elif action == "quit":
            self.close()
        return self.pyglet.event.EVENT_HANDLED

    def on_mouse_press(self, x, y, button, modifiers):
        if not self.mouse_enabled:
            return
        mouse = self.pyglet.window.mouse
        shift = modifiers & self.pyglet.window.key.MOD_SHIFT
        if button == mouse.LEFT and not shift and self._on_target(x, y):
            self._mode = "target"
        elif button == mouse.LEFT and not shift and self._begin_drag(x, y):
            self._mode = "drag"
        elif button == mouse.LEFT and not shift:
            self._mode = "orbit"
            self._press = (x, y)
        else:
            self._mode = "pan"

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers):
        if self._mode == "drag" and self._drag is not None:
            self._drag["cursor"] = (x, y)
        elif self._mode == "target":
            self.move_target(x, y)
        elif self._mode == "orbit":
            self.camera.orbit(dx, dy)
        elif self._mode == "pan":
            self.follow = None
            self.camera.pan(dx, dy)

    def on_mouse_release(self, x, y, button, modifiers):
        if self._mode == "drag" and self._drag is not None:
            self._drag["cursor"] = (x, y)
            self._end_drag()
        elif self._mode == "orbit" and self._press == (x, y):
            self.deselect()   # a click on empty space
        self._mode = None

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y):
        if self.mouse_enabled:
            self.camera.zoom(scroll_y)

    def on_resize(self, width, height):
        self.camera.resize(width, height)
        size = self.window.get_framebuffer_size()
        self.renderer.resize(size)
        self.hud.resize(size)

    def on_draw(self):
        if not self.closed:
            self.render()

    def on_close(self):
        self.close()
        return self.pyglet.event.EVENT_HANDLED
