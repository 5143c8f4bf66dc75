"""Hash the trajectories rtrigid computes, to show that a refactoring changes no bit.

    python scripts/trajectory_hashes.py --out before.json        # on the commit before
    python scripts/trajectory_hashes.py --check before.json      # on the commit after

Each case steps a simulation through the public API and feeds every state it reaches (``t``,
``qpos``, ``qvel``, energy, solver counters) into a sha256: every scenario under every
integrator that steps it, a lively chain under the energy-momentum schemes (path following and
sub-steps), Batch runs (trees, loops, contacts, servos), snapshot/restore, a control-driven arm,
and a HIL session replayed over a real loopback socket.  ``--check`` prints the cases whose hash
differs and exits 1 if any does.  ``--only SUBSTRING`` restricts the cases (for a quick look).
"""
import argparse
import hashlib
import json
import sys
import time
import warnings

import numpy as np

import rtrigid as rt
from rtrigid import scenarios

CHUNKS = (1, 1, 7, 41, 150)  # steps between recorded states: single steps and n-step calls


class Trace:
    """A running sha256 of the arrays and numbers a case produces."""

    def __init__(self):
        self.h = hashlib.sha256()

    def add(self, *values):
        for v in values:
            if isinstance(v, dict):
                for k in sorted(v):
                    self.h.update(str(k).encode())
                    self.add(v[k])
            elif isinstance(v, (list, tuple)):
                for x in v:
                    self.add(x)
            elif isinstance(v, str):
                self.h.update(v.encode())
            else:
                self.h.update(np.ascontiguousarray(np.asarray(v, dtype=np.float64)).tobytes())

    def hexdigest(self):
        return self.h.hexdigest()


def _state(tr, sim):
    tr.add(sim.t, sim.qpos(), sim.qvel(), sim.energy())
    stats = sim.solver_stats() if hasattr(sim, "solver_stats") else {}
    tr.add({k: v for k, v in stats.items() if isinstance(v, (int, float))})


def _run(sim, chunks=CHUNKS):
    tr = Trace()
    _state(tr, sim)
    for k in chunks:
        try:
            sim.step(k)
        except rt.SimulationError as exc:  # a refused step is behaviour too
            tr.add("SimulationError", str(exc))
            break
        _state(tr, sim)
    return tr.hexdigest()


def scenario_cases():
    for name in scenarios.names():
        for integ in scenarios.integrators_for(name):
            yield f"scenario/{name}/{integ}", lambda n=name, i=integ: _run(scenarios.build(n, integrator=i))


def _lively_chain(n, integrator, dt, seed=0):
    from rtrigid.maths import quat
    rng = np.random.default_rng(seed)
    q0 = [quat.from_rotvec(rng.normal(scale=0.5, size=3)) for _ in range(n)]
    return scenarios.build("chain", integrator=integrator, dt=dt, n=n, q0=q0,
                           omega0=rng.normal(size=(n, 3)))


def lively_cases():
    for integ in ("energy_momentum", "energy_momentum4", "nullspace_rk4"):
        for n, dt in ((20, 1 / 60), (50, 1 / 60), (50, 1 / 120)):
            yield (f"lively_chain/{n}@{1 / dt:.0f}/{integ}",
                   lambda n=n, dt=dt, i=integ: _run(_lively_chain(n, i, dt), (1, 30, 89)))


def _snapshot_restore():
    sim = scenarios.build("double_pendulum", integrator="energy_momentum")
    sim.step(37)
    snap = sim.snapshot()
    first = _run(sim, (5, 20))
    sim.restore(snap)
    return _run(sim, (5, 20)) + first


def _arm_controls():
    sim = scenarios.build("arm", integrator="nullspace_rk4")
    tr = Trace()
    for s in range(40):
        sim.set_controls(np.sin(0.1 * s + np.arange(sim.na)))
        sim.step(5)
        _state(tr, sim)
    return tr.hexdigest()


def _batch(name, integrator, n=6, k=60, **params):
    def build(i):
        sim = scenarios.build(name, integrator=integrator, **params)
        q = sim.qpos()
        sim.set_qpos(q + 1e-3 * i * np.cos(np.arange(q.size)))
        return sim

    batch = rt.Batch(build, n=n)
    tr = Trace()
    for chunk in (1, k):
        batch.step(chunk)
        tr.add(batch.qpos(), batch.qvel(), batch.energy())
    tr.add(batch.failed)
    if batch.na:
        out = batch.rollout(10, controls=np.full((batch.n, batch.na), 0.3),
                            record=("qpos", "qvel"))
        tr.add(out)
    return tr.hexdigest()


def other_cases():
    yield "snapshot_restore", _snapshot_restore
    yield "arm_controls", _arm_controls
    for name, integ in (("chain", "energy_momentum"), ("chain", "nullspace_rk4"),
                        ("arm", "energy_momentum"), ("arm", "semi_implicit_euler"),
                        ("four_bar", "nullspace_rk4"), ("four_bar", "energy_momentum"),
                        ("slider_crank", "nullspace_rk4"), ("box_stack", "semi_implicit_euler"),
                        ("box_stack", "energy_momentum"), ("gyro_top", "energy_momentum"),
                        ("free_body", "nullspace_rk4")):
        yield f"batch/{name}/{integ}", lambda n=name, i=integ: _batch(n, i)
    yield "hil/arm", lambda: _hil("arm", "nullspace_rk4")
    yield "hil/chain", lambda: _hil("chain", "energy_momentum")
    yield "hil/box_stack", lambda: _hil("box_stack", "semi_implicit_euler")


def _hil(name, integrator):
    from rtrigid.io import hil
    sim = scenarios.build(name, integrator=integrator)
    server = hil.Server(sim, port=0, scenario=name)
    server.start()
    tr = Trace()
    try:
        client = hil.Client(*server.address)
        try:
            tr.add(client.state())
            for s in range(12):
                controls = None
                if client.actuators:
                    controls = {a["name"]: 0.2 * np.sin(s + i)
                                for i, a in enumerate(client.actuators)}
                tr.add(client.step(1 + 3 * s, controls=controls))
            tr.add(client.reset())
            tr.add(client.step(10))
        finally:
            client.close()
    finally:
        server.stop()
    return tr.hexdigest()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the hashes to this JSON file")
    p.add_argument("--check", help="compare with the hashes in this JSON file")
    p.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = p.parse_args(argv)
    hashes = {}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for gen in (scenario_cases, lively_cases, other_cases):
            for case, fn in gen():
                if args.only in case:
                    hashes[case] = fn()
                    print(f"{hashes[case][:16]}  {case}", flush=True)
                    if args.out:  # after each case: a run cut short keeps what it hashed
                        with open(args.out, "w") as fh:
                            json.dump(hashes, fh, indent=1, sort_keys=True)
    print(f"{len(hashes)} cases in {time.perf_counter() - t0:.0f} s")
    if args.check:
        with open(args.check) as fh:
            before = json.load(fh)
        bad = [c for c in hashes if c in before and before[c] != hashes[c]]
        missing = [c for c in before if c not in hashes and args.only in c]
        for c in bad:
            print(f"DIFFERS  {c}")
        for c in missing:
            print(f"MISSING  {c}")
        print(f"{len(hashes) - len(bad)} identical, {len(bad)} differ, {len(missing)} missing")
        return 1 if bad or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
