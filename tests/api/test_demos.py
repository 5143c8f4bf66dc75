"""Demos: listed by ``python -m demos``, each one runs headless and prints its figures."""
import subprocess
import sys
from pathlib import Path

import pytest

import demos
from demos.__main__ import main
from rtrigid import scenarios

ROOT = Path(__file__).resolve().parents[2]


def test_python_m_demos_lists_every_demo():
    out = subprocess.run([sys.executable, "-m", "demos"], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    listed = [line.split()[0] for line in out.stdout.splitlines()[:-1]]
    assert listed == demos.names()
    assert {"geradin_top_1", "geradin_top_2", "gyro_top", "tennis_racket",
            "free_body"} <= set(listed)


@pytest.mark.parametrize("name", demos.names())
def test_demo_runs_headless_and_conserves(name, capsys, tmp_path):
    """Conserves energy, or with actuators keeps the energy balance (energy - actuator work)."""
    shot = tmp_path / f"{name}.png"
    code = main([name, "--headless", "--frames", "8", "--width", "160", "--height", "120",
                 "--screenshot", str(shot)])
    out = capsys.readouterr().out
    assert code == 0 and shot.stat().st_size > 0
    rows = dict(line.rsplit(None, 1) for line in out.splitlines()
                if line.startswith("max rel."))
    assert rows, out
    if "applied loads act" in out:   # the quadrotor's rotors: nothing is conserved
        return
    # joint dampers (the iiwa's URDF has them) take energy out: there is no balance to keep;
    # contacts with a ground take out more (a disk's rim slides: tests/contact/test_contact.py
    # checks that they never add any), so there only "nothing blew up" is checked
    # projected RK4 (the delta robot's scheme) keeps energy only to its truncation error
    d = demos.DEMOS[name]
    model = d.build().model
    damped = any(j.damping for j in model.joints)
    bound = (1.0 if model.grounds else 1e-2 if damped else
             1e-5 if d.integrator == "nullspace_rk4" else 1e-12)
    for label, value in rows.items():
        assert float(value) < bound, (label, value)


def test_unknown_demo_is_refused(capsys):
    assert main(["no_such_demo", "--headless"]) == 2
    assert "unknown demo" in capsys.readouterr().err


def test_adding_a_demo_is_one_line():
    before = dict(demos.DEMOS)
    try:
        demos.demo("slow_top", "gyro_top", "the gyro top at half speed", speed=0.5)
        assert "slow_top" in demos.names()
        sim = demos.DEMOS["slow_top"].build()
        assert scenarios.info(sim)["scenario"] == "gyro_top"
    finally:
        demos.DEMOS.clear()
        demos.DEMOS.update(before)



def test_contact_demos_show_their_contacts_and_the_flag_only_adds_them():
    """A contact demo draws its contacts whether or not --contacts is given (the flag's
    default once switched the demo's own choice off); elsewhere the flag turns them on."""
    stack = demos.DEMOS["box_stack"]
    top = demos.DEMOS["gyro_top"]
    assert stack.viewer_options(stack.build())["show_contacts"] is True
    assert stack.viewer_options(stack.build(), show_contacts=False)["show_contacts"] is True
    assert not top.viewer_options(top.build()).get("show_contacts", False)
    assert top.viewer_options(top.build(), show_contacts=True)["show_contacts"] is True
