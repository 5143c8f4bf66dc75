"""``rtrigid view --attach HOST:PORT --session TOKEN_HEX``: show a served session live.

The viewer connects to a lock-step server (``rtrigid serve``) as an **observer** of the session
whose token it is given (the stepping client's ``Client.session``, in hex): it receives every
state the session's client receives (``docs/hil/protocol.md``, Sessions).  It builds its own
Simulation of the scenario the server names in its HELLO reply (or ``scenario``), with the
server's integrator and step, and, instead of stepping it, sets its coordinates and rates from
each state (``set_qpos``/``set_qvel``): what is drawn is the served simulation's state.  The
local copy is never stepped (the keys that would step or reset it are off); a push with the
mouse moves it until the next state arrives.

    with Attached("127.0.0.1", 5757, token, headless=True) as a:
        a.pull(timeout=1.0)      # apply the states received (waits for one, up to timeout)
        a.viewer.render()
"""
from __future__ import annotations

import time

from rtrigid import scenarios

# what the viewer's keys would do to the local copy: step it, reset it, push it
_OFF = {name: None for name in ("pause", "step", "frame", "slower", "faster", "reset", "kick",
                                "spin")}


def parse_address(text):
    """``HOST:PORT`` (``[v6]:PORT`` too) as (host, port); ``ValueError`` naming attach."""
    host, sep, port = str(text).rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"attach: expected HOST:PORT, got {text!r}")
    return host, int(port)


def parse_token(text):
    """A session token from its hex (32 hex digits); ``ValueError`` naming session."""
    try:
        token = bytes.fromhex(str(text))
    except ValueError:
        token = b""
    if len(token) != 16:
        raise ValueError(f"session: expected the session token as 32 hex digits, got {text!r}")
    return token


class _Feed:
    """The viewer's controller: it steps nothing, and shows where the states come from."""

    def __init__(self, where):
        self.where = where
        self.state = None
        self.received = 0

    def __call__(self, sim):
        pass  # the local copy is set from the states, never driven

    def hud_lines(self, sim):
        if self.state is None:
            return [f"attached to {self.where}: no state yet"]
        return [f"attached to {self.where}",
                f"served t = {self.state['t']:.4f} s, step {self.state['steps']}, "
                f"{self.received} states"]


class Attached:
    """A Viewer showing a served session (see the module docstring).

    ``host``, ``port``: the lock-step server; ``session``: the 16-byte token (or its hex);
    ``scenario``: the scenario to build when the server names none (or to override it; its
    counts must match the server's).  Other keywords go to :class:`viewer.Viewer`.
    """

    def __init__(self, host, port, session, *, scenario=None, timeout=5.0, **viewer_options):
        from rtrigid.io.hil import Client

        from .app import Viewer

        token = parse_token(session) if isinstance(session, str) else session
        self.client = Client(host, port, timeout=timeout)
        try:
            name = scenario or self.client.scenario
            if not name:
                raise ValueError("scenario: the server names no scenario; give --scenario")
            self.sim = scenarios.build(name, integrator=self.client.integrator,
                                       dt=self.client.dt)
            sim = self.sim
            if (sim.nq, sim.nv, list(sim.names)) != (self.client.nq, self.client.nv,
                                                      self.client.names):
                raise ValueError(f"scenario: {name!r} (nq {sim.nq}, nv {sim.nv}, bodies "
                                 f"{list(sim.names)}) is not what the server serves (nq "
                                 f"{self.client.nq}, nv {self.client.nv}, bodies "
                                 f"{self.client.names})")
            self.feed = _Feed(f"{host}:{port}")
            self._apply(self.client.observe(token))
            keys = dict(_OFF, **(viewer_options.pop("keys", None) or {}))
            viewer_options.setdefault("paused", True)
            self.viewer = Viewer(sim, controller=self.feed, keys=keys, **viewer_options)
        except BaseException:
            self.client.close()
            raise

    def _apply(self, state):
        self.sim.set_qpos(state["qpos"])
        self.sim.set_qvel(state["qvel"])
        self.feed.state = state
        self.feed.received += 1

    @property
    def state(self):
        """The last state applied (a state dict of the lock-step client)."""
        return self.feed.state

    def pull(self, timeout=0.0):
        """Apply every state received so far (waiting up to ``timeout`` seconds for the first
        one); returns how many.  The session's end (the server's notice) raises
        :class:`~rtrigid.io.hil.ServerError`."""
        n = 0
        wait = timeout
        while True:
            try:
                state = self.client.next_state(timeout=wait)
            except TimeoutError:
                return n
            self._apply(state)
            n += 1
            wait = 0.0

    def run(self):
        """Show the window until it closes, drawing the newest state each frame."""
        v = self.viewer
        period = 1.0 / v.max_fps
        while v.poll():
            start = time.perf_counter()
            self.pull()
            v.render()
            time.sleep(max(period - (time.perf_counter() - start), 0.0))

    def close(self):
        self.viewer.close()
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def attach_command(args):
    """``rtrigid view --attach HOST:PORT --session TOKEN_HEX``: a window (or, headless,
    ``--frames`` frames of 1/60 s, each with the states received by then)."""
    from .cli import FRAME, check_screenshot

    host, port = parse_address(args.attach)
    if args.session is None:
        raise ValueError("session: --attach needs --session TOKEN_HEX (the stepping client's "
                         "Client.session, in hex)")
    token = parse_token(args.session)
    if args.screenshot and not args.headless:
        raise ValueError("screenshot: only with --headless (a window is closed by the user)")
    if args.screenshot:
        check_screenshot(args.screenshot)
    if args.frames < 1:
        raise ValueError(f"frames: expected >= 1, got {args.frames}")
    width = args.width or (1280 if args.headless else 960)
    height = args.height or (720 if args.headless else 600)
    try:
        attached = Attached(host, port, token, scenario=args.scenario, headless=args.headless,
                            width=width, height=height, hud=args.hud, msaa=args.msaa,
                            show_contacts=args.show_contacts)
    except ConnectionError as exc:
        raise ValueError(f"attach: cannot reach {host}:{port} ({exc})") from None
    with attached:
        if args.headless:
            for _ in range(args.frames):
                start = time.perf_counter()
                attached.pull()
                attached.viewer.render()
                time.sleep(max(FRAME - (time.perf_counter() - start), 0.0))
            if args.screenshot:
                attached.viewer.screenshot(args.screenshot)
        else:
            attached.run()
        state = attached.state
        print(f"attached to {host}:{port}: {attached.feed.received} states, the last at "
              f"t = {state['t']:.6g} s (step {state['steps']})")
    if args.screenshot:
        print(f"screenshot written to {args.screenshot}")
    return 0
