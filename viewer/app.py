"""The Viewer: a pyglet window (or a headless surface) showing a running Simulation.

    sim = rtrigid.scenarios.build("gyro_top")
    viewer.Viewer(sim).run()                      # the library paces the loop

    with viewer.Viewer(sim, 640, 480, headless=True) as v:   # tests, screenshots
        v.update(1 / 60); v.render(); v.screenshot("top.png")

The viewer talks to the simulation only through its public API: ``advance`` (real-time
stepping), ``alpha``/``interpolated_pose`` (smooth frames), ``joints``, ``contacts``,
``raycast`` (picking), ``apply_impulse``, ``snapshot``/``restore``, and the model's ``grounds``
(the floor, and tilted grounds as checkered planes) and ``loop_joints`` (drawn where the loops
close).  Its perturbations are impulses, applied once, and the pull of a held drag
(``apply_force`` at the picked point for one frame's steps, taken off after them); it never
clears forces the user applied, and a reset keeps them.

A *controller* drives the model: ``Viewer(sim, controller=c)`` calls ``c(sim)`` before every
physics step (then the viewer steps one step at a time; without one it calls ``advance``).
It sets the inputs through the simulation's public API (``set_controls``, ``apply_force``,
...) and should keep what it needs between steps there too (e.g. the servo targets in
``sim.controls()``), so a reset or the run-ahead that places the camera puts it back.
Optional attributes the viewer uses (see ``demos.controllers``):

- ``on_key(name) -> bool``: a key press, by pyglet's key name ("LEFT", "PAGEUP", "Q"); True
  if the controller used it (it is then not the viewer's);
- ``key_help``: a line for the key help;
- ``hud_lines(sim) -> list of str``: the control inputs, for the HUD;
- ``target``: a world point (3,) drawn as a marker that the mouse drags, and
  ``move_target(point)``, called with the new point while it is dragged.

If your program owns the loop, call ``poll()`` (window events), step the simulation your way,
and ``render()`` each frame.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from . import scene
from .camera import OrbitCamera
from .drawing import DrawingMixin
from .interaction import SPEEDS, InteractionMixin, key_table
from .monitor import Conservation, FrameTimer
from .panels import HudMixin

# the constants of the drawing, the interaction and the HUD, importable from here too
from .drawing import (CONTACT_COLOR, DRAG_COLOR, FLOOR_DARK, FLOOR_LIGHT,  # noqa: F401
                            GROUND, LOAD_COLOR, MOMENTUM_COLOR, NORMAL_COLOR, OMEGA_COLOR,
                            SHADOW, SKY_HIGH, SKY_LOW, TARGET_COLOR, TRACE_COLOR, UNIT_MESHES)
from .interaction import DEFAULT_KEYS, PICK_TOLERANCE  # noqa: F401
from .panels import FEEDBACK_SECONDS, KEY_HELP  # noqa: F401

LOOKAHEAD_SECONDS, LOOKAHEAD_STEPS = 5.0, 4000  # the motion the camera and floor are set for


def load_pyglet(headless):
    """Import pyglet for a window or for a headless (EGL) surface.

    The choice is made when ``pyglet.window`` is first imported, so it cannot change later in
    the same process.
    """
    import sys

    import pyglet

    if "pyglet.window" not in sys.modules:
        pyglet.options["headless"] = bool(headless) or os.environ.get("PYGLET_HEADLESS") == "1"
        # pyglet's per-call glGetError checks cost frame time and trip over errors that
        # moderngl already reports
        pyglet.options["debug_gl"] = False
    elif bool(pyglet.options["headless"]) != bool(headless):
        raise RuntimeError(
            f"headless: pyglet was already set up {'with' if pyglet.options['headless'] else 'without'}"
            " a headless surface in this process; use one mode per process")
    try:
        import pyglet.window  # noqa: F401  (selects the platform now)
    except Exception as exc:
        _no_display(exc)
        raise
    return pyglet


NO_DISPLAY = ("viewer: no display to open a window on; pass headless=True (rtrigid view "
              "--headless) or run under an X server (xvfb-run)")


def _no_display(exc):
    """Turn pyglet's two NoSuchDisplayException classes (xlib, window) into one message."""
    if type(exc).__name__ == "NoSuchDisplayException":
        raise RuntimeError(f"{NO_DISPLAY}: {exc}") from None


class Viewer(DrawingMixin, HudMixin, InteractionMixin):
    """Window (or headless surface) drawing ``sim`` and driving it in real time.

    One viewer at a time per process: close one (or leave its ``with`` block) before opening
    the next.

    Parameters
    ----------
    sim : rtrigid.simulation.Simulation
    width, height : int
        Window size in pixels.
    headless : bool
        Draw into an offscreen surface (EGL, no display needed).
    title : str
        Window caption.
    keys : True, False or dict
        Key bindings: True for the defaults (:data:`DEFAULT_KEYS`), False for none, or a dict
        action -> pyglet key name (``None`` turns that action off).
    mouse : bool
        Mouse camera control and impulse dragging.
    speed : float
        Simulated seconds per wall-clock second (slow motion below 1).
    paused, hud, show_omega, show_momentum : bool
        Start paused; show the HUD; draw each body's angular velocity (yellow) and angular
        momentum about its world joint or centre of mass (magenta) as arrows.
    follow : body index or name, optional
        Keep the camera on this body.
    colors : dict, optional
        {body: (r, g, b)} in [0, 1], instead of the palette.
    traces : None, False or dict
        Paths drawn behind body points: None traces the far end of bodies joined to the world
        (a top's crown), False none, or {body: body-frame point or axis like "+x"}.
    impulse_gain : float
        A drag of d metres applies the impulse ``impulse_gain * m * d`` (N s) on release, m
        the body's mass.
    pull : float
        While the left button holds a body, a spring-damper pulls the picked point toward the
        cursor: the force m (pull² d - 2 pull v) at that point (N), d the point's distance to
        the cursor, v its velocity, m the body's mass -- a critically damped spring of
        angular frequency ``pull`` (rad/s), MuJoCo's perturbation.  It goes through the
        public ``apply_force(..., point=...)`` for each frame's steps and is taken off after
        them, so the user's own forces are never touched.  0 turns it off.
    interpolate : bool
        Draw poses between the last two steps (``sim.alpha``); off draws the current state.
    max_fps : float
        Frame rate cap of :meth:`run`.
    axes : bool
        Draw small world axes at the origin (x red, y green, z blue); key A toggles them.
    show_contacts : bool
        Draw the last step's contacts (``sim.contacts()``): each point as a red ball and its
        normal, into the body, as a blue arrow; key C toggles them.
    controller : callable, optional
        ``controller(sim)`` before every physics step (see the module docstring for the
        optional keys, HUD lines and draggable target it may have).
    floor : None or float
        Height of the floor; None places it from the motion (none without gravity, none
        under a model whose contact grounds are all tilted: those are drawn as they lie).
    lookahead : float
        Simulated seconds run ahead to place the camera and floor (the motion they frame).
    msaa : int
        Multisample antialiasing: samples per pixel (0 off; 4 by default); a window falls
        back to none if the display offers no multisampled frame buffer.
    record : path, optional
        Write the frames to this .mp4 or .gif (:mod:`viewer.record`: imageio), at the pace
        the wall-clock time given to :meth:`update` sets; finished by :meth:`close`.
    """

    _open = None

    def __init__(self, sim, width=960, height=600, *, headless=False, title=None, keys=True,
                 mouse=True, speed=1.0, paused=False, hud=True, traces=None, show_omega=False,
                 show_momentum=False, follow=None, colors=None, impulse_gain=4.0, pull=12.0,
                 interpolate=True, max_fps=60.0, axes=False, controller=None, floor=None,
                 record=None, msaa=4, show_contacts=False, lookahead=LOOKAHEAD_SECONDS):
        for name, value in (("width", width), ("height", height)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 16:
                raise ValueError(f"{name}: expected an integer >= 16, got {value!r}")
        self.sim = sim
        if controller is not None and not callable(controller):
            raise ValueError(f"controller: expected a callable controller(sim), got {controller!r}")
        self.controller = controller
        self._accumulator = 0.0  # wall time not yet stepped, when a controller steps
        from rtrigid.validate import as_scalar

        self.floor = None if floor is None else as_scalar(floor, "floor")
        if msaa not in (0, 2, 4, 8) or isinstance(msaa, bool):
            raise ValueError(f"msaa: expected 0, 2, 4 or 8 samples per pixel, got {msaa!r}")
        self.msaa = int(msaa)
        if record is not None:
            from .record import check_path
            check_path(record)
        self._record_path, self.recorder, self._record_elapsed = record, None, 0.0
        self.speed = self._check_speed(speed)
        self.impulse_gain = self._check_positive(impulse_gain, "impulse_gain")
        self.pull = 0.0 if pull == 0 else self._check_positive(pull, "pull")
        self.max_fps = self._check_positive(max_fps, "max_fps")
        self.lookahead = self._check_positive(lookahead, "lookahead")
        self.headless = bool(headless)
        self.paused = bool(paused)
        self.show_hud = bool(hud)
        self.show_omega = bool(show_omega)
        self.show_momentum = bool(show_momentum)
        self.show_axes = bool(axes)
        self.show_contacts = bool(show_contacts)
        self.interpolate = bool(interpolate)
        self.mouse_enabled = bool(mouse)
        self.visuals = scene.body_visuals(sim, colors)
        self.world_visual = scene.world_visual(sim)
        self.selected = None
        self.follow = None if follow is None else sim.body_index(follow)
        self._trace_points = self._initial_traces(traces)
        self.show_traces = bool(self._trace_points)
        self._traces = {b: [] for b in self._trace_points}
        self.trace_length = 600
        self.last_impulse = None
        self.feedback = None   # (what the last push, kick, spin-up or reset did, when)
        self.frames_drawn = 0
        self._drag = None
        self._press = None   # where an orbit began: released there, it was a click
        self._mode = None
        self._grid = None
        self._slope_grids = {}   # the tilted grounds' checkered planes, by where they are
        self.closed = False
        self._home = sim.snapshot()
        sim.step(0)  # load the compiled kernel now rather than in the first frame
        self.monitor = Conservation(sim)
        self.timer = FrameTimer()
        self._reference_rates = self._rates()
        self._layout_scene(self.lookahead)

        if Viewer._open is not None:
            # moderngl attaches to the current GL context only while it has no other one
            raise RuntimeError("viewer: another Viewer is open in this process; close() it "
                               "first (one viewer per process)")
        pyglet = self.pyglet = load_pyglet(self.headless)
        self._keys = key_table(keys, pyglet.window.key)
        self.window = self._open_window(pyglet, width, height, title)
        try:
            self._open_gl()
        except BaseException:
            if Viewer._open is self:
                self.ctx.release()
                Viewer._open = None
            self.window.close()
            raise
        self.window.push_handlers(self)
        if self._record_path is not None:
            from .record import Recorder
            self.recorder = Recorder(self._record_path)

    # -- set-up ------------------------------------------------------------------------------
    def _open_window(self, pyglet, width, height, title):
        """The window, multisampled if asked and the display offers it (headless frames are
        multisampled offscreen, whatever the surface)."""
        kw = dict(caption=title or "rtrigid", visible=not self.headless,
                  resizable=not self.headless, vsync=False)
        if self.msaa and not self.headless:
            config = pyglet.gl.Config(sample_buffers=1, samples=self.msaa, double_buffer=True,
                                      depth_size=24)
            try:
                return pyglet.window.Window(width, height, config=config, **kw)
            except Exception as exc:
                _no_display(exc)   # no display: say so; no multisampled visual: go without
        try:
            return pyglet.window.Window(width, height, **kw)
        except Exception as exc:
            _no_display(exc)
            raise

    def _open_gl(self):
        import moderngl

        from .hud import Hud
        from .renderer import Renderer

        self.window.switch_to()
        self.ctx = moderngl.create_context()
        Viewer._open = self
        self.camera.resize(*self.window.get_size())
        self.renderer = Renderer(self.ctx, self.window.get_framebuffer_size(), self.msaa)
        self.hud = Hud(self.pyglet, self.window.get_framebuffer_size())

    @staticmethod
    def _check_positive(value, name):
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a number, got {value!r}") from None
        if not math.isfinite(v) or v <= 0.0:
            raise ValueError(f"{name}: must be finite and > 0, got {value!r}")
        return v

    def _check_speed(self, speed):
        v = self._check_positive(speed, "speed")
        if not SPEEDS[0] <= v <= SPEEDS[1]:
            raise ValueError(f"speed: must be in [{SPEEDS[0]}, {SPEEDS[1]}], got {speed!r}")
        return v

    def _initial_traces(self, traces):
        if traces is False:
            return {}
        if traces is None:
            out = {}
            for j in self.sim.joints():
                if j["parent"] != -1:
                    continue
                b = j["child"]
                x, q = self.sim.pose(b)
                away = scene.rotation(q).T @ (x - np.asarray(j["anchor"]))
                if np.linalg.norm(away) > 1e-9:
                    u = away / np.linalg.norm(away)
                    # on the line from the joint through the centre of mass, at the surface
                    out[b] = u * (self.visuals[b].support(u) @ u)
            return out
        if not isinstance(traces, dict):
            raise ValueError(f"traces: expected None, False or a dict body -> point, got {traces!r}")
        return {self.sim.body_index(b): self._trace_point(b, p) for b, p in traces.items()}

    def _trace_point(self, body, point):
        """A body-frame point, or "+x", "-z", ...: the surface point along that body axis."""
        from rtrigid.validate import as_vector

        if isinstance(point, str):
            if len(point) != 2 or point[0] not in "+-" or point[1] not in "xyz":
                raise ValueError(f"traces: expected a point or an axis like '+x', got {point!r}")
            u = np.zeros(3)
            u["xyz".index(point[1])] = 1.0 if point[0] == "+" else -1.0
            return u * (self.visuals[self.sim.body_index(body)].support(u) @ u)
        return as_vector(point, 3, "traces")

    def _layout_scene(self, seconds=LOOKAHEAD_SECONDS, max_steps=LOOKAHEAD_STEPS):
        """Camera, floor and grid from where the bodies go, not only where they are.

        The simulation is run ahead (``seconds`` of simulated time, at most ``max_steps``
        steps) from a snapshot and put back exactly; the points the bodies' surfaces sweep in
        that time decide the rest.  A model with a level contact ground (``add_ground`` with
        normal +z) has its floor there; its tilted grounds (:attr:`slopes`) are drawn as
        checkered planes, and with only those there is no floor.  Otherwise, with gravity the
        floor lies under all of
        them: through the
        lowest world joint if nothing goes below it (a top on its tip), else a little below
        the lowest point reached (a hanging chain).  Without gravity there is no ground and no
        floor is drawn.  The camera frames the sphere around the swept points.
        """
        sim = self.sim
        pts = np.vstack([self._surface_points(), self._swept_points(seconds, max_steps)]
                        + [np.asarray(j["anchor"], dtype=np.float64)[None]
                           for j in sim.joints()])
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        centre = 0.5 * (lo + hi)
        extent = max(float(np.linalg.norm(pts - centre, axis=1).max()), 1e-3)
        self.extent = extent
        self.motion_box = (lo, hi)
        anchors = [float(j["anchor"][2]) for j in sim.joints() if j["parent"] == -1]
        grounds = getattr(sim.model, "grounds", ())
        level = [g.height for g in grounds if g.normal[2] > 1.0 - 1e-12]   # the floor
        self.slopes = [(np.array(g.normal, dtype=np.float64), float(g.height))
                       for g in grounds if g.normal[2] <= 1.0 - 1e-12]
        if self.floor is not None:
            self.ground_z = self.floor
        elif level:
            self.ground_z = float(max(level))
        elif self.slopes:
            self.ground_z = None   # the tilted grounds are the ground
        elif not np.any(sim.gravity):
            self.ground_z = None
        elif anchors and lo[2] >= min(anchors) - 1e-6 * extent:
            self.ground_z = min(anchors)
        else:
            self.ground_z = float(lo[2]) - 0.06 * extent
        self.grid_spacing = scene.nice_spacing(extent / 4.0)
        self.joint_size = None  # a number here draws every joint at that size
        fit = extent / math.sin(0.5 * math.radians(40.0))
        self.camera = OrbitCamera(target=centre, distance=1.05 * fit)

    def _joint_marker_size(self, joint):
        """A joint's marker: a little thicker than the body it holds (a ball shows at each
        link of a chain), small beside that body's size, never lost in the scene.  A robot
        file's mesh draws its own joint housings: there the marker is a thin pin."""
        v = self.visuals[joint["child"]]
        if any(p.kind == "visuals" for p in v.parts):
            return max(min(0.15 * v.thickness, 0.06 * v.radius), 0.005 * self.extent)
        return max(min(0.6 * v.thickness, 0.2 * v.radius), 0.01 * self.extent)

    def _surface_points(self, per_body=400):
        """World points of every body's surface now (at most ``per_body`` each)."""
        out = []
        for v in self.visuals:
            x, q = self.sim.pose(v.index)
            verts = v.mesh[0][:, :3].astype(np.float64)
            step = max(len(verts) // per_body, 1)
            out.append(verts[::step] @ scene.rotation(q).T + x)
        return np.vstack(out)

    def _swept_points(self, seconds, max_steps, samples=120):
        sim = self.sim
        steps = int(min(seconds / sim.dt, max_steps))
        if steps < 1:
            return np.empty((0, 3))
        chunk = max(steps // samples, 1)
        snap = sim.snapshot()
        out = []
        try:
            for _ in range(steps // chunk):
                self._step(chunk)
                out.append(self._surface_points(per_body=60))
        except (ValueError, FloatingPointError):
            pass  # a run that fails ahead is framed as far as it got
        finally:
            sim.restore(snap)
        return np.vstack(out) if out else np.empty((0, 3))

    # -- frame loop ----------------------------------------------------------------------------
    def update(self, elapsed):
        """Advance the simulation by ``elapsed`` wall-clock seconds times ``speed``.

        Nothing happens while paused.  Returns the number of steps taken.
        """
        try:
            elapsed = float(elapsed)
        except (TypeError, ValueError):
            raise ValueError(f"elapsed: expected a number, got {elapsed!r}") from None
        if not math.isfinite(elapsed) or elapsed < 0.0:
            raise ValueError(f"elapsed: must be finite and >= 0, got {elapsed!r}")
        self._record_elapsed += elapsed
        if self.paused:
            self.timer.advanced(elapsed, 0.0, 0, 0.0)
            return 0
        t0 = self.sim.t
        start = time.perf_counter()
        held = self._hold_pull()
        try:
            if self.controller is None:
                n = self.sim.advance(elapsed * self.speed)
            else:
                n = self._advance_controlled(elapsed * self.speed)
        finally:
            self._let_go(held)
        cost = time.perf_counter() - start
        self.timer.advanced(elapsed, self.sim.t - t0, n, cost)
        if n:
            self._after_steps()
        return n

    def _after_steps(self):
        self.monitor.sample()
        for b, point in self._trace_points.items():
            x, q = self.sim.pose(b)
            path = self._traces[b]
            path.append(x + scene.rotation(q) @ point)
            if len(path) > self.trace_length:
                del path[: len(path) - self.trace_length]

    def _step(self, n):
        """``n`` physics steps, the controller called before each."""
        if self.controller is None:
            self.sim.step(n)
            return
        for _ in range(n):
            self.controller(self.sim)
            self.sim.step(1)

    def _advance_controlled(self, elapsed):
        """``sim.advance`` one step at a time, for the controller: whole steps of the
        accumulated time, at most ``sim.max_steps_per_advance`` (the rest is dropped)."""
        sim = self.sim
        self._accumulator += elapsed
        n = int(math.floor(self._accumulator / sim.dt + 1e-9))
        if n > sim.max_steps_per_advance:
            self._accumulator -= (n - sim.max_steps_per_advance) * sim.dt
            n = sim.max_steps_per_advance
        self._accumulator = max(self._accumulator - n * sim.dt, 0.0)
        self._step(n)
        return n

    def step_once(self):
        """One fixed step (the single-step key); pauses the real-time loop."""
        self.paused = True
        self._step(1)
        self._after_steps()

    def frame_once(self):
        """One frame's worth of steps (1/max_fps s of wall time at the speed); pauses."""
        self.paused = False
        self.update(1.0 / self.max_fps)
        self.paused = True

    def deselect(self):
        """Clear the selection (and stop following it)."""
        if self.follow is not None and self.follow == self.selected:
            self.follow = None
            self.camera.target = self.camera.home[0].copy()
        self.selected = None

    def reset(self):
        """Back to the state the viewer opened with; forces the user applied stay applied."""
        sim = self.sim
        loads = [sim.applied(b) for b in range(sim.nb)]
        sim.restore(self._home)
        for b, (force, torque) in enumerate(loads):
            f0, t0 = sim.applied(b)
            if np.any(force != f0):
                sim.apply_force(b, force - f0)
            if np.any(torque != t0):
                sim.apply_torque(b, torque - t0)
        for path in self._traces.values():
            path.clear()
        self._event("reset", "reset to the start")

    def set_speed(self, speed):
        self.speed = self._check_speed(speed)

    # -- poses as drawn ----------------------------------------------------------------------
    def poses(self):
        """(x, q) of every body as the frame shows it (interpolated unless paused)."""
        alpha = None if (self.interpolate and not self.paused) else 1.0
        if alpha is None and self.controller is not None:
            alpha = min(self._accumulator / self.sim.dt, 1.0)
        return [self.sim.interpolated_pose(b, alpha) for b in range(self.sim.nb)]

    # -- drawing -------------------------------------------------------------------------------
    def render(self):
        """Draw one frame: into the window (and show it), or offscreen when headless."""
        self._draw_frame(offscreen=self.headless)
        if self.headless:
            self.ctx.finish()
        else:
            self.window.flip()
        self.timer.frame()
        self.frames_drawn += 1
        if self.recorder is not None:
            self.recorder.add(np.flipud(self.read_pixels()), self._record_elapsed)
            self._record_elapsed = 0.0

    # -- pixels --------------------------------------------------------------------------------
    def project(self, point_world):
        """Window pixel (px, py) where a world point is drawn; origin at the bottom-left."""
        from rtrigid.validate import as_vector

        return self.camera.project(as_vector(point_world, 3, "point_world"))

    def read_pixels(self):
        """The frame as (height, width, 3) uint8, row 0 at the bottom (index [py, px]).

        Headless: the last rendered frame.  With a window: the current state drawn again
        offscreen (the window's own framebuffer is not read back).
        """
        if not self.headless:
            self._draw_frame(offscreen=True)
        return self.renderer.read()

    def screenshot(self, path):
        """Write the current frame to an image file (format from the suffix).

        The frame is drawn again offscreen with the HUD text brought up to date (on screen it
        is laid out only a few times a second).
        """
        from PIL import Image

        self._draw_frame(offscreen=True, fresh_text=True)
        Image.fromarray(np.flipud(self.renderer.read())).save(path)
        return path

    # -- loops ---------------------------------------------------------------------------------
    def _tick(self, dt):
        if self.closed:
            self.pyglet.app.exit()
            return
        self.update(dt)
        if not self.closed:
            self.render()

    def run(self):
        """Show the window and run the simulation in real time until the window closes."""
        if self.headless:
            raise RuntimeError("run: needs a window; headless viewers are driven with "
                               "update() and render()")
        self.pyglet.clock.schedule_interval(self._tick, 1.0 / self.max_fps)
        try:
            self.pyglet.app.run(None)
        finally:
            self.pyglet.clock.unschedule(self._tick)
            self.close()

    def poll(self):
        """Handle pending window events (for a loop you own); False once the window closed."""
        if not self.closed:
            self.window.dispatch_events()
        return not self.closed

    def close(self):
        """Release the GL objects and close the window (safe to call twice)."""
        if self.closed:
            return
        self.closed = True
        if self.recorder is not None:
            self.recorder.close()
        self.window.switch_to()
        self.hud.release()
        self.renderer.release()
        self.ctx.release()
        Viewer._open = None
        self.window.remove_handlers(self)
        self.window.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
