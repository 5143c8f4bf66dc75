"""The architecture holds: no import cycle in rtrigid, no GL or viewer import, no reach into
another module's private names."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rtrigid"


def _module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name):
    """(imported module, imported names) for every import statement of a module, at any
    depth (function-level imports included)."""
    path = MODULES[name]
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                up = base.split(".")[:len(base.split(".")) - node.level + 1]
                module = ".".join(up + ([module] if module else []))
            yield module, [a.name for a in node.names]


def _edges(name):
    """The rtrigid modules ``name`` depends on: ``from pkg import sub`` counts as pkg.sub."""
    out = set()
    for module, names in _imports(name):
        subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES]
        out.update(subs)
        if module in MODULES and len(subs) < len(names or [None]):
            out.add(module)
    out.discard(name)
    return out


def test_no_import_cycle_in_rtrigid_counting_function_level_imports():
    graph = {name: _edges(name) for name in MODULES}
    assert len(graph) >= 25 and sum(map(len, graph.values())) >= 40  # the walk saw the code
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_no_module_of_rtrigid_imports_the_viewer_or_gl():
    for name in MODULES:
        for module, _ in _imports(name):
            assert module.split(".")[0] not in ("viewer", "pyglet", "moderngl", "glcontext"), \
                f"{name} imports {module}"


def test_no_module_uses_another_modules_private_names():
    for name in MODULES:
        for module, names in _imports(name):
            if module.startswith("rtrigid"):
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                assert not private, f"{name} imports {private} from {module}"


def test_backends_never_import_the_facade_or_the_registry():
    for name in MODULES:
        if name.startswith("rtrigid.backends"):
            deps = _edges(name)
            assert not deps & {"rtrigid.simulation", "rtrigid.integrators", "rtrigid"}, name
            if name.startswith("rtrigid.backends.bodies"):
                assert not any(d.startswith("rtrigid.backends.tree") for d in deps), name
            if name.startswith("rtrigid.backends.tree"):
                assert not any(d.startswith("rtrigid.backends.bodies") for d in deps), name


PROBE = """
import importlib, pkgutil, sys
import rtrigid
names = [m.name for m in pkgutil.walk_packages(rtrigid.__path__, "rtrigid.")]
for name in names:
    importlib.import_module(name)
gl = sorted(m for m in sys.modules if m.split(".")[0] in ("pyglet", "moderngl", "glcontext"))
print(len(names), gl)
"""


def test_rtrigid_and_all_its_modules_import_no_gl():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    count, gl = out.stdout.split(" ", 1)
    assert int(count) >= 25  # the probe really walked the package
    assert gl.strip() == "[]"


def test_the_view_command_is_added_by_the_viewer_without_loading_gl():
    probe = ("import sys; from rtrigid import cli; p = cli.build_parser(); "
             "a = p.parse_args(['view', 'gyro_top', '--headless']); "
             "print(a.func.__module__, 'pyglet' in sys.modules, 'moderngl' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split() == ["viewer.cli", "False", "False"]
