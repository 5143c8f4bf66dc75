"""Parameter sweeps: a TOML spec, split into batches of :class:`~rtrigid.Batch` copies, run on
Ray (a local cluster by default), one ``.npz`` file per batch plus ``index.json``, resumable.

A spec (TOML, read with :mod:`tomllib`, or ``tomli`` on Python 3.10)::

    scenario = "arm"              # a scenario name, a robot file (relative to the spec) or
                                  # a model factory module:function -- as `rtrigid run` takes
    integrator = "nullspace_rk4"  # optional (the scenario's default otherwise)
    dt = 0.001                    # optional (the scenario's default otherwise)
    steps = 2000                  # the horizon, in steps
    record = ["qpos", "energy"]   # what to record: qpos, qvel, energy (default qpos, qvel)
    record_every = 100            # record every k steps (default: once, at the horizon)
    batch_size = 64               # copies per batch (per Ray task)
    threads = 1                   # numba threads (and Ray CPUs) per batch
    seed = 0                      # of the random parameters

    [params]                      # scenario parameters every point shares
    n_links = 2
    [grid]                        # every combination of these
    kp = [100.0, 200.0]
    [random]                      # `samples` draws for every grid point
    samples = 16
    kv = {uniform = [1.0, 10.0]}  # also normal = [mean, std], loguniform = [lo, hi],
                                  # choice = [a, b, ...]

Point p is the scenario built with ``params``, its grid values and its draws; every draw is
made up front from ``seed``, so a point's values do not depend on the batching.  Batch b
holds points ``[b * batch_size, (b + 1) * batch_size)``, stepped as one
:class:`~rtrigid.Batch` (copy i bit for bit a single Simulation of point i), and its file
``batch_<b>.npz`` holds ``point`` (m,), ``param_<name>`` (m,) for every varied parameter,
``t`` (r,), each record (r, m, ...) and ``failed_at`` (m,) (the first record a copy's step
failed before, -1 if none; a failed copy stays at its last good state).  The driver writes
each file (atomically) as its batch returns and rewrites ``index.json`` (the spec, its
digest, the batches and which are done); a rerun of the same spec into the same directory
runs only the batches whose files are missing.  Workers only compute, so a cluster needs no
shared file system; each node needs rtrigid (and numba) installed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sys
from typing import IO, TYPE_CHECKING, Any, Callable

import numpy as np
from numpy.typing import NDArray

from rtrigid.validate import as_int

if TYPE_CHECKING:
    from rtrigid.batch import Batch
    from rtrigid.simulation import Simulation

RECORDS = ("qpos", "qvel", "energy")
KEYS = {
    "scenario": str,
    "integrator": str,
    "dt": float,
    "steps": int,
    "record": list,
    "record_every": int,
    "batch_size": int,
    "threads": int,
    "seed": int,
    "params": dict,
    "grid": dict,
    "random": dict,
}
DISTRIBUTIONS = ("uniform", "normal", "loguniform", "choice")
INDEX = "index.json"


def load_spec(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The spec at ``path`` checked and completed (a dict of plain values, with ``points``:
    one dict of scenario parameters per point); ``ValueError`` naming the field otherwise."""
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # (Python >= 3.11)
    except ModuleNotFoundError:  # Python 3.10: the same parser, as the sweep extra installs it
        import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]

    with open(path, "rb") as fh:
        try:
            raw = tomllib.load(fh)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"spec: {path} is not TOML: {e}") from None
    return check_spec(raw, os.path.dirname(os.path.abspath(path)))


def check_spec(raw: dict[str, Any], folder: str = ".") -> dict[str, Any]:
    """:func:`load_spec` on an already parsed spec; relative robot files are under ``folder``."""
    from rtrigid import scenarios

    for key, value in raw.items():
        if key not in KEYS:
            raise ValueError(f"{key}: unknown spec key; known: {sorted(KEYS)}")
        want = KEYS[key]
        ok = (
            isinstance(value, (int, float)) and not isinstance(value, bool)
            if want is float
            else isinstance(value, want) and not isinstance(value, bool)
        )
        if not ok:
            raise ValueError(f"{key}: expected a {want.__name__}, got {value!r}")
    for key in ("scenario", "steps"):
        if key not in raw:
            raise ValueError(f"{key}: the spec must give it")
    spec = {
        "integrator": None,
        "dt": None,
        "record": ["qpos", "qvel"],
        "batch_size": 64,
        "threads": 1,
        "seed": 0,
        "params": {},
        "grid": {},
        "random": {},
        **raw,
    }
    name = spec["scenario"]
    if not (name in scenarios.names() or scenarios.is_factory(name)):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise ValueError(
                f"scenario: {name!r} is neither a scenario "
                f"({', '.join(scenarios.names())}), nor a robot file that exists, "
                "nor a model factory as module:function"
            )
        spec["scenario"] = os.path.abspath(path)
    for key in ("steps", "batch_size", "threads"):
        if spec[key] < 1:
            raise ValueError(f"{key}: must be >= 1, got {spec[key]}")
    if spec["dt"] is not None and not spec["dt"] > 0:
        raise ValueError(f"dt: must be > 0, got {spec['dt']}")
    every = spec.setdefault("record_every", spec["steps"])
    if every < 1 or spec["steps"] % every:
        raise ValueError(f"record_every: must divide steps ({spec['steps']}), got {every}")
    for r in spec["record"]:
        if r not in RECORDS:
            raise ValueError(f"record: unknown {r!r}; known: {list(RECORDS)}")
    spec["points"] = _points(spec)
    try:  # the first point, built: a bad scenario parameter or integrator is a spec error
        _build(spec, spec["points"][0])
    except ValueError as e:
        raise ValueError(f"spec: point 0: {e}") from None
    return spec


def _points(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict of scenario parameters per point: grid combinations in order, each with
    ``samples`` random draws made up front from ``seed``."""
    grid = spec["grid"]
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"grid.{k}: expected a non-empty list of values, got {v!r}")
    random = dict(spec["random"])
    samples = random.pop("samples", 1)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"random.samples: expected an integer >= 1, got {samples!r}")
    overlap = (set(grid) | set(random)) & set(spec["params"]) | set(grid) & set(random)
    if overlap:
        raise ValueError(f"{sorted(overlap)[0]}: given in more than one of params, grid, random")
    combos = list(itertools.product(*grid.values()))
    n = len(combos) * samples
    rng = np.random.default_rng(spec["seed"])
    draws = {k: _draw(rng, k, d, n) for k, d in random.items()}
    points = []
    for p in range(n):
        point = dict(spec["params"])
        point.update(zip(grid, combos[p // samples]))
        point.update({k: v[p] for k, v in draws.items()})
        points.append(point)
    return points


def _draw(rng: np.random.Generator, name: str, dist: object, n: int) -> list[Any]:
    """n draws of random parameter ``name`` (plain Python values)."""
    field = f"random.{name}"
    if not isinstance(dist, dict) or len(dist) != 1 or next(iter(dist)) not in DISTRIBUTIONS:
        raise ValueError(
            f"{field}: expected one of {{{', '.join(DISTRIBUTIONS)} = [...]}}, got {dist!r}"
        )
    kind, args = next(iter(dist.items()))
    if kind == "choice":
        if not isinstance(args, list) or not args:
            raise ValueError(f"{field}: choice needs a non-empty list, got {args!r}")
        return [args[i] for i in rng.integers(0, len(args), n)]
    if (
        not isinstance(args, list)
        or len(args) != 2
        or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)
    ):
        raise ValueError(f"{field}: {kind} needs two numbers, got {args!r}")
    a, b = float(args[0]), float(args[1])
    if kind == "normal":
        if not b >= 0:
            raise ValueError(f"{field}: normal's standard deviation must be >= 0, got {b}")
        return rng.normal(a, b, n).tolist()
    if not a < b or (kind == "loguniform" and not a > 0):
        raise ValueError(
            f"{field}: {kind} needs 0 < lo < hi"
            if kind == "loguniform"
            else f"{field}: uniform needs lo < hi, got {args!r}"
        )
    if kind == "loguniform":
        return np.exp(rng.uniform(np.log(a), np.log(b), n)).tolist()
    return rng.uniform(a, b, n).tolist()


def _build(spec: dict[str, Any], point: dict[str, Any]) -> Simulation:
    from rtrigid import scenarios

    return scenarios.build(spec["scenario"], integrator=spec["integrator"], dt=spec["dt"], **point)


def varied(spec: dict[str, Any]) -> list[str]:
    """The names of the parameters that vary over the points (grid and random)."""
    return list(spec["grid"]) + [k for k in spec["random"] if k != "samples"]


def run_batch(spec: dict[str, Any], start: int, stop: int) -> dict[str, NDArray[Any]]:
    """Points [start, stop) of ``spec`` stepped as one Batch: {name: array} as a batch file
    holds them (see the module docstring)."""
    import numba

    from rtrigid.batch import Batch

    points = spec["points"][start:stop]
    sims = [_build(spec, p) for p in points]
    batch = Batch(lambda i: sims[i], n=len(sims))
    threads = numba.get_num_threads()
    numba.set_num_threads(min(spec["threads"], numba.config.NUMBA_NUM_THREADS))
    try:
        return _record(spec, batch, points, start, stop)
    finally:
        numba.set_num_threads(threads)


def _record(
    spec: dict[str, Any], batch: Batch, points: list[dict[str, Any]], start: int, stop: int
) -> dict[str, NDArray[Any]]:
    every, n_rec = spec["record_every"], spec["steps"] // spec["record_every"]
    out = {"point": np.arange(start, stop), "t": batch.dt * every * np.arange(1, n_rec + 1)}
    for name in varied(spec):
        out[f"param_{name}"] = np.array([p[name] for p in points])
    rec: dict[str, list[NDArray[Any]]] = {r: [] for r in spec["record"]}
    failed_at = np.full(len(points), -1)
    for r in range(n_rec):
        try:
            batch.step(every)
        except RuntimeError:
            pass  # the failed copies are in batch.failed; the others have taken every step
        failed_at[(failed_at < 0) & batch.failed] = r
        for name in rec:
            rec[name].append(getattr(batch, name)())
    out.update({name: np.array(v) for name, v in rec.items()})
    out["failed_at"] = failed_at
    return out


def digest(spec: dict[str, Any]) -> str:
    """What makes two sweeps the same: the checked spec, points included."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def plan(spec: dict[str, Any]) -> list[tuple[str, int, int]]:
    """[(file name, start, stop)] of the batches."""
    n, size = len(spec["points"]), spec["batch_size"]
    return [(f"batch_{b:05d}.npz", s, min(s + size, n)) for b, s in enumerate(range(0, n, size))]


def write_index(out: str, spec: dict[str, Any], done: set[str]) -> None:
    """Write ``out``/index.json: the spec, its digest, the batches, which of ``done`` (file
    names) are finished."""
    index = {
        "spec": spec,
        "digest": digest(spec),
        "points": len(spec["points"]),
        "varied": varied(spec),
        "batches": [
            {"file": f, "start": a, "stop": b, "done": f in done} for f, a, b in plan(spec)
        ],
    }
    _atomic(os.path.join(out, INDEX), lambda fh: fh.write(json.dumps(index, indent=1).encode()))


def _atomic(path: str, write: Callable[[IO[bytes]], object]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        write(fh)
    os.replace(tmp, path)


def _finished(out: str, spec: dict[str, Any]) -> set[str]:
    """The batch files already in ``out`` for this spec (``ValueError`` if ``out`` holds
    another spec's sweep)."""
    path = os.path.join(out, INDEX)
    if not os.path.exists(path):
        return set()
    with open(path) as fh:
        try:
            index = json.load(fh)
        except json.JSONDecodeError:
            raise ValueError(f"out: {path} is not a sweep index") from None
    if index.get("digest") != digest(spec):
        raise ValueError(
            f"out: {out} holds a sweep of another spec; give another --out or remove it"
        )
    return {f for f, _, _ in plan(spec) if os.path.exists(os.path.join(out, f))}


def run(
    spec: dict[str, Any],
    out: str,
    *,
    address: str | None = None,
    cpus: int | None = None,
    retries: int = 2,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the batches of ``spec`` (from :func:`load_spec`) not yet in ``out`` on Ray: a new
    local cluster (``cpus`` CPUs, default all) unless ``address`` names one to join.  A batch
    whose worker dies is retried ``retries`` times, then left for a rerun.  Returns
    {"ran": [...], "skipped": [...], "failed": {file: error}}."""
    retries = as_int(retries, "retries", minimum=0)
    if cpus is not None:
        cpus = as_int(cpus, "cpus", minimum=1)
    os.makedirs(out, exist_ok=True)
    done = _finished(out, spec)
    write_index(out, spec, done)
    todo = [b for b in plan(spec) if b[0] not in done]
    result: dict[str, Any] = {"ran": [], "skipped": sorted(done), "failed": {}}
    if not todo:
        return result
    try:
        import ray
        from tqdm import tqdm
    except ImportError as e:
        raise ValueError(
            f"sweep: needs Ray and tqdm ({e.name} is missing): "
            "python3 -m pip install 'ray[default]' tqdm"
        ) from None
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address,
            num_cpus=cpus if address is None else None,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    try:
        task = ray.remote(num_cpus=spec["threads"], max_retries=retries)(run_batch)
        shared = ray.put(spec)
        refs = {task.remote(shared, a, b): (f, a, b) for f, a, b in todo}
        with tqdm(
            total=len(plan(spec)),
            initial=len(done),
            unit="batch",
            file=sys.stderr,
            disable=not progress,
            desc="sweep",
        ) as bar:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                f, _, _ = refs.pop(ready[0])
                try:
                    arrays = ray.get(ready[0])
                except ray.exceptions.RayError as e:
                    result["failed"][f] = _last_line(e)
                    continue
                _atomic(os.path.join(out, f), lambda fh: np.savez(fh, **arrays))
                done.add(f)
                result["ran"].append(f)
                write_index(out, spec, done)
                bar.update(1)
    finally:
        if started:
            ray.shutdown()
    return result


def _last_line(error: BaseException) -> str:
    """The last line of a Ray error (where its cause is), without terminal colours."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines()
    return lines[-1] if lines else type(error).__name__


def load(out: str) -> dict[str, NDArray[Any]]:
    """Every finished batch in ``out`` joined over points: {name: array}, points along
    axis 0 (``point``, ``param_*``, ``failed_at``) or axis 1 (records), ``t`` once."""
    with open(os.path.join(out, INDEX)) as fh:
        index = json.load(fh)
    parts = [
        np.load(os.path.join(out, b["file"]))
        for b in index["batches"]
        if os.path.exists(os.path.join(out, b["file"]))
    ]
    if not parts:
        return {}
    joined = {"t": parts[0]["t"]}
    for name in parts[0].files:
        if name != "t":
            axis = 1 if name in RECORDS else 0
            joined[name] = np.concatenate([p[name] for p in parts], axis=axis)
    return joined
