"""Recordings: `--record out.mp4|out.gif` writes the frames the viewer draws, headless, at the
pace shown (a second of the file is a second of wall time given to update)."""
import numpy as np
import pytest

from rtrigid import scenarios
from viewer.cli import run_viewer

imageio = pytest.importorskip("imageio")


@pytest.mark.parametrize("suffix,frames,fps", [(".mp4", 30, 60.0), (".gif", 60, 25.0)])
def test_recording_holds_the_frames_drawn_at_the_pace_shown(open_viewer, tmp_path, suffix,
                                                            frames, fps):
    if suffix == ".mp4":
        pytest.importorskip("imageio_ffmpeg")
    path = tmp_path / f"top{suffix}"
    v = open_viewer(scenarios.build("gyro_top"), record=str(path))
    for _ in range(frames):
        v.update(1 / 60)
        v.render()
    last = np.flipud(v.read_pixels()).astype(int)
    v.close()
    video = [np.asarray(f)[..., :3].astype(int) for f in imageio.v2.get_reader(path)]
    assert len(video) == round(frames / 60 * fps)      # one second of the file per second shown
    assert video[-1].shape == last.shape
    # the last frame is the last one drawn (lossy codecs: close, not equal), and the top moved
    assert np.abs(video[-1] - last).mean() < 4.0
    assert np.abs(video[0] - video[-1]).mean() > 0.2


def test_recording_refuses_what_it_cannot_write(tmp_path):
    sim = scenarios.build("gyro_top")
    with pytest.raises(ValueError, match="record: .*expected a .mp4 or .gif"):
        run_viewer(sim, headless=True, frames=1, record=str(tmp_path / "top.avi"))
    with pytest.raises(ValueError, match="record: .*no directory"):
        run_viewer(sim, headless=True, frames=1, record=str(tmp_path / "no" / "top.gif"))
