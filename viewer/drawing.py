"""What the viewer draws each frame: the sky, the floor and tilted grounds with the shadows,
the bodies, the joints, the arrows (angular velocity and momentum, applied forces, a drag),
the contacts, the traced paths and a controller's target.

:class:`DrawingMixin` holds these methods of :class:`viewer.app.Viewer`; the colours they
draw in are the constants of this module.
"""
from __future__ import annotations

import math

import numpy as np

from . import meshes, scene
from .camera import ortho_pixels

TARGET_COLOR = (0.9, 0.15, 0.2)
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


class DrawingMixin:
    """The drawing of a frame, for :class:`viewer.app.Viewer`."""

    def _world_joint(self, b):
        for j in self.sim.joints():
            if j["child"] == b and j["parent"] == -1:
                return j
        return None

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
