"""``rtrigid view --attach``: the viewer as an observer of a served session, rendering real
frames (Mesa EGL, headless) of the states a real server on loopback pushes to it."""
import socket

import numpy as np
import pytest
from PIL import Image

from rtrigid import cli, scenarios
from rtrigid.io.hil import Client, Server, ServerError
from tests.viewer.helpers import H, W, at, drawn
from viewer import Viewer
from viewer.attach import Attached, parse_address, parse_token

TIMEOUT = 30.0  # guards against a hang; no test measures speed
MAGENTA = (0.85, 0.10, 0.85)
YELLOW = (0.90, 0.85, 0.10)


@pytest.fixture
def served():
    """A lock-step server of ``arm`` and a client stepping a session of it."""
    server = Server(scenarios.build("arm"), port=0, scenario="arm").start()
    client = Client(*server.address, timeout=TIMEOUT)
    client.state()  # the session's simulation exists from here
    yield server, client
    client.close()
    server.stop()


def bits(values):
    return np.asarray(values, dtype=np.float64).view(np.uint64)


def catch_up(attached, reply):
    """Pull until the attached viewer has the state of ``reply``."""
    while attached.state["steps"] != reply["steps"]:
        assert attached.pull(timeout=TIMEOUT), "no state pushed"


def parts(v):
    def set_colour(b):
        return lambda rgb: setattr(v.visuals[b], "color", rgb)

    return {"link0": (set_colour(0), MAGENTA), "link1": (set_colour(1), YELLOW)}


def test_the_attached_viewer_draws_every_served_state(served, require):
    require("egl")
    server, client = served
    with Attached(*server.address, client.session, headless=True, width=W, height=H,
                  hud=False, msaa=0, colors={"link0": MAGENTA, "link1": YELLOW}) as a:
        v = a.viewer
        assert a.sim is v.sim and a.state["steps"] == 0
        masks = []
        for k in range(4):
            reply = client.step(120, controls={"joint0": 1.2 * (-1) ** k, "joint1": 0.9})
            catch_up(a, reply)
            # the drawn copy holds the served state bit for bit, and was never stepped here
            assert (bits(a.sim.qpos()) == bits(reply["qpos"])).all()
            assert (bits(a.sim.qvel()) == bits(reply["qvel"])).all()
            assert a.sim.steps_taken == 0
            _, covered, _ = drawn(v, parts(v))
            for b, name in enumerate(("link0", "link1")):
                assert np.allclose(a.sim.pose(b)[0], reply["poses"][b, :3], atol=1e-9)
                assert at(covered[name], v.project(reply["poses"][b, :3]), spread=1), (k, name)
            masks.append(covered["link1"])
        # the arm swings: the far link is drawn somewhere else from one state to the next
        assert all((m1 != m2).sum() > 50 for m1, m2 in zip(masks, masks[1:]))
        # every state the stepping client received reached the viewer, in order: the one
        # OBSERVE returned and one per STEP
        assert a.feed.received == 1 + 4


def test_a_wrong_token_is_refused_and_opens_no_viewer(served, require):
    require("egl")
    server, client = served
    before = client.state()
    with pytest.raises(ServerError) as err:
        Attached(*server.address, bytes(16), headless=True, width=W, height=H)
    assert err.value.code == 12
    assert Viewer._open is None  # nothing left open: the next viewer may open
    after = client.step(1)  # the session goes on, untouched
    assert after["steps"] == before["steps"] + 1


def test_cli_view_attach_headless_writes_a_screenshot(served, require, tmp_path, capsys):
    require("egl")
    server, client = served
    client.step(50, controls={"joint0": 1.0})
    out = tmp_path / "attached.png"
    host, port = server.address
    code = cli.main(["view", "--attach", f"{host}:{port}", "--session", client.session.hex(),
                     "--headless", "--frames", "2", "--width", "160", "--height", "120",
                     "--screenshot", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert Image.open(out).size == (160, 120)
    assert "attached to" in text and "(step 50)" in text


@pytest.mark.parametrize("argv, field", [
    (["--attach", "localhost", "--session", "00" * 16], "attach"),
    (["--attach", "127.0.0.1:5757"], "session"),
    (["--attach", "127.0.0.1:5757", "--session", "abc"], "session"),
    (["arm", "--session", "00" * 16], "session"),
    ([], "scenario"),
])
def test_cli_view_attach_mistakes_give_one_line_and_status_2(capsys, argv, field):
    assert cli.main(["view", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err


def test_cli_view_attach_to_nothing_gives_one_line(capsys):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    host, port = probe.getsockname()
    probe.close()  # nothing listens there
    assert cli.main(["view", "--attach", f"{host}:{port}", "--session", "00" * 16]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_address_and_token_parsing():
    assert parse_address("127.0.0.1:5757") == ("127.0.0.1", 5757)
    assert parse_address("[::1]:80") == ("::1", 80)
    assert parse_token("ab" * 16) == b"\xab" * 16
    for bad in ("", ":80", "host:", "host:0", "host:x"):
        with pytest.raises(ValueError, match="attach"):
            parse_address(bad)
    with pytest.raises(ValueError, match="session"):
        parse_token("00" * 15)
