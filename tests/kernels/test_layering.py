"""The architecture holds: no import cycle in rtrigid, no GL or viewer import, no reach into
another module's private names."""
import ast
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rtrigid"
# shipped inside the package but on top of its core: links to the top-level viewer/ and demos/
ADDONS = {"rtrigid.viewer": ROOT / "viewer", "rtrigid.demos": ROOT / "demos"}


def _module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _core(name):
    return not any(name == a or name.startswith(a + ".") for a in ADDONS)


# the core: every module of rtrigid but the add-ons (the walk does not enter their links)
MODULES = {n: p for n, p in ((_module_name(p), p) for p in PACKAGE.rglob("*.py")) if _core(n)}


def test_the_addons_are_the_top_level_folders_and_the_core_walk_left_them_out():
    for name, folder in ADDONS.items():
        link = PACKAGE / name.rsplit(".", 1)[1]
        assert link.is_symlink() and link.resolve() == folder.resolve(), link
        assert (folder / "__init__.py").is_file()
    assert not any(name.startswith(tuple(ADDONS)) for name in MODULES)
    assert (ROOT / "viewer" / "shaders" / "lit.vert").is_file()  # the shaders' link


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
            assert module.split(".")[0] not in ("viewer", "demos", "pyglet", "moderngl",
                                                "glcontext"), f"{name} imports {module}"
            assert _core(module), f"{name} imports {module}"


def test_no_module_uses_another_modules_private_names():
    for name in MODULES:
        for module, names in _imports(name):
            if module.startswith("rtrigid"):
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                assert not private, f"{name} imports {private} from {module}"


# private by name only: the public API of namedtuples, and numba's struct proxies' way of
# returning their value from an intrinsic (its extension API)
PUBLIC_BY_CONVENTION = {"_replace", "_fields", "_asdict", "_make", "_field_defaults",
                        "_getvalue"}


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _declared(tree):
    """The private attribute names a module's own classes declare: methods, class-level
    names, ``__slots__`` entries and ``self._x = ...`` assignments."""
    out = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not cls:
                out.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                out.add(node.attr)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out.add(target.id)
                        if target.id == "__slots__" and isinstance(node.value, ast.Tuple):
                            out.update(e.value for e in node.value.elts
                                       if isinstance(e, ast.Constant))
    return {name for name in out if _private(name)}


def _module_level(tree):
    """Names a module binds at its top level: to its own classes, functions and values, and
    to modules outside rtrigid it imports (their internals are not rtrigid's layering)."""
    own, foreign = set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                own.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "rtrigid":
                    foreign.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level \
                and (node.module or "").split(".")[0] != "rtrigid":
            foreign.update(alias.asname or alias.name for alias in node.names)
    return own | foreign


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def test_no_module_reaches_into_another_modules_private_attributes():
    """``x._name`` only on ``self``/``cls``, on this module's own top-level names, or for a
    private name that this module's classes alone declare (``snap._data`` where Snapshot
    lives): an object of another module is used through its public names."""
    trees = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}
    declared = {name: _declared(tree) for name, tree in trees.items()}
    reaches, seen = [], 0
    for name, tree in trees.items():
        top = _module_level(tree)
        elsewhere = set().union(*(d for other, d in declared.items() if other != name))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            seen += 1
            root = _root(node.value)
            if (root in ("self", "cls") and isinstance(node.value, ast.Name)) \
                    or node.attr in PUBLIC_BY_CONVENTION or root in top \
                    or (node.attr in declared[name] and node.attr not in elsewhere):
                continue
            reaches.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert seen > 500  # the walk saw the code
    assert not reaches, "private attributes reached across modules:\n" + "\n".join(reaches)


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
import importlib, os, pkgutil, sys
import rtrigid
ADDONS = ("rtrigid.viewer", "rtrigid.demos")

def walk(path, prefix):
    for m in pkgutil.iter_modules([path], prefix):
        if m.name not in ADDONS:
            yield m.name
            if m.ispkg:
                yield from walk(os.path.join(path, m.name.rsplit(".", 1)[1]), m.name + ".")

names = list(walk(rtrigid.__path__[0], "rtrigid."))
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


def test_the_view_command_is_declared_by_the_packaged_viewer():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["rtrigid.commands"] == {"view": "rtrigid.viewer.cli:add_parser"}


def test_the_view_command_is_added_by_the_viewer_without_loading_gl():
    # the entry point comes from the installed metadata: rtrigid.viewer.cli once this checkout
    # is installed (.ci/run), viewer.cli from an older install; either is the viewer's cli
    installed = {ep.name: ep.value for ep in entry_points(group="rtrigid.commands")}
    assert installed.get("view", "").endswith("viewer.cli:add_parser"), installed
    probe = ("import sys; from rtrigid import cli; p = cli.build_parser(); "
             "a = p.parse_args(['view', 'gyro_top', '--headless']); "
             "print(a.func.__module__, 'pyglet' in sys.modules, 'moderngl' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split() == [installed["view"].split(":")[0], "False", "False"]


# -- the house's size rules ---------------------------------------------------------------------
SOURCES = sorted([*PACKAGE.rglob("*.py"), *ADDONS["rtrigid.viewer"].rglob("*.py"),
                  *ADDONS["rtrigid.demos"].rglob("*.py")])
SOURCES = [p for p in SOURCES if _core(_module_name(p)) or p.is_relative_to(ROOT / "viewer")
           or p.is_relative_to(ROOT / "demos")]
MAX_LINES = 800
# a kernel passes its arrays in named groups instead (docs/layout.md, "Kernel arguments")
MAX_POSITIONAL = 12


def _long_parameter_lists(path, tree):
    rel = path.relative_to(ROOT).as_posix()
    return {f"{rel}::{n.name}" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and len(n.args.posonlyargs) + len(n.args.args) > MAX_POSITIONAL}


def test_no_module_is_over_800_lines():
    assert len(SOURCES) > 120  # the walk saw the code
    long = [f"{p.relative_to(ROOT)}: {n}" for p in SOURCES
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_function_takes_more_than_12_positional_parameters():
    found = set().union(*(_long_parameter_lists(p, ast.parse(p.read_text())) for p in SOURCES))
    assert not found, ("functions over 12 positional parameters (pass named groups instead): "
                       f"{sorted(found)}")


def test_the_parameter_rule_sees_a_long_list(tmp_path):
    """The rule is not vacuous: a kernel of 13 positional parameters is caught."""
    path = ROOT / "rtrigid" / "example.py"
    src = "def kernel(" + ", ".join(f"a{i}" for i in range(13)) + ", *, k=0):\n    return a0\n"
    assert _long_parameter_lists(path, ast.parse(src)) == {"rtrigid/example.py::kernel"}
    assert not _long_parameter_lists(path, ast.parse("def f(a, b, *rest):\n    return a\n"))


def test_the_tree_kernels_take_no_scratch_array_by_position():
    """Scratch tuples are named tuples read by name (``scr.nu0``, not ``scr[15]``)."""
    import re
    pattern = re.compile(r"\b(scr|scratch|em|emw|jx|ws|geo|solve|structured|rs|lp)\[\d")
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
            for p in [*(PACKAGE / "backends" / "tree").glob("*.py"),
                      PACKAGE / "maths" / "dense.py"]
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, "\n".join(hits)
