"""mypy, configured in pyproject.toml ([tool.mypy]), finds nothing in the typed public API: the
modules its ``files`` lists (Simulation and its mixins, Batch, sweep, the integrator registry,
the scenarios, rtrigid.io), so ``mypy`` alone in the repository root checks the same."""
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
# the modules the typed API is made of, each of which the configuration must check
TYPED = ["rtrigid/simulation.py", "rtrigid/simulation_actuators.py",
         "rtrigid/simulation_bodies.py", "rtrigid/simulation_helpers.py",
         "rtrigid/simulation_joints.py", "rtrigid/simulation_loads.py",
         "rtrigid/simulation_queries.py",
         "rtrigid/simulation_rays.py", "rtrigid/batch.py",
         "rtrigid/sweep.py", "rtrigid/integrators.py", "rtrigid/scenarios", "rtrigid/io"]


def _mypy(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "mypy",
                           "--config-file", str(ROOT / "pyproject.toml"), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_configuration_checks_the_typed_modules_strictly():
    assert sorted(CONFIG["files"]) == sorted(TYPED)
    for path in TYPED:
        assert (ROOT / path).exists(), path
    # every function of those modules annotated, and their bodies checked
    assert CONFIG["disallow_untyped_defs"] and CONFIG["check_untyped_defs"]
    assert CONFIG["python_version"] == "3.10"


def test_mypy_is_clean_on_the_typed_public_api(require):
    require("mypy")
    out = _mypy()  # the files of [tool.mypy]
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    checked = len([p for f in TYPED for p in ([ROOT / f] if f.endswith(".py")
                                               else (ROOT / f).rglob("*.py"))])
    assert f"no issues found in {checked} source files" in out.stdout, out.stdout


def test_mypy_would_see_a_real_fault(tmp_path, require):
    """The configuration is not so loose that it passes anything: a wrong argument type to
    Simulation, an unannotated function and a wrong return type in a module that uses the
    package are each reported."""
    require("mypy")
    bad = tmp_path / "faulty.py"
    bad.write_text(
        "import rtrigid\n\n\n"
        "def energy(sim: rtrigid.Simulation) -> str:\n"
        "    sim.step('ten')\n"
        "    return sim.energy()\n\n\n"
        "def untyped(x):\n"
        "    return x\n")
    out = _mypy(str(bad), cwd=ROOT)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "faulty.py:5: error" in out.stdout and "[arg-type]" in out.stdout, out.stdout
    assert "faulty.py:6: error" in out.stdout and "[return-value]" in out.stdout, out.stdout
    assert "faulty.py:9: error" in out.stdout and "[no-untyped-def]" in out.stdout, out.stdout
