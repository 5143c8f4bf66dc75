"""moderngl drawing: lit meshes and coloured lines.

A window's frames are drawn straight into the window's framebuffer (a blit from an offscreen
one costs ~5 ms at 1280x720 on Mesa's software renderer).  Headless frames, and frames
rendered to be read back, go to an offscreen framebuffer the renderer owns: reading the
window's framebuffer leaves a GL error behind on Mesa (VIEWER_NOTES).
Shaders are package data (``shaders/`` beside this module; in a checkout a link to
``assets/shaders/``), read through :mod:`importlib.resources`.
"""
from __future__ import annotations

from importlib import resources

import moderngl
import numpy as np

SHADER_DIR = resources.files(__package__) / "shaders"
LINE_STRIDE = 7  # position (3) + RGBA (4) float32


def _gl(matrix):
    """Row-major numpy matrix -> column-major float32 bytes for a mat uniform."""
    return np.ascontiguousarray(np.asarray(matrix, dtype=np.float32).T).tobytes()


def load_program(ctx, name):
    try:
        vert = (SHADER_DIR / f"{name}.vert").read_text()
        frag = (SHADER_DIR / f"{name}.frag").read_text()
    except FileNotFoundError as exc:
        raise RuntimeError(f"viewer: shader {exc.filename} not found in the installed "
                           "package; reinstall rtrigid") from None
    return ctx.program(vertex_shader=vert, fragment_shader=frag)


class Renderer:
    """Owns the GL objects: programs, mesh buffers, the line buffer and the framebuffer."""

    def __init__(self, ctx: moderngl.Context, size, samples=0):
        self.ctx = ctx
        self.samples = int(samples)   # multisample antialiasing of the offscreen frames
        self.lit = load_program(ctx, "lit")
        self.flat = load_program(ctx, "flat")
        self.line = load_program(ctx, "line")

        self._meshes = {}
        self._line_capacity = 0
        self._line_vbo = None
        self._line_vao = None
        self.fbo = None
        self.resolved = None
        self.size = (0, 0)
        self.resize(size)
        self.light_dir = np.array([0.35, 0.25, 1.0]) / np.linalg.norm([0.35, 0.25, 1.0])

    def resize(self, size):
        size = (max(int(size[0]), 1), max(int(size[1]), 1))
        if size != self.size:
            self._release_framebuffer()
            self.size = size

    def _offscreen(self):
        if self.fbo is None:
            self.fbo = self._framebuffer(self.samples)
            if self.samples:   # read back through a single-sample copy
                self.resolved = self._framebuffer(0)
        return self.fbo

    def _framebuffer(self, samples):
        return self.ctx.framebuffer(
            color_attachments=[self.ctx.renderbuffer(self.size, samples=samples)],
            depth_attachment=self.ctx.depth_renderbuffer(self.size, samples=samples))

    def _release_framebuffer(self):
        for fbo in (self.fbo, self.resolved):
            if fbo is not None:
                for obj in (*fbo.color_attachments, fbo.depth_attachment, fbo):
                    obj.release()
        self.fbo = self.resolved = None

    # -- meshes ------------------------------------------------------------------------------
    def mesh(self, key, build):
        """Mesh ``key`` (built by ``build()`` -> (vertices, indices) the first time).

        Returns (lit vertex array, flat vertex array) over the same buffers.
        """
        entry = self._meshes.get(key)
        if entry is None:
            verts, idx = build()
            vbo = self.ctx.buffer(np.ascontiguousarray(verts, dtype="f4").tobytes())
            ibo = self.ctx.buffer(np.ascontiguousarray(idx, dtype="u4").tobytes())
            lit = self.ctx.vertex_array(self.lit, [(vbo, "3f 3f", "in_position", "in_normal")],
                                        index_buffer=ibo, index_element_size=4)
            flat = self.ctx.vertex_array(self.flat, [(vbo, "3f 12x", "in_position")],
                                         index_buffer=ibo, index_element_size=4)
            entry = self._meshes[key] = ((lit, flat), (vbo, ibo))
        return entry[0]

    # -- a frame -----------------------------------------------------------------------------
    def begin(self, proj_view, eye, clear=(0.80, 0.84, 0.88), offscreen=True):
        """Start a frame: into the offscreen framebuffer, or the window's."""
        ctx = self.ctx
        (self._offscreen() if offscreen else ctx.screen).use()
        ctx.viewport = (0, 0, *self.size)
        ctx.clear(*clear, 1.0, depth=1.0)
        ctx.enable_only(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self.proj_view = proj_view
        self.eye = np.asarray(eye, dtype=np.float64)
        self.lit["u_proj_view"].write(_gl(proj_view))
        self.lit["u_eye"].value = tuple(float(e) for e in eye)
        self.lit["u_light_dir"].value = tuple(float(c) for c in self.light_dir)

    def draw(self, mesh, model, color, *, pattern=0.0, highlight=0.0, alpha=1.0, cull=True,
             on_top=False):
        """Draw a mesh lit, placed by ``model`` (4x4, row-major).

        ``on_top``: without the depth test, over everything drawn so far (arrows: convex
        meshes with back faces culled need no depth test of their own).
        """
        prog = self.lit
        prog["u_model"].write(_gl(model))
        prog["u_normal_matrix"].write(_gl(np.linalg.inv(np.asarray(model)[:3, :3]).T))
        prog["u_color"].value = tuple(float(c) for c in color[:3])
        prog["u_pattern"].value = float(pattern)
        prog["u_highlight"].value = float(highlight)
        prog["u_alpha"].value = float(alpha)
        flags = (0 if on_top else moderngl.DEPTH_TEST) | (moderngl.CULL_FACE if cull else 0)
        if alpha < 1.0:
            flags |= moderngl.BLEND
        self.ctx.enable_only(flags)
        mesh[0].render(moderngl.TRIANGLES)

    def draw_flat(self, mesh, model, color):
        """Draw a mesh in one colour without depth test or depth writes.

        For the ground and the shadows on it, drawn first: nothing fights over depth with the
        ground plane, and the cheap shader keeps the software renderer's fill cost low.
        """
        self.flat["u_mvp"].write(_gl(self.proj_view @ model))
        self.flat["u_color"].value = tuple(float(c) for c in color[:4])
        self.ctx.enable_only(moderngl.NOTHING)
        mesh[1].render(moderngl.TRIANGLES)

    def lines(self, verts, mvp=None, mode=moderngl.LINES, depth=True, blend=True):
        """Draw ``(n, 7)`` vertices (position, RGBA) as lines/strips/triangles."""
        verts = np.ascontiguousarray(verts, dtype="f4")
        n = len(verts)
        if n == 0:
            return
        if n > self._line_capacity:
            if self._line_vao is not None:
                self._line_vao.release()
                self._line_vbo.release()
            self._line_capacity = max(n, 2 * self._line_capacity, 1024)
            self._line_vbo = self.ctx.buffer(reserve=self._line_capacity * LINE_STRIDE * 4,
                                             dynamic=True)
            self._line_vao = self.ctx.vertex_array(
                self.line, [(self._line_vbo, "3f 4f", "in_position", "in_color")])
        self._line_vbo.write(verts.tobytes())
        self.line["u_mvp"].write(_gl(self.proj_view if mvp is None else mvp))
        self.ctx.enable_only((moderngl.DEPTH_TEST if depth else 0)
                             | (moderngl.BLEND if blend else 0))
        self._line_vao.render(mode, vertices=n)

    def read(self):
        """The last offscreen frame as (height, width, 3) uint8, row 0 at the bottom."""
        w, h = self.size
        fbo = self._offscreen()
        if self.resolved is not None:
            self.ctx.copy_framebuffer(self.resolved, fbo)
            fbo = self.resolved
        data = fbo.read(components=3, alignment=1)
        return np.frombuffer(data, dtype=np.uint8).reshape(h, w, 3).copy()

    def release(self):
        for vaos, buffers in self._meshes.values():
            for obj in (*vaos, *buffers):
                obj.release()
        self._meshes.clear()
        if self._line_vao is not None:
            self._line_vao.release()
            self._line_vbo.release()
        self._release_framebuffer()
        for prog in (self.lit, self.flat, self.line):
            prog.release()
