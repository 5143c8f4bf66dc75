"""The kernel contract every backend keeps: two buffers, their sections, status and counters.

A step kernel is ``step(n, dt, F, I) -> status``: ``n`` steps of size ``dt`` in one compiled
call, on one float64 buffer ``F`` and one int64 buffer ``I``.  Two buffers rather than many
arrays, because numba's dispatcher pays for every array it unboxes (measured here: a tuple of
~40 arrays ~4 us per call, eight arrays 1.4 us, two arrays well under 1 us).  Their sections,
in this order (the one table of the layout; :func:`sections` carves it, in Python and in the
kernels alike):

    F = [model floats | S state | S_prev | A applied loads | solver | work]
    I = [model ints | stats]

model:   the backend's frozen model; its first entries tell its sizes, so a kernel finds
         where the model ends (see each backend's ``open_buffers``)
S:       the state; its layout is the backend's (``STATE_FIELDS`` in each backend)
S_prev:  the state at the start of the last step (render interpolation reads it; a failed
         step is rolled back from it)
A:       applied loads, (6 nb,): (nb, 3) world force at the centre of mass, (nb, 3) world
         torque; the tree backend adds (nv,) generalized forces held on the joint rates;
         constant over a call
solver:  [max_iter, max_halvings, step_budget] of implicit schemes (step_budget 0: none)
work:    scratch, sized by the kernel module's ``work_size``
stats:   int64 counters STAT_*
status:  OK, or FAILED / NONFINITE with the state rolled back to the start of the failed
         step; USED_FALLBACK or-ed in if any step needed the sub-step fallback,
         USED_BUDGET if any step ran out of its step budget (the budget outcome).
"""
import hashlib

import numpy as np
from numba.core import cgutils, types
from numba.core.datamodel import models, register_default
from numba.extending import intrinsic, overload
from numba.np.arrayobj import make_array, populate_array

from rtrigid._jit import jit, jit_inline

OK = 0
FAILED = 1
NONFINITE = 2
USED_FALLBACK = 4  # or-ed into the status when an implicit step needed its sub-step fallback
USED_BUDGET = 8  # or-ed in when a step ran out of its step budget and took the budget outcome

STAT_STEPS = 0
STAT_ITERS = 1
STAT_MAX_ITERS = 2
STAT_FALLBACKS = 3
STAT_SPENT = 4  # Newton iterations handed out: a converged solve's, and a failed one's cap
STAT_BUDGET = 5  # steps that ran out of their step budget
STAT_PATH = 6  # steps solved whole by following the path of their solution in h
N_STATS = 7

SOLVER_MAX_ITER = 0
SOLVER_HALVINGS = 1
SOLVER_BUDGET = 2
N_SOLVER = 3


def view(buf, offset, shape):
    """The C-ordered view of ``buf[offset:offset + prod(shape)]`` with ``shape`` (a tuple).

    In Python it is that slice reshaped.  In a kernel it is built directly: ``buf``'s data
    pointer moved by ``offset``, C strides from ``shape``, and *no reference* to ``buf``'s
    memory (numba's reshape calls a C helper per view, and every view holding a reference
    costs two atomic reference-count operations that LLVM cannot prune across the step loop's
    calls: the ~40 views a tree kernel carves on entry cost ~1.3 us a call that way, about a
    2-link arm's RK4 step; measured kernel(0) 1.79 -> 0.46 us, kernel(1) 5.1 -> 2.4 us).
    So a kernel's view lives only while the kernel runs (its caller holds ``buf``): a jitted
    function returning such views must not be called from Python -- call its ``.py_func``,
    as the backends do.  No bounds are checked in a kernel: the layouts are checked against
    their sizes by the tests.
    """
    size = 1
    for d in shape:
        size *= d
    return buf[offset:offset + size].reshape(shape)


class ViewArray(types.Array):
    """The numba type of a kernel's :func:`view`: an array that holds no reference.

    A view's memory is its caller's buffer (its meminfo is NULL), so numba's reference
    counting of it is a call of ``NRT_incref``/``NRT_decref`` on a null pointer that does
    nothing.  numba still emits those calls for every array a function takes, on entry and at
    every exit, and cannot prune most of them (a pass taking ~60 arrays: ~100 calls; the
    profile of the 2-link arm under ``energy_momentum``: ~20 % of the step in the call
    sequences and ``NRT_incref``).  This type's data model lists no member to count, so numba
    emits none.  Everything else is ``types.Array``'s (same layout, same operations); a slice
    or an element row of a view is an ordinary array again.
    """

    def __init__(self, dtype, ndim, layout):
        super().__init__(dtype, ndim, layout, name=f"view({dtype}, {ndim}d, {layout})")


@register_default(ViewArray)
class _ViewArrayModel(models.ArrayModel):
    """``types.Array``'s layout with nothing for the reference counting to visit."""

    def traverse(self, builder):
        return []

    def traverse_types(self):
        return []

    def has_nrt_meminfo(self):
        return False


@intrinsic
def _c_view(typingctx, buf, offset, shape):
    retty = ViewArray(buf.dtype, len(shape), "C")

    def codegen(context, builder, sig, args):
        bufv, off, shp = args
        src = make_array(sig.args[0])(context, builder, bufv)
        out = make_array(retty)(context, builder)
        shapes = [context.cast(builder, d, t, types.intp)
                  for d, t in zip(cgutils.unpack_tuple(builder, shp), sig.args[2])]
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(buf.dtype)))
        strides, stride = [], itemsize
        for d in reversed(shapes):
            strides.insert(0, stride)
            stride = builder.mul(stride, d)
        data = builder.gep(src.data, [context.cast(builder, off, sig.args[1], types.intp)])
        populate_array(out, data=data, shape=shapes, strides=strides, itemsize=itemsize,
                       meminfo=None)
        return out._getvalue()

    return retty(buf, offset, shape), codegen


@overload(view, inline="always")
def _view_kernel(buf, offset, shape):
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C"
            and isinstance(shape, types.BaseTuple)):
        return None
    return lambda buf, offset, shape: _c_view(buf, offset, shape)


def flat(a, n):
    """The 1-d view of the ``n`` entries of memory from ``a``'s first one: the buffer a view
    ``a`` was carved from, from ``a``'s offset on (a kernel's passes take their scratch
    buffer, not the ~40 views carved from it, and carve them themselves).  Like
    :func:`view`, no bounds are checked in a kernel and the view holds no reference."""
    return np.lib.stride_tricks.as_strided(a, shape=(n,), strides=(a.itemsize,))


@intrinsic
def _c_flat(typingctx, a, n):
    retty = ViewArray(a.dtype, 1, "C")

    def codegen(context, builder, sig, args):
        av, nv = args
        src = make_array(sig.args[0])(context, builder, av)
        out = make_array(retty)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(a.dtype)))
        populate_array(out, data=src.data, shape=[context.cast(builder, nv, sig.args[1],
                                                               types.intp)],
                       strides=[itemsize], itemsize=itemsize, meminfo=None)
        return out._getvalue()

    return retty(a, n), codegen


@overload(flat, inline="always")
def _flat_kernel(a, n):
    if not (isinstance(a, types.Array) and a.layout == "C"):
        return None
    return lambda a, n: _c_flat(a, n)


def unowned(a):
    """``a`` as a kernel's :func:`view` of all of it: the same memory and shape, holding no
    reference.  In Python it is ``a``.

    For the arrays a compiled step is handed from Python (the contact step's table, its
    scratch and the scene's geoms): each one an ordinary array holds costs two atomic
    reference-count operations whenever a function takes it or a row of it, and the contact
    solve takes rows in its innermost loops (measured: ``NRT_incref``/``NRT_decref`` were
    60 % of the box stack's step).  Viewed at the step's entry, they cost nothing.  ``a``
    must be C-contiguous and outlive the step (its caller holds it)."""
    return a


@overload(unowned, inline="always")
def _unowned_kernel(a):
    if isinstance(a, ViewArray):
        return lambda a: a
    if not (isinstance(a, types.Array) and a.layout == "C"):
        return None
    return lambda a: _c_view(_c_flat(a, a.size), 0, a.shape)


@jit_inline
def sections(F, I, nf_model, ni_model, n_state, n_applied):
    """(S, S_prev, A, solver, stats, work) views of the buffers, in the order above.

    Built by :func:`view` (no reference counts in a kernel, see there), like every view a
    kernel carves: a slice holds a reference, and a kernel that calls a pass with such arrays
    pays two atomic operations per slice on entry and exit (the tree kernels' set-up, measured
    on the 7-link arm under ``semi_implicit_euler``: kernel(0) 0.35 -> 0.17 us)."""
    o = nf_model
    S = view(F, o, (n_state,))
    o += n_state
    S_prev = view(F, o, (n_state,))
    o += n_state
    A = view(F, o, (n_applied,))
    o += n_applied
    solver = view(F, o, (N_SOLVER,))
    o += N_SOLVER
    return S, S_prev, A, solver, view(I, ni_model, (N_STATS,)), view(F, o, (F.shape[0] - o,))


def allocate(mf, mi, n_state, n_applied, n_work):
    """The two buffers holding model ``mf``/``mi`` and zeroed sections of the given sizes."""
    F = np.zeros(len(mf) + 2 * n_state + n_applied + N_SOLVER + n_work)
    I = np.zeros(len(mi) + N_STATS, dtype=np.int64)
    F[:len(mf)] = mf
    I[:len(mi)] = mi
    return F, I


def model_digest(mf, mi):
    """A digest of a frozen model's two arrays: what makes two simulations the same model."""
    return hashlib.sha256(mf.tobytes() + mi.tobytes()).digest()


def field_offsets(fields, count):
    """{name: (start, stop)} of a field-major layout: each (name, width) field holds
    ``count`` rows of ``width`` entries, one field after the other."""
    out, o = {}, 0
    for name, width in fields:
        out[name] = (o, o + width * count)
        o += width * count
    return out


@jit
def all_finite(a):
    """True when no entry of the flat array ``a`` is NaN or infinite."""
    for i in range(a.shape[0]):
        if not np.isfinite(a[i]):
            return False
    return True


@jit
def clamp_into(u, lo, hi, out):
    """out <- min(max(u, lo), hi) entry by entry if every entry of ``u`` is finite (True);
    else False and ``out`` untouched.  One compiled call (~0.25 us) where the checks and
    ``np.clip`` in numpy cost ~1 us (Simulation.set_controls)."""
    for i in range(u.shape[0]):
        if not np.isfinite(u[i]):
            return False
    for i in range(u.shape[0]):
        out[i] = min(max(u[i], lo[i]), hi[i])
    return True
