"""The Viewer: a pyglet window (or a headless surface) showing a running Simulation.

    sim = rtrigid.scenarios.build("gyro_top")
    viewer.Viewer(sim).run()                      # the library paces the loop

    with viewer.Viewer(sim, 640, 480, headless=True) as v:   # tests, screenshots
        v.update(1 / 60); v.render(); v.screenshot("top.png")

The viewer talks to the simulation only through its public API: ``advance`` (real-time
stepping), ``alpha``/``interpolated_pose`` (smooth frames), ``joints``, ``contacts``,
``apply_impulse``, ``snapshot``/``restore``, and the model's ``grounds`` (the floor, and
tilted grounds as checkered planes) and ``loop_joints`` (drawn where the loops close).  Its
perturbations are impulses, applied once, and the pull of a held drag (``apply_force`` at
the picked point for one frame's steps, taken off after them); it never clears forces the
user applied, and a reset keeps them.

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

from viewer import meshes, scene
from viewer.camera import OrbitCamera, ortho_pixels
from viewer.monitor import Conservation, FrameTimer, fmt_drift, kept_to
from viewer.picking import ray_part

DEFAULT_KEYS = {
    "pause": "SPACE", "step": "PERIOD", "frame": "COMMA", "slower": "MINUS", "faster": "EQUAL", "reset": "R",
    "hud": "H", "follow": "F", "traces": "T", "omega": "W", "momentum": "L", "kick": "K",
    "spin": "U", "select_next": "TAB", "axes": "A", "camera_home": "HOME", "quit": "ESCAPE",
    "contacts": "C",
}
TARGET_COLOR = (0.9, 0.15, 0.2)
KEY_HELP = ("space pause   . one step   , one frame   -/= speed   r reset   h hud   f follow\n"
            "t traces   w omega   l momentum   c contacts   k kick   u spin up   tab select   esc deselect/quit\n"
            "drag a body: pull/push   drag elsewhere: orbit   right-drag: pan   wheel: zoom")
SPEEDS = (1 / 64, 8.0)
LOOKAHEAD_SECONDS, LOOKAHEAD_STEPS = 5.0, 4000  # the motion the camera and floor are set for
FEEDBACK_SECONDS = 4.0  # how long the HUD says what a push, kick, spin-up or reset did
PICK_TOLERANCE = 10.0  # pixels around a body that still pick it (thin links, rings)
DRAG_COLOR = (1.0, 0.45, 0.0)
OMEGA_COLOR = (0.95, 0.80, 0.15)
TRACE_COLOR = (0.15, 0.20, 0.65)
MOMENTUM_COLOR = (0.80, 0.25, 0.75)
LOAD_COLOR = (0.1, 0.65, 0.55)
CONTACT_COLOR = (0.85, 0.10, 0.10)   # the contact point
NORMAL_COLOR = (0.10, 0.55, 0.90)    # the contact normal, into the body
GROUND = (0.86, 0.86, 0.84)
FLOOR_LIGHT, FLOOR_DARK = (0.93, 0.93, 0.91, 1.0), (0.74, 0.75, 0.77, 1.0)
SHADOW = (0.55, 0.56, 0.57, 0.55)
SKY_LOW, SKY_HIGH = (0.85, 0.88, 0.92, 1.0), (0.62, 0.71, 0.82, 1.0)
UNIT_MESHES = {
    "sphere": lambda: meshes.sphere(1.0, 20),
    "cylinder": lambda: meshes.cylinder(1.0, -1.0, 1.0, 20),
    "box": lambda: meshes.box((1.0, 1.0, 1.0)),
    "arrow_shaft": meshes.arrow_shaft,
    "arrow_head": meshes.arrow_head,
}


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


def _key_table(keys, keymod):
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


class Viewer:
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
            from viewer.record import check_path
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
        self._keys = _key_table(keys, pyglet.window.key)
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
            from viewer.record import Recorder
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

        from viewer.hud import Hud
        from viewer.renderer import Renderer

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

    def _world_joint(self, b):
        for j in self.sim.joints():
            if j["child"] == b and j["parent"] == -1:
                return j
        return None

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

    def _draw_frame(self, offscreen, fresh_text=False):
        self.window.switch_to()
        poses = self.poses()
        if self.follow is not None:
            self.camera.target = poses[self.follow][0].copy()
        self.renderer.begin(self.camera.proj_view(), self.camera.eye, clear=GROUND,
                            offscreen=offscreen)
        self._draw_ground(poses)
        self._draw_bodies(poses)
        self._draw_joints(poses)
        self._draw_arrows(poses)
        self._draw_loads(poses)
        self._draw_contacts()
        self._draw_traces()
        self._draw_target()
        if self._drag is not None:
            start, end = self._drag_ends()
            self._arrow(start, end, 0.04 * self.visuals[self._drag["body"]].radius, DRAG_COLOR)
        if self.show_hud:
            self._draw_hud(fresh_text)

    def _draw_target(self):
        """The controller's draggable target: a red ball, drawn over the bodies."""
        target = getattr(self.controller, "target", None)
        if target is not None:
            size = self._target_radius()
            self.renderer.draw(self._unit("sphere"),
                               scene.placed(np.asarray(target, float), np.eye(3), (size,) * 3),
                               TARGET_COLOR, on_top=True)

    def _target_radius(self):
        return 0.025 * self.extent

    def _unit(self, name):
        return self.renderer.mesh(name, UNIT_MESHES[name])

    def _draw_ground(self, poses):
        """Sky, a checkered floor and the bodies' shadows (light along light_dir); without
        ground (no gravity) a plain backdrop.  Each tilted ground as a checkered plane with
        the shadows on it.  Then the small world axes, if shown.

        The frame is cleared to the ground colour and only the sky above the horizon is
        painted: on a software renderer every full-screen pass costs milliseconds.
        """
        r = self.renderer
        z = self.ground_z
        w, h = r.size
        horizon = self.camera.horizon()
        if z is None:
            horizon, z = -1.0, -math.inf
        if self.camera.eye[2] > z and horizon is not None and horizon < h:
            y0 = max(horizon, 0.0) * h / self.camera.height
            sky = np.array([(0, y0, 0, *SKY_LOW), (w, y0, 0, *SKY_LOW), (w, h, 0, *SKY_HIGH),
                            (0, y0, 0, *SKY_LOW), (w, h, 0, *SKY_HIGH), (0, h, 0, *SKY_HIGH)],
                           np.float32)
            r.lines(sky, ortho_pixels(w, h), mode=r.ctx.TRIANGLES, depth=False, blend=False)
        if self.ground_z is not None:
            centre = 0.5 * (self.motion_box[0] + self.motion_box[1])
            key = (self.grid_spacing, z)
            if self._grid is None or self._grid[0] != key:
                self._grid = (key, meshes.checker_floor(centre[:2], 24 * self.grid_spacing,
                                                        self.grid_spacing, z, FLOOR_LIGHT,
                                                        FLOOR_DARK))
            r.lines(self._grid[1], mode=r.ctx.TRIANGLES, depth=False)
            self._draw_shadows(scene.shadow_matrix(r.light_dir, z), poses)
        for normal, height in self.slopes:
            self._draw_slope(normal, height, poses)
        if self.show_axes:
            length = 0.12 * self.extent
            for axis, color in enumerate(((0.85, 0.2, 0.2), (0.2, 0.7, 0.2), (0.2, 0.3, 0.9))):
                end = np.zeros(3)
                end[axis] = length
                self._arrow(np.zeros(3), end, 0.006 * self.extent, color)

    def _draw_shadows(self, shadow, poses):
        """The bodies' (and the world's) shadows through the 4x4 projection ``shadow``."""
        r = self.renderer
        for v, (x, q) in zip(self.visuals, poses):
            vao = r.mesh(("body", v.index), lambda v=v: v.mesh)
            r.draw_flat(vao, shadow @ scene.pose_matrix(x, q), SHADOW)
        if self.world_visual is not None:
            vao = r.mesh(("world",), lambda: self.world_visual[0])
            r.draw_flat(vao, shadow, SHADOW)

    def _draw_slope(self, normal, height, poses):
        """A tilted ground ``normal . p = height``: a checkered plane as the floor is drawn,
        its tiles along the slope (``u`` uphill) and across it, around the point of the plane
        under the camera's target (so a followed body never rolls off it), with the bodies'
        shadows on it."""
        r = self.renderer
        u = np.array([0.0, 0.0, 1.0]) - normal[2] * normal
        u = u / np.linalg.norm(u) if np.linalg.norm(u) > 1e-9 else np.array([1.0, 0.0, 0.0])
        v = np.cross(normal, u)
        origin = height * normal
        ab = np.array([u, v]) @ (self.camera.target - origin)
        centre = np.round(ab / self.grid_spacing)
        key = (self.grid_spacing, tuple(normal), height, tuple(centre))
        cache = self._slope_grids
        if key not in cache:
            if len(cache) > 2 * len(self.slopes):
                cache.clear()
            cache[key] = meshes.checker_plane(centre * self.grid_spacing,
                                              24 * self.grid_spacing, self.grid_spacing,
                                              origin, u, v, FLOOR_LIGHT, FLOOR_DARK)
        r.lines(cache[key], mode=r.ctx.TRIANGLES, depth=False)
        if normal @ r.light_dir > 1e-3:   # the light is above the plane
            self._draw_shadows(scene.shadow_matrix(r.light_dir, height, normal), poses)

    def _draw_bodies(self, poses):
        """Each part of each body: in its own colour (a marking, a pin) or the body's."""
        r = self.renderer
        if self.world_visual is not None:
            vao = r.mesh(("world",), lambda: self.world_visual[0])
            r.draw(vao, np.eye(4), self.world_visual[1], pattern=1.0)
        for v, (x, q) in zip(self.visuals, poses):
            model = scene.pose_matrix(x, q)
            highlight = 1.0 if v.index == self.selected else 0.0
            stripes, marks = self.spin_visibility(v.index)
            for k, part in enumerate(v.parts):
                vao = r.mesh(("part", v.index, k), lambda part=part: part.mesh)
                own = part.color is not None
                color = v.color
                if own:   # a marking fades into the body as it would blur
                    color = tuple(marks * c + (1.0 - marks) * b for c, b in zip(part.color, v.color))
                r.draw(vao, model, color, pattern=0.0 if own else stripes, highlight=highlight)

    def _frame_time(self):
        """Simulated seconds between two frames shown: speed over the frame rate drawn (the
        window's measured rate up to max_fps; max_fps headless, as recordings play)."""
        fps = self.max_fps
        if not self.headless and 1.0 < self.timer.fps < self.max_fps:
            fps = self.timer.fps
        return self.speed / fps

    def spin_visibility(self, b):
        """How much of body ``b``'s spin stripes and markings is drawn (1 all, 0 none).

        Frames sample the turn: six stripes about the body's z axis (a 60 deg period) turning
        more than 30 deg between frames look as if they turned backwards or stood still (a
        wagon wheel); a single marking (a 360 deg period) beyond 180 deg.  They fade out from
        half those turns, as motion blur would wash them out, so what is seen never turns
        the wrong way.
        """
        if self.paused:
            return 1.0, 1.0
        omega = self.sim.velocity(b, frame="body")[1]
        dt = self._frame_time()

        def fade(turn, limit):
            return float(np.clip(2.0 - 2.0 * turn / limit, 0.0, 1.0))
        return (fade(abs(omega[2]) * dt, math.pi / 6.0),
                fade(float(np.linalg.norm(omega)) * dt, math.pi))

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

    def loop_joints(self, poses=None):
        """The model's loop (cut) joints (:meth:`Model.add_loop_joint`) in the form of
        ``sim.joints()``, at the poses drawn: ``anchor`` and ``axis`` on the child,
        ``anchor_parent`` the same point on the parent (where the loop closes, the two
        coincide)."""
        poses = self.poses() if poses is None else poses
        out = []
        for j in self.sim.loop_joints():
            xc, qc = poses[j["child"]]
            rc = scene.rotation(qc)
            if j["parent"] < 0:
                on_parent = j["anchor_parent"]
            else:
                xp, qp = poses[j["parent"]]
                on_parent = xp + scene.rotation(qp) @ j["anchor_parent"]
            axis = j["axis_child"]
            out.append({"kind": j["kind"], "parent": j["parent"], "child": j["child"],
                        "name": j["name"], "anchor": xc + rc @ j["anchor_child"],
                        "anchor_parent": on_parent,
                        "axis": None if axis is None else rc @ axis})
        return out

    def _draw_joints(self, poses):
        r = self.renderer
        positions = [x for x, _ in poses]
        segs = []
        for j in self.sim.joints() + self.loop_joints(poses):
            size = self.joint_size or self._joint_marker_size(j)
            for name, model, color in scene.joint_markers(j, size):
                r.draw(self._unit(name), model, color)
            for a, b in scene.joint_links(j, positions):
                segs += [(*a, *scene.LINK_COLOR), (*b, *scene.LINK_COLOR)]
        if segs:
            r.lines(np.array(segs, np.float32))

    def _arrow(self, start, end, radius, color, on_top=True):
        """An arrow, drawn over the bodies (an ω arrow from a top's pivot runs inside it)."""
        parts = scene.arrow_parts(start, end, radius)
        if parts is None:
            return
        self.renderer.draw(self._unit("arrow_shaft"), parts[0], color, on_top=on_top)
        self.renderer.draw(self._unit("arrow_head"), parts[1], color, on_top=on_top)

    def _rates(self):
        """Per body: |world angular velocity|, |angular momentum about the arrow origin|."""
        out = []
        for b in range(self.sim.nb):
            origin, omega, momentum = self._body_rates(b)
            out.append((np.linalg.norm(omega), np.linalg.norm(momentum)))
        return out

    def _body_rates(self, b):
        """Arrow origin (world pivot or centre of mass), world omega, angular momentum there."""
        sim = self.sim
        x, q = sim.pose(b)
        v, omega = sim.velocity(b)
        rot = scene.rotation(q)
        joint = self._world_joint(b)
        origin = x if joint is None else np.asarray(joint["anchor"], dtype=np.float64)
        inertia = rot @ np.diag(sim.body_inertia[b]) @ rot.T
        momentum = inertia @ omega + sim.body_mass[b] * np.cross(x - origin, v)
        return origin, omega, momentum

    def _draw_arrows(self, poses):
        if not (self.show_omega or self.show_momentum):
            return
        bodies = [self.selected] if self.selected is not None else range(self.sim.nb)
        for b in bodies:
            origin, omega, momentum = self._body_rates(b)
            size = self.visuals[b].radius
            for show, vec, ref, color in (
                    (self.show_omega, omega, self._reference_rates[b][0], OMEGA_COLOR),
                    (self.show_momentum, momentum, self._reference_rates[b][1], MOMENTUM_COLOR)):
                norm = np.linalg.norm(vec)
                if show and norm > 0.0:
                    length = size * min(1.8 * norm / max(ref, 1e-12), 5.0)
                    self._arrow(origin, origin + vec / norm * length, 0.04 * size, color)

    def _draw_loads(self, poses):
        """Forces the user applied (``sim.applied``), as arrows at the centres of mass.

        Length 1.5 body radii for the body's weight (or, without gravity, for any force),
        growing with the force up to 4 radii.
        """
        g = float(np.linalg.norm(self.sim.gravity))
        for b, (x, _) in enumerate(poses):
            force = self.sim.applied(b)[0]
            norm = np.linalg.norm(force)
            if norm == 0.0:
                continue
            size = self.visuals[b].radius
            ref = self.sim.body_mass[b] * g if g > 0.0 else norm
            length = size * min(1.5 * norm / ref, 4.0)
            self._arrow(x, x + force / norm * length, 0.04 * size, LOAD_COLOR)

    def _draw_contacts(self):
        """The last step's contacts (``sim.contacts()``), drawn over the bodies (they lie on
        the bodies' undersides): each point as a small red ball, its normal (from the other
        side into the body) as a blue arrow half the body's radius long."""
        if not self.show_contacts:
            return
        for c in self.sim.contacts():
            size = self.visuals[self.sim.body_index(c["body"])].radius
            point = np.asarray(c["point"], dtype=np.float64)
            ball = max(0.08 * size, 0.004 * self.extent)
            self.renderer.draw(self._unit("sphere"), scene.placed(point, np.eye(3), (ball,) * 3),
                               CONTACT_COLOR, on_top=True)
            self._arrow(point, point + 0.5 * size * np.asarray(c["normal"], dtype=np.float64),
                        0.25 * ball, NORMAL_COLOR)

    def _draw_traces(self):
        """Each traced path as a ribbon facing the camera, a few pixels wide, fading with age."""
        if not self.show_traces:
            return
        eye = self.camera.eye
        half = 0.004 * self.camera.distance
        for path in self._traces.values():
            n = len(path)
            if n < 2:
                continue
            p = np.asarray(path, dtype=np.float64)
            tangent = np.gradient(p, axis=0)
            side = np.cross(tangent, eye - p)
            norm = np.linalg.norm(side, axis=1, keepdims=True)
            side = np.where(norm > 1e-12, side / np.maximum(norm, 1e-12), 0.0) * half
            strip = np.zeros((2 * n, 7), np.float32)
            strip[0::2, :3], strip[1::2, :3] = p - side, p + side
            strip[:, 3:6] = TRACE_COLOR
            strip[:, 6] = np.repeat(np.linspace(0.0, 0.9, n) ** 1.5, 2)
            self.renderer.lines(strip, mode=self.renderer.ctx.TRIANGLE_STRIP, depth=False)

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

    # -- picking and impulses ------------------------------------------------------------------
    def _pick_exact(self, px, py, poses):
        origin, direction = self.camera.ray(px, py)
        best = None
        for v, (x, q) in zip(self.visuals, poses):
            rot = scene.rotation(q)
            o, d = rot.T @ (origin - x), rot.T @ direction
            for part in v.parts:
                t = ray_part(part, o, d)
                if t is not None and (best is None or t < best[0]):
                    best = (t, v.index)
        return None if best is None else (best[1], origin + best[0] * direction)

    def pick(self, px, py):
        """(body index, world point) of the body drawn at window pixel (px, py), or None.

        A click that misses every body by at most PICK_TOLERANCE pixels takes the nearest
        one (thin links and rings are a few pixels wide): rays through rings of pixels
        around the click, nearest ring first.
        """
        poses = self.poses()
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
        x, q = self.poses()[b]
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

    # -- window events -------------------------------------------------------------------------
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
