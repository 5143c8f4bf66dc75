"""Every pair of convex geoms: the exact fast paths of :mod:`.pairs` where they exist, else the
general narrow phase (:func:`.convex.collide` and the manifold of :mod:`.clipping`).

A model whose geoms may meet in a pair without a fast path (a cylinder on a box, two hulls, an
ellipsoid on a capsule) is stepped by a second compiled form of the contact step, in which
:func:`.manifold.detect` calls :func:`general_pair` (``detect_general`` and
``resolve_general`` below, made by :func:`rtrigid._jit.rebind`; the backends rebind their own
``after_step`` on them).  Models of spheres, capsules and boxes keep the first form and never
compile GJK, EPA or the clipping, unless a capsule may meet a box (that pair has no fast path).

The general pair is compiled once, as a C callback (:func:`address`), and ``detect_general``
calls it through its address: a scheme's contact step then links only that call, not the
general narrow phase's code, so each scheme's step (and a Batch's driver) compiles in the time
of the fast form's.  It works in scratch carved from two flat arrays of the scene (``xf``
floats, ``xi`` ints of the :class:`~.manifold.Scene`: :func:`scratch`; ``xi[0]`` holds the
callback's address), so a step allocates nothing and each copy of a :class:`~rtrigid.Batch`
has its own.  Its contacts are written as the fast paths write theirs: ``body`` the first
geom's body, the normal from the second geom into the first, the point midway through the
overlap, contacts within the speculative margin with negative depth; a face-on pair gets up
to four points (the clipped manifold), a curved one its deepest point.
"""
import numpy as np
from llvmlite import ir
from numba import carray, cfunc, types
from numba.core import cgutils
from numba.extending import intrinsic

from rtrigid._jit import CACHE, jit, rebind
from rtrigid.contact import clipping, convex
from rtrigid.contact.clipping import ClipSpace, M_DEPTH, M_WIDTH, manifold
from rtrigid.contact.fieldcontact import SCRATCH, field_pair, field_space
from rtrigid.contact.convex import (
    EPA_EDGES,
    EPA_FACES,
    EPA_VERTICES,
    R_DIST,
    R_NORMAL,
    R_WIDTH,
    W_KIND,
    W_NPLANE,
    W_NVERT,
    W_PLANE,
    W_POS,
    W_RADIUS,
    W_ROT,
    W_SIZE,
    W_VERT,
    Workspace,
    collide,
)
from rtrigid.contact.geometry import (
    C_WIDTH,
    G_KIND,
    G_P,
    G_RADIUS,
    G_WIDTH,
    GI_PCOUNT,
    GI_PSTART,
    GI_VCOUNT,
    GI_VSTART,
    GI_WIDTH,
    HEIGHTFIELD,
    HULL,
    W_TIGHT,
    Pose,
    add_point,
)
from rtrigid.contact.manifold import Scene, detect
from rtrigid.contact.pairs import has_pair_test, pair_coefficients, pair_contacts
from rtrigid.contact.solver import resolve
from rtrigid.maths.quat import rotmat

POLY = clipping.POLY
W = convex.W_WIDTH
# float scratch: two world rows, collide's result, the manifold, GJK's simplex, EPA's vertices
# and faces, the clipping's polygons and candidates, a heightfield's (contact.fieldcontact)
_F_PARTS = (2 * W, R_WIDTH, clipping.MAX_POINTS * M_WIDTH, 4 * 9, EPA_VERTICES * 9,
            EPA_FACES * 5, POLY * 3, 4 * POLY * 3, 4 * POLY * 3, (4 * POLY + 1) * M_WIDTH,
            SCRATCH)
F_SIZE = sum(_F_PARTS)
# int scratch: the callback's address, EPA's face links, horizon and stack
I_SIZE = 1 + EPA_FACES * 6 + EPA_EDGES * 4 + EPA_FACES


def scratch(general):
    """(xf, xi): the general pair's scratch, or two empty arrays for a model without such
    pairs."""
    if not general:
        return np.zeros(0), np.zeros(0, np.int64)
    xi = np.zeros(I_SIZE, np.int64)
    xi[0] = address()
    return np.zeros(F_SIZE), xi


def needs_general(ka, kb):
    """Whether geoms of kind codes ka and kb meet through the general narrow phase (no fast
    path: two convex geoms, or a convex geom and a heightfield)."""
    return not has_pair_test(ka, kb) and not (ka == HEIGHTFIELD and kb == HEIGHTFIELD)


@jit
def _world_row(geom, geomi, g, c, q, row):
    """The world row of :mod:`.convex` of geom g at world origin c and orientation q."""
    for i in range(W):
        row[i] = 0.0
    kind = int(geom[g, G_KIND])
    row[W_KIND] = kind
    for i in range(3):
        row[W_SIZE + i] = geom[g, G_P + i]
        row[W_POS + i] = c[i]
    rotmat(q, row[W_ROT:W_ROT + 9].reshape((3, 3)))  # row-major, local -> world
    if kind == HULL:
        row[W_VERT], row[W_NVERT] = geomi[g, GI_VSTART], geomi[g, GI_VCOUNT]
        row[W_PLANE], row[W_NPLANE] = geomi[g, GI_PSTART], geomi[g, GI_PCOUNT]
    row[W_RADIUS] = geom[g, G_RADIUS]


@jit
def _carve(xf, xi):
    """The views of the scratch: (wa, wb, res, out, Workspace, ClipSpace, the heightfields'
    floats)."""
    o = 0
    wa, wb = xf[0:W], xf[W:2 * W]
    o = 2 * W
    res = xf[o:o + R_WIDTH]
    o += R_WIDTH
    out = xf[o:o + 16].reshape((4, M_WIDTH))
    o += 16
    simplex = xf[o:o + 36].reshape((4, 9))
    o += 36
    ev = xf[o:o + EPA_VERTICES * 9].reshape((EPA_VERTICES, 9))
    o += EPA_VERTICES * 9
    fd = xf[o:o + EPA_FACES * 5].reshape((EPA_FACES, 5))
    o += EPA_FACES * 5
    ref = xf[o:o + POLY * 3].reshape((POLY, 3))
    o += POLY * 3
    inc = xf[o:o + 12 * POLY].reshape((4 * POLY, 3))
    o += 12 * POLY
    buf = xf[o:o + 12 * POLY].reshape((4 * POLY, 3))
    o += 12 * POLY
    cand = xf[o:o + (4 * POLY + 1) * M_WIDTH].reshape((4 * POLY + 1, M_WIDTH))
    o += (4 * POLY + 1) * M_WIDTH
    field = xf[o:o + SCRATCH]
    o = 1
    fi = xi[o:o + EPA_FACES * 6].reshape((EPA_FACES, 6))
    o += EPA_FACES * 6
    edges = xi[o:o + EPA_EDGES * 4].reshape((EPA_EDGES, 4))
    o += EPA_EDGES * 4
    stack = xi[o:o + EPA_FACES]
    return (wa, wb, res, out, Workspace(simplex, ev, fi, fd, edges, stack),
            ClipSpace(ref, inc, buf, cand), field)


@jit
def general_pair(table, k, cap, a, b, ga, gb, scene, pa, pb):
    """:func:`.pairs.pair_contacts` for every pair of convex kinds: the fast path where there
    is one, else collide and the clipped manifold, or against a heightfield
    :func:`.fieldcontact.field_pair`; returns the next free row.  scene: the
    geoms (a :class:`~.manifold.Scene`; this reads its geom tables, pools and the general
    pairs' scratch xf, xi), pa, pb: the two geoms' :class:`~.geometry.Pose`."""
    geom, geomi, verts, planes = scene.geom, scene.geomi, scene.verts, scene.planes
    ca, qa = pa
    cb, qb = pb
    ka, kb = int(geom[ga, G_KIND]), int(geom[gb, G_KIND])
    if has_pair_test(ka, kb):
        return pair_contacts(table, k, cap, a, b, ga, gb, geom, pa, pb)
    if ka == HEIGHTFIELD or k >= cap:
        return k
    mu, e, margin = pair_coefficients(geom, ga, gb)
    wa, wb, res, out, ws, cs, field = _carve(scene.xf, scene.xi)
    _world_row(geom, geomi, ga, ca, qa, wa)
    if kb == HEIGHTFIELD:  # terrain: scenery, so always the second geom
        return field_pair(table, k, cap, a, gb, scene, pb, wa, (mu, e, margin),
                          field_space(field, res, out, ws, cs))
    _world_row(geom, geomi, gb, cb, qb, wb)
    collide(wa, wb, verts, ws, res)
    if res[R_DIST] >= margin:
        return k
    n = (res[R_NORMAL], res[R_NORMAL + 1], res[R_NORMAL + 2])
    m = manifold(wa, wb, verts, planes, res, margin, cs, out)
    for i in range(m):
        if k >= cap:
            break
        k = add_point(table, k, a, b, i, out[i, 0], out[i, 1], out[i, 2], n, out[i, M_DEPTH],
                      mu, e)
    return k


_P, _PI, _I = types.CPointer(types.float64), types.CPointer(types.int64), types.int64
# the C callback's arguments: table (rows), the integers (_INTS of them: cap, k, a, b, ga, gb,
# the rows of geom, verts and planes), geom, geomi, verts, planes, xf, xi, ca, qa, cb, qb
_C_SIG = _I(_P, _PI, _P, _PI, _P, _P, _P, _PI, _P, _P, _P, _P)
_INTS = 9


def _general_pair_c(table_p, ints_p, geom_p, geomi_p, verts_p, planes_p, xf_p, xi_p, ca_p,
                    qa_p, cb_p, qb_p):
    """:func:`general_pair` on C pointers (the arrays rebuilt in place, nothing copied); its
    integers in one block (see ``_C_SIG``).  The scene is rebuilt without the broad phase's
    work and excluded pairs (None), which the pair test does not read."""
    n = carray(ints_p, (_INTS,))
    cap, ng = n[0], n[6]
    scene = Scene(carray(geom_p, (ng, G_WIDTH)), carray(geomi_p, (ng, GI_WIDTH)), None,
                  carray(verts_p, (n[7], 3)), carray(planes_p, (n[8], 4)), None,
                  carray(xf_p, (F_SIZE,)), carray(xi_p, (I_SIZE,)))
    return general_pair(carray(table_p, (cap, C_WIDTH)), n[1], cap, n[2], n[3], n[4], n[5],
                        scene, Pose(carray(ca_p, (3,)), carray(qa_p, (4,))),
                        Pose(carray(cb_p, (3,)), carray(qb_p, (4,))))


_CALLBACK = []


def address():
    """The address of the compiled C callback of :func:`general_pair` (compiled, or loaded
    from the cache, on first use)."""
    if not _CALLBACK:
        _CALLBACK.append(cfunc(_C_SIG, cache=CACHE, error_model="numpy")(_general_pair_c))
    return _CALLBACK[0].address


@intrinsic
def _call(typingctx, addr, table, k, a, b, ga, gb, scene, pa, pb):
    """The C callback at ``addr`` called on these arrays' data pointers and row counts (the
    scene's and the poses' arrays by name; the integers in a block on the stack)."""
    sig = types.int64(addr, table, k, a, b, ga, gb, scene, pa, pb)

    def codegen(context, builder, signature, args):
        tys = signature.args

        def array(ty, value):
            return context.make_array(ty)(context, builder, value)

        def member(i, name):  # an array of the named tuple args[i]
            j = tys[i].fields.index(name)
            return array(tys[i].types[j], builder.extract_value(args[i], j))

        def rows(arr):
            return cgutils.unpack_tuple(builder, arr.shape)[0]

        def integer(i):
            return context.cast(builder, args[i], tys[i], types.int64)

        i64 = ir.IntType(64)
        table = array(tys[1], args[1])
        geom, geomi, verts, planes, xf, xi = (member(7, name) for name in (
            "geom", "geomi", "verts", "planes", "xf", "xi"))
        ints = cgutils.alloca_once(builder, i64, size=_INTS)
        for j, value in enumerate((rows(table), integer(2), integer(3), integer(4), integer(5),
                                   integer(6), rows(geom), rows(verts), rows(planes))):
            builder.store(value, cgutils.gep(builder, ints, j))
        cargs = [table.data, ints, geom.data, geomi.data, verts.data, planes.data, xf.data,
                 xi.data, member(8, "c").data, member(8, "q").data, member(9, "c").data,
                 member(9, "q").data]
        fnty = ir.FunctionType(i64, [c.type for c in cargs])
        fn = builder.inttoptr(integer(0), fnty.as_pointer())
        return builder.call(fn, cargs)

    return sig, codegen


@jit
def _pair_by_address(table, k, cap, a, b, ga, gb, scene, pa, pb):
    """:func:`general_pair` through its C callback, whose address is scene.xi[0]."""
    return _call(scene.xi[0], table, k, a, b, ga, gb, scene, pa, pb)


detect_general = rebind(detect, "general", __name__, GENERAL=True, _SWEPT=W_TIGHT,
                        general_pair=_pair_by_address)
resolve_general = rebind(resolve, "general", __name__, detect=detect_general)
