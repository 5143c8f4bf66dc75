"""Orbit camera (z up): view and projection matrices, projection of points, pixel rays.

Pixel coordinates are window pixels with the origin at the bottom-left corner and y up, as
pyglet's mouse events give them; pixel (i, j) covers [i, i+1) x [j, j+1).
Matrices are row-major numpy float64 arrays acting on column vectors.
"""
from __future__ import annotations

import math

import numpy as np


def look_at(eye, target, up=(0.0, 0.0, 1.0)):
    f = np.asarray(target, float) - eye
    f /= np.linalg.norm(f)
    s = np.cross(f, up)
    if np.linalg.norm(s) < 1e-9:  # looking straight up or down
        s = np.cross(f, (0.0, 1.0, 0.0))
    s /= np.linalg.norm(s)
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def perspective(fov_y, aspect, near, far):
    f = 1.0 / math.tan(0.5 * fov_y)
    m = np.zeros((4, 4))
    m[0, 0] = f / aspect
    m[1, 1] = f
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2.0 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def ortho_pixels(width, height):
    """Maps pixel coordinates (origin bottom-left) to clip space."""
    m = np.eye(4)
    m[0, 0], m[1, 1] = 2.0 / width, 2.0 / height
    m[0, 3], m[1, 3] = -1.0, -1.0
    return m


class OrbitCamera:
    """Looks at ``target`` from ``distance`` along azimuth ``yaw`` and elevation ``pitch``."""

    def __init__(self, target=(0.0, 0.0, 0.0), distance=3.0, yaw=-1.2, pitch=0.35,
                 fov_y=math.radians(40.0)):
        self.target = np.array(target, dtype=np.float64)
        self.distance = float(distance)
        self.yaw = float(yaw)
        self.pitch = float(pitch)
        self.fov_y = float(fov_y)
        self.width, self.height = 1, 1
        self.home = (self.target.copy(), self.distance, self.yaw, self.pitch)

    def resize(self, width, height):
        self.width, self.height = max(int(width), 1), max(int(height), 1)

    @property
    def eye(self):
        cp = math.cos(self.pitch)
        d = np.array([cp * math.cos(self.yaw), cp * math.sin(self.yaw), math.sin(self.pitch)])
        return self.target + self.distance * d

    def view(self):
        return look_at(self.eye, self.target)

    def projection(self):
        return perspective(self.fov_y, self.width / self.height, self.distance * 0.01,
                           self.distance * 100.0)

    def proj_view(self):
        return self.projection() @ self.view()

    # -- mouse motions ----------------------------------------------------------------------
    def orbit(self, dx, dy):
        """Turn by a mouse motion of (dx, dy) pixels."""
        self.yaw -= 0.01 * dx
        self.pitch = float(np.clip(self.pitch - 0.01 * dy, -1.55, 1.55))

    def pan(self, dx, dy):
        """Move the target so the scene follows a mouse motion of (dx, dy) pixels."""
        v = self.view()
        right, up = v[0, :3], v[1, :3]
        scale = 2.0 * self.distance * math.tan(0.5 * self.fov_y) / self.height
        self.target -= scale * (dx * right + dy * up)

    def zoom(self, clicks):
        self.distance *= 0.9 ** clicks

    def reset(self):
        target, self.distance, self.yaw, self.pitch = self.home
        self.target = target.copy()

    # -- pixels <-> world --------------------------------------------------------------------
    def project(self, point):
        """Window pixel (px, py) of a world point (floats; origin bottom-left)."""
        p = self.proj_view() @ np.append(np.asarray(point, dtype=np.float64), 1.0)
        if p[3] <= 0.0:
            raise ValueError(f"point_world: {list(point)} is behind the camera")
        ndc = p[:3] / p[3]
        return (0.5 * (ndc[0] + 1.0) * self.width, 0.5 * (ndc[1] + 1.0) * self.height)

    def ray(self, px, py):
        """World ray (origin, unit direction) through window pixel position (px, py)."""
        inv = np.linalg.inv(self.proj_view())
        ndc = np.array([2.0 * px / self.width - 1.0, 2.0 * py / self.height - 1.0])
        near = inv @ np.array([ndc[0], ndc[1], -1.0, 1.0])
        far = inv @ np.array([ndc[0], ndc[1], 1.0, 1.0])
        near, far = near[:3] / near[3], far[:3] / far[3]
        d = far - near
        return near, d / np.linalg.norm(d)

    def up(self):
        """World direction of the window's up."""
        return self.view()[1, :3].copy()

    def under_cursor(self, px, py, through):
        """The world point under window pixel (px, py) in the plane through ``through``
        facing the camera (``through`` itself if the ray runs along that plane)."""
        through = np.asarray(through, dtype=np.float64)
        origin, direction = self.ray(px, py)
        normal = self.forward()
        denom = direction @ normal
        if abs(denom) < 1e-12:
            return through
        return origin + ((through - origin) @ normal / denom) * direction

    def horizon(self):
        """Window height (py) of the horizon, where horizontal view directions vanish.

        None when the camera looks straight up or down.
        """
        f = self.forward()
        h = np.array([f[0], f[1], 0.0])
        if np.linalg.norm(h) < 1e-9:
            return None
        clip = self.proj_view() @ np.append(h / np.linalg.norm(h), 0.0)
        return 0.5 * (clip[1] / clip[3] + 1.0) * self.height

    def forward(self):
        d = self.target - self.eye
        return d / np.linalg.norm(d)
