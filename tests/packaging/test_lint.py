"""ruff, configured in pyproject.toml ([tool.ruff]), finds nothing in the code (the package,
the viewer, the demos, the tests and the scripts), and the public API's modules are laid out
as its formatter lays them out ([tool.ruff.format] says which)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_check_is_clean_on_the_code_and_its_tests(require):
    require("ruff")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "rtrigid",
                          "viewer", "demos", "tests", "scripts"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


# the public API's modules, which [tool.ruff.format] must not exclude
PUBLIC = ("rtrigid/__init__.py", "rtrigid/model.py", "rtrigid/model_records.py",
          "rtrigid/simulation.py", "rtrigid/simulation_bodies.py", "rtrigid/batch.py",
          "rtrigid/sweep.py", "rtrigid/integrators.py", "rtrigid/scenarios/registry.py",
          "rtrigid/io/hil/server.py", "rtrigid/loaders/mjcf.py", "rtrigid/cli.py")


def test_the_public_modules_are_formatted(require):
    require("ruff")
    out = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    # the configuration formats them (an excluded path is skipped by --force-exclude)
    out = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache",
                          "--force-exclude", *PUBLIC], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and f"{len(PUBLIC)} files already formatted" in out.stdout, \
        out.stdout + out.stderr


def test_the_formatter_would_see_a_misformatted_module(tmp_path, require):
    """The format check is not vacuous: a public module laid out by hand is reported."""
    require("ruff")
    bad = tmp_path / "rtrigid" / "model.py"
    bad.parent.mkdir()
    bad.write_text("def f(a,b):\n    return a+b\n")
    out = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache",
                          "--config", str(ROOT / "pyproject.toml"), str(bad)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr


def test_ruff_would_see_a_real_fault(tmp_path, require):
    """The configuration is not so loose that it passes anything: an undefined name and an
    unused import in a module laid out like the package's are reported."""
    require("ruff")
    bad = tmp_path / "rtrigid" / "faulty.py"
    bad.parent.mkdir()
    bad.write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                          str(ROOT / "pyproject.toml"), str(bad)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert "F401" in out.stdout and "F821" in out.stdout, out.stdout
