"""The viewer tests' fixture: ``open_viewer(sim, **kw)`` opens a headless viewer (EGL) on a
simulation and closes every one it opened after the test."""
import pytest

from tests.viewer.helpers import H, W
from viewer import Viewer


@pytest.fixture
def open_viewer(require):
    require("egl")
    opened = []

    def make(sim, **kw):
        kw.setdefault("hud", False)
        # colours are checked pixel by pixel against the renderer's own lighting: without
        # multisampling, whose resolve rounds each sample (test_viewer_hud.py checks it)
        kw.setdefault("msaa", 0)
        v = Viewer(sim, kw.pop("width", W), kw.pop("height", H), headless=True, **kw)
        opened.append(v)
        return v

    yield make
    for v in opened:
        v.close()
