"""The ``rtrigid`` command, run in-process through ``rtrigid.cli.main`` (and once as a real
subprocess): its JSON and table output, its exit codes and its error messages.  Figures are
cross-checked against an independent run of the same scenario through the Python API.
"""
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from rtrigid import cli, scenarios
from rtrigid.integrators import names as integrator_names
from tests.helpers import without_compile_notice

ROOT = Path(__file__).resolve().parents[2]
JSON_KEYS = {"steps", "us_per_step", "max_rel_energy_drift", "max_rel_momentum_drift",
             "max_constraint_error", "max_unit_quaternion_error", "max_rel_reference_error"}


def run_json(capsys, *argv):
    code = cli.main(["run", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum_appd",
                                        "nullspace_rk4"])
def test_run_json_has_the_figures(capsys, integrator):
    r = run_json(capsys, "gyro_top", "--t-end", "0.05", "--integrator", integrator)
    assert JSON_KEYS <= set(r)
    assert r["steps"] == 50
    assert r["scenario"] == "gyro_top" and r["integrator"] == integrator
    assert r["dt"] == scenarios.defaults("gyro_top")[0]
    assert r["t_end"] == pytest.approx(0.05, abs=1e-15)
    assert r["us_per_step"] > 0.0
    for key in JSON_KEYS - {"steps"}:
        assert isinstance(r[key], float) and np.isfinite(r[key]) and r[key] >= 0.0, key
    assert r["max_constraint_error"] < 1e-12
    assert r["max_unit_quaternion_error"] < 1e-12
    assert r["conserved_components"] == ["angular[z]"]
    assert r["solver"]["steps"] == 50
    if integrator.startswith("energy_momentum"):
        assert r["max_rel_energy_drift"] < 1e-12
        assert r["max_rel_momentum_drift"] < 1e-12
        assert r["solver"]["fallback_steps"] == 0
    else:
        assert "newton_iterations" not in r["solver"]
        assert r["max_rel_energy_drift"] > 1e-12  # RK4 does drift: the figure is measured


@pytest.mark.parametrize("integrator", ["energy_momentum", "nullspace_rk4"])
def test_run_json_agrees_with_an_independent_run(capsys, integrator):
    """The same scenario stepped through the API: final drifts bound the reported maxima."""
    r = run_json(capsys, "gyro_top", "--t-end", "0.05", "--integrator", integrator)
    sim = scenarios.build("gyro_top", integrator=integrator)
    e0 = sim.energy()
    lz0 = sim.momentum()[1][2]
    l_scale = np.linalg.norm(sim.momentum()[1])
    sim.step(50)
    energy = abs(sim.energy() - e0) / abs(e0)
    momentum = abs(sim.momentum()[1][2] - lz0) / l_scale
    ref = scenarios.info(sim)["reference"](sim.t)
    reference = np.linalg.norm(sim.pose(0)[0] - ref) / np.linalg.norm(ref)
    assert r["max_rel_energy_drift"] >= energy
    assert r["max_rel_momentum_drift"] >= momentum
    assert r["final_rel_reference_error"] == pytest.approx(reference, rel=1e-12, abs=1e-15)
    assert r["max_rel_reference_error"] >= r["final_rel_reference_error"]
    if integrator == "nullspace_rk4":
        # a real drift is reported at the size measured here (sampled maxima, same run)
        assert r["max_rel_energy_drift"] < 100 * max(energy, 1e-15)


def test_run_set_changes_the_scenario(capsys):
    a = run_json(capsys, "free_body", "--t-end", "0.2", "--integrator", "nullspace_rk4")
    b = run_json(capsys, "free_body", "--t-end", "0.2", "--integrator", "nullspace_rk4",
                 "--set", "omega0=(1.0, 2.0, 2.0)", "--set", "mass=2")
    # ten times slower spin: RK4's relative energy error falls by about 10^4 (order 4)
    assert b["max_rel_energy_drift"] < 1e-3 * a["max_rel_energy_drift"]
    assert "max_rel_reference_error" not in a


def test_list_names_every_scenario_and_integrator(capsys):
    assert cli.main(["list"]) == 0
    table, params, integ = capsys.readouterr().out.split("\n\n")
    rows = table.splitlines()
    assert rows[0].split()[:3] == ["scenario", "dt", "t_end"]
    assert [r.split()[0] for r in rows[1:]] == scenarios.names()
    # aligned: every column starts at the same offset on every row
    starts = [rows[0].index(h) for h in ("dt", "t_end", "integrators", "what it is")]
    for row in rows[1:]:
        assert all(row[k - 2:k] == "  " and row[k] != " " for k in starts), row
    for name in scenarios.names():
        dt, t_end = scenarios.defaults(name)
        row = next(r for r in rows if r.split()[0] == name)
        assert row.split()[1:3] == [f"{dt:g}", f"{t_end:g}"]
        assert scenarios.describe(name) in row
        line = next(li for li in params.splitlines() if li.strip().startswith(name + ":"))
        for key in scenarios.parameters(name):
            assert f"{key}=" in line
    assert [li.split()[0] for li in integ.splitlines()[1:]] == integrator_names()
    chain = next(r for r in rows if r.startswith("chain "))
    assert ("nullspace_rk4, semi_implicit_euler, energy_momentum" in chain
            and "director" not in chain)


def test_unknown_scenario_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "nope"])
    assert exc.value.code == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["run", "gyro_top", "--integrator", "euler"],
                                  ["run", "gyro_top", "--set", "omega_p"],
                                  ["run", "gyro_top", "--dt", "fast"],
                                  [], ["frobnicate"]])
def test_malformed_command_lines_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err


@pytest.mark.parametrize("argv,field", [
    (["--set", "omega_p=0"], "omega_p"),
    (["--set", "spin=3"], "spin"),
    (["--set", "theta0=abc"], "theta0"),
    (["--dt", "0"], "dt"),
    (["--dt", "-0.001"], "dt"),
    (["--dt", "nan"], "dt"),
    (["--t-end", "-1"], "t_end"),
])
def test_bad_values_exit_2_naming_the_field(capsys, argv, field):
    code = cli.main(["run", "gyro_top", *argv])
    out, err = capsys.readouterr()
    err = without_compile_notice(err)
    assert code == 2
    assert out == ""
    assert re.match(rf"rtrigid: error: {field}\b", err), err
    assert err.count("\n") == 1  # one line, no traceback


def test_run_step_budget_counts_the_budget_outcomes(capsys):
    """--step-budget reaches the Simulation: with 1 iteration a step no chain step can
    converge, so steps take the budget outcome, which the JSON counts and the table shows."""
    argv = ["chain", "--dt", "0.02", "--t-end", "0.2", "--step-budget", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = run_json(capsys, *argv)
        assert r["steps"] == 10 and r["solver"]["budget_steps"] > 0
        assert r["max_rel_energy_drift"] < 1.0  # the outcome's energy is capped, never NaN
        assert cli.main(["run", *argv]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"steps that took the budget outcome +{r['solver']['budget_steps']}\n", out)
    code = cli.main(["run", "chain", "--step-budget", "0"])
    err = without_compile_notice(capsys.readouterr().err)
    assert code == 2 and re.match(r"rtrigid: error: step_budget\b", err) and err.count("\n") == 1


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_non_finite_t_end_exits_2_naming_t_end(capsys, value):
    """Regression: run_measured did int(round(t_end / dt)) before checking t_end, so inf
    escaped as an OverflowError traceback and nan did not name t_end."""
    code = cli.main(["run", "gyro_top", "--t-end", value])
    err = without_compile_notice(capsys.readouterr().err)
    assert code == 2
    assert re.match(r"rtrigid: error: t_end\b", err), err


def test_run_prints_a_table(capsys):
    code = cli.main(["run", "free_body", "--integrator", "nullspace_rk4", "--dt", "0.01",
                     "--t-end", "0.1"])
    out = capsys.readouterr().out
    assert code == 0
    rows = {}
    for line in out.splitlines():
        key, _, value = re.split(r"(\s{2,})", line.strip(), maxsplit=1)
        rows[key] = value.strip()
    assert float(rows["cost [us/step]"]) > 0.0
    assert rows["scenario"] == "free_body" and rows["integrator"] == "nullspace_rk4"
    assert rows["steps"] == "10"
    assert float(rows["dt [s]"]) == 0.01 and float(rows["simulated time [s]"]) == 0.1
    assert 0.0 < float(rows["max rel. energy drift"]) < 1e-3
    assert float(rows["max constraint error"]) < 1e-12
    assert any(k.startswith("max rel. drift of linear[x]") for k in rows)
    # explicit scheme, no analytic reference: no solver or reference rows
    assert not any("Newton" in k or "analytic" in k for k in rows)


def test_table_for_implicit_scheme_reports_newton(capsys):
    assert cli.main(["run", "gyro_top", "--t-end", "0.01"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^Newton iterations per step \(mean/max\)\s+\d+\.\d\d / \d+$", out, re.M)
    assert re.search(r"^steps that needed the sub-step fallback\s+0$", out, re.M)
    assert re.search(r"^max rel\. error of centre of mass vs analytic\s+\S+$", out, re.M)


def test_module_entry_point_runs_as_a_subprocess():
    proc = subprocess.run([sys.executable, "-m", "rtrigid.cli", "run", "gyro_top",
                           "--t-end", "0.01"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "cost [us/step]" in proc.stdout
    assert re.search(r"^steps\s+10$", proc.stdout, re.M)


def test_run_takes_a_robot_file_path(capsys):
    urdf = str(ROOT / "tests" / "data" / "twisted.urdf")
    r = run_json(capsys, urdf, "--integrator", "nullspace_rk4", "--t-end", "0.1")
    assert r["steps"] == 100 and r["max_constraint_error"] < 1e-12
    import rtrigid as rt
    sim = rt.Simulation(rt.load_model(urdf), integrator="nullspace_rk4", dt=1e-3)
    assert r["scenario"] == urdf and sim.nq == 3
    code = cli.main(["run", urdf, "--integrator", "nullspace_rk4", "--set", "wings=2"])
    assert code == 2 and "wings: not a parameter of a robot file" in capsys.readouterr().err
