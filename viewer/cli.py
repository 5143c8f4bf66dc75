"""``rtrigid view`` and the demos: open a viewer on a simulation, in a window or headless.

Headless runs draw ``frames`` frames, each advancing the simulation by 1/60 s of wall time
(times the speed), so they are deterministic; then they write the screenshot, if asked, and
print the conservation figures the HUD shows.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from rtrigid import scenarios
from rtrigid.cli import add_scenario_arguments, build_scenario

FRAME = 1.0 / 60.0


def report(v, frames, wall):
    """The figures of a run as (label, value) rows."""
    sim, mon = v.sim, v.monitor
    rows = [
        ("scenario", scenarios.info(sim).get("scenario", "-")),
        ("integrator", sim.integrator),
        ("dt [s]", f"{sim.dt:g}"),
        ("simulated time [s]", f"{sim.t:.4g}"),
        ("steps", sim.steps_taken),
        ("frames", frames),
        ("frames per second (wall)", f"{frames / wall:.1f}" if wall > 0 else "-"),
        ("max rel. drift of energy - actuator work" if mon.actuated else "max rel. energy drift",
         f"{mon.max_energy_drift:.3e}"),
    ]
    if mon.conserved:
        rows.append((f"max rel. drift of {mon.label}", f"{mon.max_momentum_drift:.3e}"))
    rows.append(("max constraint error", f"{mon.max_constraint_error:.3e}"))
    if mon.loads_applied:
        rows.append(("note", "applied loads act: drifts are not conservation errors"))
    return rows


def print_report(rows):
    width = max(len(k) for k, _ in rows)
    for k, val in rows:
        print(f"{k:<{width}}  {val}")


def check_screenshot(path):
    """Refuse a screenshot path that cannot be written, before any frame is drawn."""
    from PIL import Image

    path = Path(path)
    if not path.parent.is_dir():
        raise ValueError(f"screenshot: {path}: there is no directory {path.parent}")
    Image.init()
    if path.suffix.lower() not in Image.registered_extensions():
        raise ValueError(f"screenshot: {path}: no image format has the suffix "
                         f"{path.suffix or '(none)'!r}; name the file .png")


def run_viewer(sim, *, headless=False, frames=120, screenshot=None, width=None, height=None,
               **options):
    """Open a Viewer on ``sim``; headless: draw ``frames`` frames. Prints the figures."""
    from .app import Viewer

    if frames < 1:
        raise ValueError(f"frames: expected >= 1, got {frames}")
    if screenshot and headless:
        check_screenshot(screenshot)
    width = width or (1280 if headless else 960)
    height = height or (720 if headless else 600)
    with Viewer(sim, width, height, headless=headless, **options) as v:
        start = time.perf_counter()
        if headless:
            for _ in range(frames):
                v.update(FRAME)
                v.render()
        else:
            v.run()
        wall = time.perf_counter() - start
        if screenshot and headless:
            try:
                v.screenshot(screenshot)
            except OSError as exc:
                # what the check above cannot see: a directory by that name, no permission,
                # a full disk
                raise ValueError(f"screenshot: cannot write {screenshot}: "
                                 f"{exc.strerror or exc}") from None
        rows = report(v, v.frames_drawn, wall)
    print_report(rows)
    if screenshot and headless:
        print(f"screenshot written to {screenshot}")
    if options.get("record"):
        print(f"recording written to {options['record']} ({v.recorder.frames} frames at "
              f"{v.recorder.fps:g} fps)")
    return 0


def add_parser(sub):
    """Add ``rtrigid view`` to the rtrigid command (entry point ``rtrigid.commands``).

    Importing this module loads no OpenGL: pyglet and moderngl are imported when a viewer
    opens.
    """
    v = sub.add_parser("view", help="show a scenario in the OpenGL viewer (or render it headless)")
    add_scenario_arguments(v, "scenario to show (with --attach: the served one if left out)",
                           optional=True)
    v.add_argument("--attach", default=None, metavar="HOST:PORT",
                   help="show a session of a lock-step server (rtrigid serve) live, as its "
                        "observer, instead of running the scenario here")
    v.add_argument("--session", default=None, metavar="TOKEN_HEX",
                   help="--attach: the session's token (the stepping client's "
                        "Client.session.hex())")
    v.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second")
    v.add_argument("--headless", action="store_true", help="render offscreen, no window")
    v.add_argument("--frames", type=int, default=120,
                   help="frames to draw when headless (1/60 s each)")
    v.add_argument("--screenshot", default=None, help="headless: write the last frame to this PNG")
    v.add_argument("--width", type=int, default=None)
    v.add_argument("--height", type=int, default=None)
    add_output_arguments(v)
    v.set_defaults(func=view_command)


def add_output_arguments(parser):
    """--record, --no-hud, --contacts and --msaa, for rtrigid view and python -m demos."""
    parser.add_argument("--record", default=None, metavar="OUT.mp4|OUT.gif",
                        help="write the frames to a video or GIF at the pace shown (needs "
                             "imageio and imageio-ffmpeg: the record extra)")
    parser.add_argument("--no-hud", dest="hud", action="store_false",
                        help="start without the HUD (key h shows it)")
    parser.add_argument("--contacts", dest="show_contacts", action="store_true",
                        help="draw the contact points and normals (key c toggles them)")
    parser.add_argument("--msaa", type=int, default=4, choices=(0, 2, 4, 8),
                        help="multisample antialiasing, samples per pixel (0: off; on a "
                             "software renderer 4 costs about half the frame rate)")


def view_command(args):
    """Handler of ``rtrigid view``."""
    if args.attach is not None:
        from .attach import attach_command

        try:
            return attach_command(args)
        except RuntimeError as exc:  # the server's refusal (ServerError), no display
            print(f"rtrigid view: {exc}", file=sys.stderr)
            return 2
    if args.session is not None:
        raise ValueError("session: only with --attach HOST:PORT")
    if args.scenario is None:
        raise ValueError("scenario: required (or --attach HOST:PORT --session TOKEN_HEX)")
    if args.screenshot:  # a mistake answered before the scenario compiles anything
        if not args.headless:
            raise ValueError("screenshot: only with --headless (a window is closed by the user)")
        check_screenshot(args.screenshot)
    sim = build_scenario(args)
    try:
        return run_viewer(sim, headless=args.headless, frames=args.frames,
                          screenshot=args.screenshot, width=args.width, height=args.height,
                          speed=args.speed, record=args.record, hud=args.hud,
                          msaa=args.msaa, show_contacts=args.show_contacts)
    except RuntimeError as exc:
        print(f"rtrigid view: {exc}", file=sys.stderr)
        return 2
