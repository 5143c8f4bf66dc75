"""The one place numba is configured.

Every compiled kernel in rtrigid is declared with :data:`jit`, an ``numba.njit`` with the
on-disk cache switched on, so a second process pays no compile time.  Set
``RTRIGID_NO_CACHE=1`` to compile without touching the cache (useful when profiling the
compiler or on a read-only install).  The pure-Python body of any kernel stays reachable as
``kernel.py_func``; the tests run both.
"""
import functools
import hashlib
import os
import sys
import types

import numba
import numba.core.caching
import numba.core.event
import numba.extending

CACHE = os.environ.get("RTRIGID_NO_CACHE", "") not in ("1", "true", "yes")
_ROOT = os.path.dirname(os.path.abspath(__file__)) + os.sep


@functools.lru_cache(maxsize=None)
def _imported_files(path):
    """The files of rtrigid that the module at ``path`` imports by name (not transitively);
    parsed once per process (every kernel's digest walks the shared modules again)."""
    import ast

    with open(path, "rb") as fh:
        tree = ast.parse(fh.read(), path)
    package = os.path.relpath(os.path.dirname(path), os.path.dirname(_ROOT[:-1])).split(os.sep)
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (package[:len(package) - node.level + 1] if node.level else [])
            mod = ".".join(base + ([node.module] if node.module else []))
            names += [mod] + [f"{mod}.{a.name}" for a in node.names]
    found = set()
    for name in names:
        parts = name.split(".")
        if parts[0] != "rtrigid":
            continue
        stem = os.path.join(os.path.dirname(_ROOT[:-1]), *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(candidate):
                found.add(os.path.abspath(candidate))
    return frozenset(found)


_DIGESTS = {}


def kernel_sources(path) -> list:
    """The rtrigid module at ``path`` and every rtrigid module it imports, transitively
    (absolute paths, sorted): the sources a kernel defined there can depend on."""
    seen, todo = set(), [os.path.abspath(path)]
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo += sorted(_imported_files(f) - seen)
    return sorted(seen)


def source_digest(path) -> str:
    """A digest of the rtrigid module at ``path`` and of every rtrigid module it imports,
    transitively.

    numba stamps a cached kernel with its own file's modification time and size only, so a
    change to a helper in another file that a kernel inlines or calls leaves the kernel's
    cache stale (seen here: old code run after a merge).  Everything a kernel can reach --
    the kernels it calls, the constants it freezes -- it reaches through its module's
    imports, so stamping it with this digest recompiles it when, and only when, one of those
    sources changes (an edit to the façade, a loader or the viewer recompiles nothing).
    """
    path = os.path.abspath(path)
    if path not in _DIGESTS:
        h = hashlib.sha256()
        for f in kernel_sources(path):
            h.update(f[len(_ROOT):].encode())
            with open(f, "rb") as fh:
                h.update(fh.read())
        _DIGESTS[path] = h.hexdigest()
    return _DIGESTS[path]


def _stamped(locator):
    """``locator`` for rtrigid's files, with the source digest in the source stamp."""
    class PackageStamped(locator):
        @classmethod
        def from_function(cls, py_func, py_file):
            if not os.path.abspath(py_file).startswith(_ROOT):
                return None
            self = super().from_function(py_func, py_file)
            if self is not None:
                # a kernel recompiled by rebind() lives in another module, whose imports
                # supply the passes it calls: that module's sources stamp it too
                home = getattr(sys.modules.get(py_func.__module__), "__file__", None) or py_file
                self._rtrigid_files = sorted({os.path.abspath(py_file), os.path.abspath(home)})
            return self

        def get_source_stamp(self):
            return (super().get_source_stamp(),
                    *(source_digest(f) for f in self._rtrigid_files))

    return PackageStamped


if CACHE:
    _locators = numba.core.caching.CacheImpl._locator_classes
    _locators[:0] = [_stamped(c) for c in list(_locators)]


def _inline_copies_share_one_memo():
    """Make numba's inlining copy a callee's IR in time linear in its size, not quadratic.

    ``InlineWorker.inline_ir`` (``inline="always"``, :data:`jit_inline`) deep-copies the
    callee's IR block by block, each block with a memo of its own.  A block's variables refer
    to the function's scope, which holds every variable of the function, so every block
    copied the whole scope again: (blocks x variables) for each call site inlined, a large
    part of the compile of the tree steps' large inlined kernels.  Here the blocks of one
    IR are copied with one memo, as ``copy.deepcopy`` of the whole block map would: the same
    blocks, statements and variables, the scope copied once and shared by the blocks as in
    the IR copied.  The kernels compile to the same operations, so they compute the same bits.
    """
    import copy

    from numba.core import inline_closurecall, ir

    memos = []  # per inline_ir call in progress: a memo per scope copied

    class _SharedMemoCopy:
        """The module ``copy`` for ``inline_closurecall``, but a block copied inside
        ``inline_ir`` shares the memo of its scope's other blocks."""

        @staticmethod
        def deepcopy(x, memo=None):
            if memo is None and memos and isinstance(x, ir.Block):
                memo = memos[-1].setdefault(id(x.scope), {})
            return copy.deepcopy(x, memo)

        def __getattr__(self, name):
            return getattr(copy, name)

    worker = inline_closurecall.InlineWorker
    inline_ir = worker.inline_ir

    @functools.wraps(inline_ir)
    def inline_ir_sharing_memos(self, *args, **kwargs):
        memos.append({})
        try:
            return inline_ir(self, *args, **kwargs)
        finally:
            memos.pop()

    if getattr(inline_closurecall, "copy", None) is copy:
        inline_closurecall.copy = _SharedMemoCopy()
        worker.inline_ir = inline_ir_sharing_memos


_inline_copies_share_one_memo()

# nogil: a kernel lets other threads of the process run while it steps.  Without it a thread that
# steps continuously (the HIL server's thread, a simulation thread beside a viewer) starves every
# other thread of the process: it drops the GIL only for instants (a select, a send) and takes it
# straight back, so a waiting thread hardly ever gets it (seen: the main thread of a process
# serving a long STEP took 4-30 s to run a few lines).  The cost is ~40 ns a call.
_njit = functools.partial(numba.njit, cache=CACHE, fastmath=False, error_model="numpy",
                         nogil=True)


def _runtime_arguments_first(dispatcher):
    """``dispatcher``, made to compile a call from another kernel for its arguments' runtime
    types first: ``f(x, 0, False)`` inside a kernel uses the ``f(float64, int64, bool)`` that
    every other caller uses, not a specialization for the literals 0 and False.

    numba types a constant argument as a literal and compiles the callee once more for each
    literal (seen: the tree energy-momentum solve compiled eight times, a quarter of a cold
    test run's compile time in such copies).  A callee that needs the literal -- to index a
    heterogeneous tuple, say -- fails to type with the runtime type and gets it as before.
    Either way it computes the same numbers: no fast-math, so folding a constant changes
    nothing in IEEE arithmetic.
    """
    from numba.core import errors, types

    literal_call = dispatcher.get_call_template

    def get_call_template(args, kws):
        plain = tuple(types.unliteral(a) for a in args)
        plain_kws = {k: types.unliteral(v) for k, v in kws.items()}
        if plain != tuple(args) or plain_kws != kws:
            try:
                return literal_call(plain, plain_kws)
            except errors.TypingError:
                pass
        return literal_call(args, kws)

    dispatcher.get_call_template = get_call_template
    return dispatcher


def jit(func=None, **options):
    """``numba.njit`` with rtrigid's options (see the module's docstring), compiling calls
    from other kernels for runtime argument types (:func:`_runtime_arguments_first`)."""
    if func is None:
        return functools.partial(jit, **options)
    return _runtime_arguments_first(_njit(**options)(func))


# Hot helpers that take many arrays are inlined into their caller at the numba-IR level: a
# real call updates a reference count for every array argument, which cost ~30 ns per array
# per call here (a 17-array right-hand side call: ~0.5 us) -- more than the arithmetic.
jit_inline = functools.partial(jit, inline="always")


_PURE = {}


def pure(kernel):
    """``kernel``'s Python body, with every compiled kernel it calls replaced by that kernel's
    own pure form, recursively: for Python-side calls made once (a model's set-up, a state
    write), which then compile nothing.

    Without fast-math the compiled code does the same IEEE double operations in the same
    order as the Python body, so the numbers are the same bit for bit (``kernel.py_func``
    alone would still compile the kernels it calls, one specialization each, ~0.1-0.2 s).
    """
    f = getattr(kernel, "py_func", kernel)
    if f not in _PURE:
        names = dict(f.__globals__)
        for name in f.__code__.co_names:
            if hasattr(names.get(name), "py_func"):
                names[name] = pure(names[name])
        _PURE[f] = types.FunctionType(f.__code__, names, f.__name__, f.__defaults__,
                                      f.__closure__)
    return _PURE[f]


# How many items (bodies, say) a query kernel is run over in its Python body before it is
# compiled: 0.02-0.09 s of Python for the façade's three (one body a call, measured), a
# fraction of the 0.2-0.7 s a compile of one takes
QUERY_BUDGET = 20_000
_QUERY_WORK = {}


def query(kernel, items):
    """The form of ``kernel`` to call once over ``items`` items: its Python body
    (:func:`pure`: the same operations, so the same bits) until the items of all such calls
    exceed :data:`QUERY_BUDGET`, then the compiled kernel.

    For the façade's queries (energy, momentum): a script that asks a few hundred times about
    a small model pays no compile for it, and a loop that asks every step about a big one
    compiles as soon as the Python time would have paid for that.
    """
    f = kernel.py_func
    work = _QUERY_WORK.get(f, 0) + items
    if work > QUERY_BUDGET or kernel.signatures:
        return kernel
    _QUERY_WORK[f] = work
    return pure(kernel)


def inline_copy(kernel):
    """A second compiled form of ``kernel``'s Python body that is inlined into its callers.

    For the one hot loop that calls a pass many times a step (the RK4 tree step): a real call
    of a pass that takes six to nine arrays costs more than its arithmetic on a small tree
    (measured on the 2-link arm: ``actuator_loads`` 78 ns called, 5 ns inlined; the whole
    step 1.69 -> 0.96 us with every pass inlined), because LLVM leaves most of the calls'
    reference counts in place.  The passes stay ordinary kernels for every other caller, so
    only this loop pays the longer compilation.  The copy has a name of its own
    (``<name>_inline``), so numba's cache never mixes the two.
    """
    return _recompiled(kernel, "inline", {}, jit_inline)


def _recompiled(kernel, suffix, names, decorator, module=None):
    """``decorator`` applied to a copy of ``kernel``'s Python body named ``<name>_<suffix>``,
    its module globals ``names`` replaced, said to live in ``module`` (default: kernel's)."""
    import types

    f = kernel.py_func
    g = types.FunctionType(f.__code__, {**f.__globals__, **names} if names else f.__globals__,
                           f"{f.__name__}_{suffix}", f.__defaults__, f.__closure__)
    g.__qualname__ = f"{f.__qualname__}_{suffix}"
    g.__doc__ = f.__doc__
    g.__module__ = module or f.__module__
    return decorator(g)


def rebind(kernel, suffix, module, **names):
    """A second compiled form of ``kernel``'s Python body in which the module globals
    ``names`` are replaced (``name=kernel``): the same loop around other passes, written
    once.  Named ``<name>_<suffix>`` (numba's cache keeps it apart from the original by that
    name); said to live in ``module``, whose sources then stamp its cache too."""
    return _recompiled(kernel, suffix, names, jit, module)


class _CompileNotice(numba.core.event.Listener):
    """Says once, on stderr, that numba is compiling (which only happens on a cache miss)."""

    def __init__(self, stream):
        self.stream, self.said = stream, False

    def on_start(self, event):
        if not self.said:
            self.said = True
            where = (os.environ.get("NUMBA_CACHE_DIR")
                     or "__pycache__ folders beside rtrigid's sources")
            if not CACHE:
                where = "nowhere: RTRIGID_NO_CACHE is set"
            print(f"rtrigid: compiling numba kernels on first use (up to about half a minute "
                  f"on 2 cores; cached in {where}) ...", file=self.stream, flush=True)

    def on_end(self, event):
        pass


def compile_notice(stream=None):
    """A context in which the first numba compilation prints one line on ``stream`` (stderr).

    Loading a kernel from the on-disk cache is no compilation and prints nothing.
    """
    return numba.core.event.install_listener("numba:compile",
                                             _CompileNotice(stream or sys.stderr))


# The kernel contract's argument types: step(n, dt, F, I)
STEP_TYPES = (numba.types.int64, numba.types.float64, numba.types.float64[::1],
              numba.types.int64[::1])


def step_address(kernel) -> int:
    """The address of ``kernel``'s compiled code for the kernel contract's arguments
    (:data:`STEP_TYPES`), compiled or loaded from the cache here: what :func:`call_step`
    calls.  Valid in this process while ``kernel`` lives."""
    kernel.compile(STEP_TYPES)
    done = kernel.overloads[STEP_TYPES]
    return done.library.get_pointer_to_function(done.fndesc.llvm_func_name)


@numba.extending.intrinsic
def call_step(typingctx, address, n, dt, F, I):
    """``kernel(n, dt, F, I)`` inside a kernel, for the kernel at ``address``
    (:func:`step_address`), through numba's own calling convention.

    A kernel that calls another by name links the callee's code into its own, and LLVM
    optimizes and generates all of it again: each driver around a scheme's step (a Batch's,
    the contact step's) was a second compile of the whole step, 20-90 s on this machine, and
    one driver per scheme.  Called by address, a driver is one small compile for every
    kernel, cached like any other (the address is an argument, not part of its code), and
    the step runs the very code a Simulation runs.  An exception the kernel raises
    propagates as from a direct call."""
    from numba.core import cgutils, errors, types

    if (F, I) != STEP_TYPES[2:] or not isinstance(address, types.Integer) \
            or not isinstance(n, types.Integer) or not isinstance(dt, types.Float):
        raise errors.TypingError(f"call_step: expected (address, n, dt, F, I) with F, I of "
                                 f"types {STEP_TYPES[2:]}, got {(address, n, dt, F, I)}")
    signature = types.int64(address, n, dt, F, I)

    def codegen(context, builder, sig, args):
        address, n, dt, F, I = args
        n = context.cast(builder, n, sig.args[1], types.int64)
        dt = context.cast(builder, dt, sig.args[2], types.float64)
        address = context.cast(builder, address, sig.args[0], types.int64)
        fnty = context.call_conv.get_function_type(types.int64, STEP_TYPES)
        callee = builder.inttoptr(address, fnty.as_pointer())
        status, out = context.call_conv.call_function(builder, callee, types.int64,
                                                      STEP_TYPES, [n, dt, F, I])
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return out

    return signature, codegen


def entry_point(kernel, *args):
    """The compiled entry point of the numba dispatcher ``kernel`` for the types of
    ``args``, or ``kernel`` itself when it is no dispatcher or has no such overload.  Called
    directly, it skips the dispatcher's type resolution; it checks no types, so call it
    with arguments of exactly those types."""
    overloads = getattr(kernel, "overloads", None)
    if not overloads:
        return kernel
    key = tuple(numba.typeof(a) for a in args)
    for sig, result in overloads.items():
        if tuple(sig) == key:
            return result.entry_point
    return kernel
