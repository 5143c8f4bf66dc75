"""rtrigid sweep: spec checks (one line, exit 2), a batch's points are single Simulations, and on
a local Ray cluster a sweep whose worker is killed mid-way resumes (finished batches not rerun)
to the same results as an uninterrupted one; --address joins a running cluster."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from rtrigid import cli, scenarios, sweep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ARM = """
scenario = "arm"
integrator = "nullspace_rk4"
steps = {steps}
record = ["qpos", "qvel", "energy"]
record_every = {every}
batch_size = {size}
seed = 7
[params]
kv = 4.0
[grid]
kp = [150.0, 250.0]
[random]
samples = {samples}
force_limit = {{uniform = [20.0, 60.0]}}
"""


def _write(tmp_path, text, name="spec.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, field", [
    ('scenario = "arm"\n', "steps"),
    ('scenario = "arm"\nsteps = 10\ncolour = 1\n', "colour"),
    ('scenario = "no_such"\nsteps = 10\n', "scenario"),
    ('scenario = "arm"\nsteps = 0\n', "steps"),
    ('scenario = "arm"\nsteps = 10\nrecord_every = 3\n', "record_every"),
    ('scenario = "arm"\nsteps = 10\nrecord = ["torque"]\n', "record"),
    ('scenario = "arm"\nsteps = 10\n[grid]\nkp = []\n', "grid.kp"),
    ('scenario = "arm"\nsteps = 10\n[random]\nkp = {gauss = [1, 2]}\n', "random.kp"),
    ('scenario = "arm"\nsteps = 10\n[random]\nkp = {uniform = [2, 1]}\n', "random.kp"),
    ('scenario = "arm"\nsteps = 10\n[params]\nkp = 1.0\n[grid]\nkp = [1.0]\n', "kp"),
    ('scenario = "arm"\nsteps = 10\n[params]\nwings = 2\n', "wings"),
    ('scenario = "arm"\nsteps = 10\n[params]\nkp = -1.0\n', "kp"),
    ('scenario = "arm"\nsteps = "ten"\n', "steps"),
    ('scenario = "arm"\nsteps = 10\nintegrator = "euler"\n', "integrator"),
    ('scenario = "arm\n', "spec"),
])
def test_bad_spec_is_one_line_and_exit_2(tmp_path, capsys, text, field):
    out = tmp_path / "out"
    assert cli.main(["sweep", _write(tmp_path, text), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rtrigid: error: ")
    assert field in err
    assert not out.exists()


def test_batch_points_are_single_simulations(tmp_path):
    """A batch's records are bit for bit those of each point's scenario stepped alone."""
    spec = sweep.load_spec(_write(tmp_path, ARM.format(steps=60, every=20, size=3, samples=2)))
    assert [p["kp"] for p in spec["points"]] == [150.0, 150.0, 250.0, 250.0]
    assert len({p["force_limit"] for p in spec["points"]}) == 4
    r = sweep.run_batch(spec, 1, 4)
    assert r["qpos"].shape == (3, 3, 2) and r["energy"].shape == (3, 3)
    np.testing.assert_array_equal(r["point"], [1, 2, 3])
    np.testing.assert_array_equal(r["param_kp"], [150.0, 250.0, 250.0])
    np.testing.assert_array_equal(r["t"], [0.02, 0.04, 0.06])
    np.testing.assert_array_equal(r["failed_at"], [-1, -1, -1])
    for i, p in enumerate(spec["points"][1:4]):
        assert r["param_force_limit"][i] == p["force_limit"]
        s = scenarios.build("arm", integrator="nullspace_rk4", **p)
        for k in range(3):
            s.step(20)
            np.testing.assert_array_equal(r["qpos"][k, i], s.qpos())
            np.testing.assert_array_equal(r["qvel"][k, i], s.qvel())
            assert r["energy"][k, i] == s.energy()
    assert not np.array_equal(r["qpos"][-1, 0], r["qpos"][-1, 1])


def test_resume_of_a_finished_sweep_runs_nothing_and_another_spec_is_refused(tmp_path):
    spec = sweep.load_spec(_write(tmp_path, ARM.format(steps=20, every=20, size=4, samples=1)))
    out = str(tmp_path / "out")
    os.makedirs(out)
    sweep.write_index(out, spec, set())
    for f, a, b in sweep.plan(spec):
        arrays = sweep.run_batch(spec, a, b)
        np.savez(os.path.join(out, f), **arrays)
    assert sweep.run(spec, out) == {"ran": [], "skipped": ["batch_00000.npz"], "failed": {}}
    other = sweep.load_spec(_write(tmp_path, ARM.format(steps=40, every=20, size=4,
                                                        samples=1)))
    with pytest.raises(ValueError, match="out: .* holds a sweep of another spec"):
        sweep.run(other, out)


# -- on Ray ----------------------------------------------------------------------------------

def _env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "RAY_USAGE_STATS_ENABLED": "0"}


def _sweep(spec, out, *extra, env=None):
    return subprocess.Popen([sys.executable, "-m", "rtrigid.cli", "sweep", spec, "--out", out,
                             "--no-progress", *extra], cwd=ROOT, env=env or _env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _descendants(pid):
    """{pid: command line} of every process below ``pid`` (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = {}, [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            try:
                with open(f"/proc/{c}/cmdline", "rb") as fh:
                    found[c] = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            todo.append(c)
    return found


def _mtimes(out):
    return {f: os.stat(os.path.join(out, f)).st_mtime_ns for f in os.listdir(out)
            if f.endswith(".npz")}


def _same_results(a, b):
    ra, rb = sweep.load(a), sweep.load(b)
    assert sorted(ra) == sorted(rb)
    for k in ra:
        np.testing.assert_array_equal(ra[k], rb[k])


@pytest.mark.slow
def test_sweep_resumes_after_a_worker_is_killed_with_identical_results(tmp_path, require):
    require("ray")
    spec = _write(tmp_path, ARM.format(steps=100000, every=25000, size=2, samples=6))
    clean, cut = str(tmp_path / "clean"), str(tmp_path / "cut")
    p = _sweep(spec, clean, "--cpus", "2")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err
    assert "6 batches run, 0 already done, 0 failed" in out
    # the same sweep, one worker killed while it steps a batch (no retries: it is left undone)
    p = _sweep(spec, cut, "--cpus", "2", "--retries", "0")
    killed = None
    deadline = time.monotonic() + 600
    while killed is None and p.poll() is None and time.monotonic() < deadline:
        for pid, cmd in _descendants(p.pid).items():
            if cmd.startswith("ray::run_batch"):
                os.kill(pid, signal.SIGKILL)
                killed = pid
                break
        time.sleep(0.02)
    out, err = p.communicate(timeout=900)
    assert killed is not None, "no worker was seen stepping a batch"
    assert p.returncode == 1, err
    assert "run the same command again to resume" in err
    before = _mtimes(cut)
    assert len(before) < 6
    p = _sweep(spec, cut, "--cpus", "2")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err
    assert f"{6 - len(before)} batches run, {len(before)} already done, 0 failed" in out
    after = _mtimes(cut)
    assert len(after) == 6
    assert all(after[f] == t for f, t in before.items())  # finished batches were not rerun
    _same_results(clean, cut)
    assert sweep.load(cut)["qpos"].shape == (4, 12, 2)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_sweep_joins_a_running_cluster_with_address(tmp_path, require):
    require("ray")
    spec = _write(tmp_path, ARM.format(steps=200, every=100, size=2, samples=2))
    port = _free_port()
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    # a short session directory: Ray's Unix sockets live there (paths of at most 107 bytes)
    temp = tempfile.mkdtemp(prefix="rtray", dir="/tmp")
    env = {**_env(), "RAY_AUTH_MODE": "token"}  # the head's token (~/.ray) for the driver too
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", f"--port={port}",
                             "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={temp}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = {}
    try:
        for _ in range(600):  # the head listens once its control store is up
            started.update(_descendants(head.pid))
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        p = _sweep(spec, str(tmp_path / "joined"), "--address", f"127.0.0.1:{port}", env=env)
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err
        assert "2 batches run" in out
        p = _sweep(spec, str(tmp_path / "local"), "--cpus", "1")
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err
        _same_results(str(tmp_path / "joined"), str(tmp_path / "local"))
    finally:
        started.update(_descendants(head.pid))
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        alive = _descendants(1)
        for pid, cmd in started.items():  # what the head started and left behind, by its ids
            if alive.get(pid) == cmd:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
