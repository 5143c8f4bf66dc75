"""Recording the viewer's frames to a video (.mp4) or an animated GIF, through imageio
(``pip install imageio imageio-ffmpeg``, the ``record`` extra; imageio-ffmpeg brings its own
ffmpeg).

The file plays at the simulation's pace as shown: each frame is written once per frame
period of the file that the wall-clock time given to ``Viewer.update`` covers (a headless run
gives 1/60 s a frame, so a 60 fps MP4 gets every frame and a 25 fps GIF every 2.4th), so a
second of the file is a second of wall time, the speed factor applying as on screen.
"""
from __future__ import annotations

from pathlib import Path

FPS = {".mp4": 60.0, ".gif": 25.0}   # a GIF's delays are in 1/100 s: 40 ms is exact


def check_path(path):
    """Refuse a recording path that cannot be written, before any frame is drawn."""
    path = Path(path)
    if path.suffix.lower() not in FPS:
        raise ValueError(f"record: {path}: expected a .mp4 or .gif file")
    if not path.parent.is_dir():
        raise ValueError(f"record: {path}: there is no directory {path.parent}")
    try:
        import imageio  # noqa: F401
        if path.suffix.lower() == ".mp4":
            import imageio_ffmpeg  # noqa: F401
    except ImportError as exc:
        raise ValueError(f"record: writing {path.suffix} needs {exc.name} (pip install "
                         "imageio imageio-ffmpeg, or the rtrigid[record] extra)") from None
    return path


class Recorder:
    """Frames in, a file out: ``add(rgb, elapsed)`` with the wall time the frame stands for."""

    def __init__(self, path):
        import imageio

        self.path = check_path(path)
        self.fps = FPS[self.path.suffix.lower()]
        if self.path.suffix.lower() == ".gif":
            self._writer = imageio.v2.get_writer(self.path, mode="I",
                                                 duration=1000.0 / self.fps, loop=0)
        else:
            self._writer = imageio.v2.get_writer(self.path, fps=self.fps, codec="libx264",
                                                 quality=7, macro_block_size=8)
        self._owed = 0.0     # file frame periods covered, not yet written
        self.frames = 0

    def add(self, rgb, elapsed):
        """Write ``rgb`` (height, width, 3) uint8, top row first, for each whole file frame
        period that ``elapsed`` wall seconds complete."""
        self._owed += elapsed * self.fps
        while self._owed >= 1.0 - 1e-9:
            self._writer.append_data(rgb)
            self._owed -= 1.0
            self.frames += 1

    def close(self):
        self._writer.close()
