"""Where a cold test run spends its time compiling: every numba compilation, per process.

As a pytest plugin (the numba cache must be cold for the figures to mean a first run)::

    RTRIGID_COMPILE_LOG=/tmp/clog PYTHONPATH=scripts python3 -m pytest -p compile_log ...

writes one JSON line per compilation (a cache miss: loading from numba's cache is not one) to
``/tmp/clog/<pid>.jsonl``: the function, its argument types, start and end time, the nesting
depth (a kernel compiles the kernels it calls inside its own compilation) and the test that
was running.  Then::

    python3 scripts/compile_log.py /tmp/clog

prints the compile time per process (top-level compilations only, so nested ones are not
counted twice), the time spent compiling what another process had already compiled (the
duplicates a shared, pre-filled cache would save), the functions compiled for more than one
signature, and the heaviest compilations with their own (exclusive) time.
"""
import collections
import glob
import json
import os
import sys
import time

_DIR = os.environ.get("RTRIGID_COMPILE_LOG")
_test = {"id": None}

if _DIR:  # loaded as a pytest plugin with the variable set
    import pytest
    from numba.core import event

    class _Recorder(event.Listener):
        def __init__(self):
            self.starts = []
            os.makedirs(_DIR, exist_ok=True)
            self.out = open(os.path.join(_DIR, f"{os.getpid()}.jsonl"), "a")

        def on_start(self, ev):
            self.starts.append(time.time())

        def on_end(self, ev):
            t0 = self.starts.pop()
            f = ev.data["dispatcher"].py_func
            self.out.write(json.dumps({
                "f": f"{f.__module__}.{f.__qualname__}", "args": str(ev.data["args"])[:400],
                "t0": t0, "t1": time.time(), "depth": len(self.starts),
                "test": _test["id"]}) + "\n")
            self.out.flush()

    event.register("numba:compile", _Recorder())

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(item):
        _test["id"] = item.nodeid


def _rows(folder):
    rows = []
    for name in glob.glob(os.path.join(folder, "*.jsonl")):
        pid = os.path.basename(name).split(".")[0]
        with open(name) as fh:
            for line in fh:
                r = json.loads(line)
                r["pid"] = pid
                rows.append(r)
    return rows


def _exclusive(rows):
    """Each compilation's own time: its span less its direct nested compilations'."""
    by_pid = collections.defaultdict(list)
    for r in rows:
        by_pid[r["pid"]].append(r)
    for group in by_pid.values():
        group.sort(key=lambda r: (r["t0"], r["depth"]))
        for r in group:
            r["own"] = r["t1"] - r["t0"]
        for r in group:
            for k in group:
                if (k["depth"] == r["depth"] + 1 and k["t0"] >= r["t0"]
                        and k["t1"] <= r["t1"]):
                    r["own"] -= k["t1"] - k["t0"]


def report(folder, top=25):
    rows = _rows(folder)
    if not rows:
        raise SystemExit(f"{folder}: no compile log (*.jsonl) there")
    _exclusive(rows)
    outer = [r for r in rows if r["depth"] == 0]
    per_pid = collections.Counter()
    for r in outer:
        per_pid[r["pid"]] += r["t1"] - r["t0"]
    print(f"{len(rows)} compilations, {len(outer)} top-level; compile seconds per process: "
          + ", ".join(f"{p} {t:.0f}" for p, t in sorted(per_pid.items())))
    seen = collections.defaultdict(list)
    for r in rows:
        seen[(r["f"], r["args"])].append(r)
    again = sum(r["own"] for v in seen.values() if len({r["pid"] for r in v}) > 1
                for r in sorted(v, key=lambda r: r["t0"])[1:])
    print(f"compiled again in another process: {again:.0f} s")
    sigs = collections.defaultdict(set)
    for r in rows:
        sigs[r["f"]].add(r["args"])
    multi = sorted(((len(s), f) for f, s in sigs.items() if len(s) > 1 and "rtrigid" in f),
                   reverse=True)
    print(f"rtrigid functions compiled for more than one signature: {len(multi)}")
    for n, f in multi[:top]:
        print(f"  {n:3d}  {f}")
    own = collections.Counter()
    for r in rows:
        own[r["f"]] += r["own"]
    print("heaviest (own seconds, summed over processes and signatures):")
    for f, t in own.most_common(top):
        print(f"  {t:8.1f}  {f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python3 scripts/compile_log.py FOLDER")
    report(sys.argv[1])
