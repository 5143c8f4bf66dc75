"""Properties of rtrigid.model: the builder refuses every bad input with a ValueError that names
the field, and freeze()/flatten()/kernel_arrays() produce the flat arrays the kernels read,
checked against independent computations (angular momentum by cross products for the
parallel-axis inertia, field-by-field comparison for the flat-array round trip).
"""
import numpy as np
import pytest

import rtrigid as rt

from rtrigid.backends.bodies import layout as M
from rtrigid.backends.bodies.layout import FREE, PIVOTED, freeze
from rtrigid.model import Model

NAN = float("nan")


def _model(gravity=(0.0, 0.0, -9.81)):
    m = Model(gravity=gravity)
    m.add_body("a", 1.0, (1.0, 1.0, 1.0))
    return m


def _random_physical_inertia(rng):
    """Principal moments of a random box: always satisfy the triangle inequality."""
    a = rng.uniform(0.1, 2.0, 3) ** 2
    mass = rng.uniform(0.5, 5.0)
    return mass, mass / 3.0 * np.array([a[1] + a[2], a[0] + a[2], a[0] + a[1]])


# -- refusals ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mass", [0.0, -1.0, NAN, float("inf"), "heavy", None])
def test_add_body_refuses_bad_mass_naming_mass(mass):
    m = Model()
    with pytest.raises(ValueError, match=r"^mass"):
        m.add_body("a", mass, (1.0, 1.0, 1.0))
    assert m.bodies == []


@pytest.mark.parametrize("inertia", [
    (1.0, 1.0), (1.0, 1.0, 1.0, 1.0), [[1.0, 1.0, 1.0]], (1.0, NAN, 1.0),
    (1.0, float("inf"), 1.0), (0.0, 1.0, 1.0), (1.0, -1.0, 1.0), "abc",
])
def test_add_body_refuses_bad_inertia_naming_inertia(inertia):
    m = Model()
    with pytest.raises(ValueError, match=r"^inertia"):
        m.add_body("a", 1.0, inertia)
    assert m.bodies == []


@pytest.mark.parametrize("inertia", [(3.0, 1.0, 1.0), (1.0, 3.0, 1.0), (1.0, 1.0, 3.0),
                                     (0.8, 0.8, 1.8)])
def test_triangle_inequality_violation_refused_unless_opted_out(inertia):
    m = Model()
    with pytest.raises(ValueError, match=r"^inertia.*triangle"):
        m.add_body("a", 1.0, inertia)
    assert m.bodies == []
    i = m.add_body("a", 1.0, inertia, allow_nonphysical_inertia=True)
    assert i == 0
    np.testing.assert_array_equal(m.bodies[0].inertia, inertia)


def test_opt_out_still_refuses_non_positive_inertia():
    m = Model()
    with pytest.raises(ValueError, match=r"^inertia"):
        m.add_body("a", 1.0, (0.0, 1.0, 1.0), allow_nonphysical_inertia=True)
    with pytest.raises(ValueError, match=r"^inertia"):
        m.add_body("a", 1.0, (1.0, NAN, 1.0), allow_nonphysical_inertia=True)


def test_triangle_equality_is_accepted():
    """A flat plate (I3 = I1 + I2) is a real body."""
    m = Model()
    m.add_body("plate", 1.0, (1.0, 2.0, 3.0))
    assert len(m.bodies) == 1


@pytest.mark.parametrize("name", ["", None, 3])
def test_add_body_refuses_bad_name(name):
    m = Model()
    with pytest.raises(ValueError, match=r"^name"):
        m.add_body(name, 1.0, (1.0, 1.0, 1.0))


def test_duplicate_body_name_refused():
    m = _model()
    with pytest.raises(ValueError, match=r"^name.*'a'"):
        m.add_body("a", 2.0, (1.0, 1.0, 1.0))
    assert len(m.bodies) == 1 and m.bodies[0].mass == 1.0


@pytest.mark.parametrize("shape", [
    ("pyramid", {"radius": 1.0}),
    ("sphere", {}),
    ("cylinder", {"radius": 1.0}),
    ("cone", {"height": 1.0}),
    ("box", {"radius": 1.0}),
    ("sphere", {"radius": -1.0}),
    ("sphere", {"radius": NAN}),
    ("box", {"half_extents": (1.0, 1.0)}),
    ("sphere", {"radius": 1.0, "offset": (0.0, NAN, 0.0)}),
    "sphere",
    42,
])
def test_bad_shape_refused_naming_shape(shape):
    m = Model()
    with pytest.raises(ValueError, match=r"^shape"):
        m.add_body("a", 1.0, (1.0, 1.0, 1.0), shape=shape)
    assert m.bodies == []


@pytest.mark.parametrize("kind,params", [
    ("box", {"half_extents": (0.1, 0.2, 0.3)}),
    ("sphere", {"radius": 0.5}),
    ("cylinder", {"radius": 0.5, "half_length": 1.0}),
    ("cone", {"radius": 0.5, "height": 1.0, "offset": (0.0, 0.0, 0.1)}),
    ("capsule", {"radius": 0.5, "half_length": 1.0}),
])
def test_good_shapes_accepted(kind, params):
    m = Model()
    m.add_body("a", 1.0, (1.0, 1.0, 1.0), shape=(kind, params))
    s = m.bodies[0].shape
    assert s.kind == kind
    np.testing.assert_array_equal(s.offset, params.get("offset", (0.0, 0.0, 0.0)))


@pytest.mark.parametrize("half", [(-0.1, 0.2, 0.3), (0.0, 0.2, 0.3)])
def test_box_with_non_positive_half_extent_refused(half):
    """Regression: half_extents were once not checked for positivity, unlike other sizes."""
    m = Model()
    with pytest.raises(ValueError, match=r"^shape\.half_extents"):
        m.add_body("a", 1.0, (1.0, 1.0, 1.0), shape=("box", {"half_extents": half}))


@pytest.mark.parametrize("body", ["nope", 1, -1, 5, 1.0, None, True])
def test_attach_to_world_refuses_unknown_body(body):
    m = _model()
    with pytest.raises(ValueError, match=r"^body"):
        m.attach_to_world(body, (0.0, 0.0, -1.0))
    assert m.bodies[0].pivot_body is None


@pytest.mark.parametrize("body", ["nope", 1, -1, 7, None])
def test_add_spring_refuses_unknown_body(body):
    m = _model()
    with pytest.raises(ValueError, match=r"^body"):
        m.add_spring(body, (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 10.0)
    assert m.springs == []


def test_body_resolved_by_name_and_numpy_index():
    m = _model()
    m.add_body("b", 1.0, (1.0, 1.0, 1.0))
    assert m.body_index("b") == 1
    assert m.body_index(np.int64(1)) == 1
    m.add_spring("b", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 10.0)
    assert m.springs[0].body == 1


def test_attaching_twice_refused_and_first_attachment_kept():
    m = _model()
    m.attach_to_world("a", (0.0, 0.0, -1.0), (1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match=r"^body.*already attached"):
        m.attach_to_world(0, (0.0, 0.0, -2.0))
    np.testing.assert_array_equal(m.bodies[0].pivot_body, (0.0, 0.0, -1.0))
    np.testing.assert_array_equal(m.bodies[0].pivot_world, (1.0, 2.0, 3.0))


@pytest.mark.parametrize("field,point_body,point_world", [
    ("point_body", (0.0, NAN, 0.0), (0.0, 0.0, 0.0)),
    ("point_body", (0.0, 0.0), (0.0, 0.0, 0.0)),
    ("point_world", (0.0, 0.0, 1.0), (0.0, 0.0, float("inf"))),
    ("point_world", (0.0, 0.0, 1.0), "here"),
])
def test_attach_to_world_refuses_bad_points_naming_them(field, point_body, point_world):
    m = _model()
    with pytest.raises(ValueError, match=rf"^{field}"):
        m.attach_to_world("a", point_body, point_world)


@pytest.mark.parametrize("stiffness", [-1.0, -1e-300, NAN, float("inf")])
def test_add_spring_refuses_bad_stiffness(stiffness):
    m = _model()
    with pytest.raises(ValueError, match=r"^stiffness"):
        m.add_spring("a", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), stiffness)
    assert m.springs == []


@pytest.mark.parametrize("rest", [-1.0, -1e-12, NAN])
def test_add_spring_refuses_bad_rest_length(rest):
    m = _model()
    with pytest.raises(ValueError, match=r"^rest_length"):
        m.add_spring("a", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 10.0, rest)
    assert m.springs == []


@pytest.mark.parametrize("field,point,anchor", [
    ("point_body", (0.0, NAN, 0.0), (0.0, 0.0, 1.0)),
    ("anchor_world", (0.0, 0.0, 0.0), (0.0, 0.0)),
])
def test_add_spring_refuses_bad_points(field, point, anchor):
    m = _model()
    with pytest.raises(ValueError, match=rf"^{field}"):
        m.add_spring("a", point, anchor, 10.0)
    assert m.springs == []


def test_add_spring_accepts_zero_rest_length_and_returns_index():
    m = _model()
    assert m.add_spring("a", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 10.0) == 0
    assert m.add_spring("a", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 10.0, 0.5) == 1
    assert m.springs[0].rest_length == 0.0 and m.springs[1].rest_length == 0.5


@pytest.mark.parametrize("gravity", [(0.0, 0.0, NAN), (0.0, float("-inf"), 0.0), (0.0, -9.81),
                                     "down"])
def test_bad_gravity_refused_naming_gravity(gravity):
    with pytest.raises(ValueError, match=r"^gravity"):
        Model(gravity=gravity)


def test_simulating_an_empty_model_refused():
    with pytest.raises(ValueError, match=r"^bodies"):
        rt.Simulation(Model())


# -- freeze -----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_freeze_pivot_inertia_is_parallel_axis_formula(seed):
    rng = np.random.default_rng(seed)
    mass, inertia = _random_physical_inertia(rng)
    point_body = rng.normal(size=3)
    point_world = rng.normal(size=3)
    m = Model()
    m.add_body("free", 1.0, (1.0, 2.0, 2.5))
    m.add_body("top", mass, inertia)
    m.attach_to_world("top", point_body, point_world)
    fm = freeze(m)
    s = -point_body
    expected = np.diag(inertia) + mass * (s @ s * np.eye(3) - np.outer(s, s))
    np.testing.assert_allclose(fm.jref[1], expected, rtol=1e-14,
                               atol=1e-14 * np.abs(expected).max())
    # independently: the angular momentum about the pivot of the body turning at w about it is
    # I_cm w + s x (m (w x s)), for any w
    for _ in range(3):
        w = rng.normal(size=3)
        h = inertia * w + np.cross(s, mass * np.cross(w, s))
        np.testing.assert_allclose(fm.jref[1] @ w, h, rtol=1e-12, atol=1e-12 * np.linalg.norm(h))
    np.testing.assert_allclose(fm.jref_inv[1] @ fm.jref[1], np.eye(3), atol=1e-12)
    np.testing.assert_array_equal(fm.com[1], s)
    np.testing.assert_array_equal(fm.pivot[1], point_world)
    assert fm.kind.tolist() == [FREE, PIVOTED]
    # the free body keeps its centroidal inertia, reference point at its centre of mass
    np.testing.assert_array_equal(fm.jref[0], np.diag([1.0, 2.0, 2.5]))
    np.testing.assert_array_equal(fm.com[0], np.zeros(3))
    assert np.linalg.eigvalsh(fm.jref[1]).min() > 0.0


def test_freeze_spring_points_are_relative_to_the_reference_point():
    m = Model()
    m.add_body("free", 1.0, (1.0, 1.0, 1.0))
    m.add_body("top", 1.0, (1.0, 1.0, 1.0))
    m.attach_to_world("top", (0.0, 0.0, -0.5))
    m.add_spring("top", (0.1, 0.2, 0.3), (1.0, 1.0, 1.0), 5.0, 0.2)
    m.add_spring("free", (0.4, 0.5, 0.6), (2.0, 2.0, 2.0), 7.0)
    fm = freeze(m)
    # body point (from the centre of mass) minus pivot point (from the centre of mass)
    np.testing.assert_allclose(fm.spring_point[0], (0.1, 0.2, 0.8))
    np.testing.assert_allclose(fm.spring_point[1], (0.4, 0.5, 0.6))
    assert fm.spring_body.tolist() == [1, 0]
    np.testing.assert_array_equal(fm.spring_k, [5.0, 7.0])
    np.testing.assert_array_equal(fm.spring_rest, [0.2, 0.0])
    np.testing.assert_array_equal(fm.spring_anchor, [(1.0, 1.0, 1.0), (2.0, 2.0, 2.0)])


def test_freeze_is_a_copy_later_edits_do_not_leak():
    m = _model(gravity=(0.0, 0.0, -1.0))
    fm = freeze(m)
    m.gravity[2] = -5.0
    m.bodies[0].inertia[0] = 9.0
    assert fm.gravity[2] == -1.0
    assert fm.inertia[0, 0] == 1.0


def _random_model(rng, nb, ns):
    m = Model(gravity=rng.normal(size=3))
    for b in range(nb):
        mass, inertia = _random_physical_inertia(rng)
        m.add_body(f"b{b}", mass, inertia)
        if rng.random() < 0.5:
            m.attach_to_world(b, rng.normal(size=3), rng.normal(size=3))
    for _ in range(ns):
        m.add_spring(int(rng.integers(nb)), rng.normal(size=3), rng.normal(size=3),
                     rng.uniform(1.0, 100.0), rng.uniform(0.0, 1.0))
    return m


@pytest.mark.parametrize("compiled", [False, True], ids=["py_func", "compiled"])
@pytest.mark.parametrize("seed,nb,ns", [(0, 1, 0), (1, 1, 2), (2, 3, 0), (3, 4, 5), (4, 2, 1)])
def test_flatten_kernel_arrays_round_trip_every_field(seed, nb, ns, compiled):
    rng = np.random.default_rng(seed)
    fm = freeze(_random_model(rng, nb, ns))
    mf, mi = M.flatten(fm)
    assert mf.dtype == np.float64 and mi.dtype == np.int64
    assert mf.shape == (3 + M.B_WIDTH * nb + M.S_WIDTH * ns,)
    assert mi.shape == (2 + nb + ns,)
    fn = M.kernel_arrays if compiled else M.kernel_arrays.py_func
    gravity, bodyf, bodyi, springf, springi = fn(mf, mi)
    assert bodyf.shape == (nb, M.B_WIDTH) and springf.shape == (ns, M.S_WIDTH)
    np.testing.assert_array_equal(gravity, fm.gravity)
    np.testing.assert_array_equal(bodyf[:, M.B_MASS], fm.mass)
    np.testing.assert_array_equal(bodyf[:, M.B_INERTIA:M.B_INERTIA + 3], fm.inertia)
    np.testing.assert_array_equal(bodyf[:, M.B_JREF:M.B_JREF + 9].reshape(nb, 3, 3), fm.jref)
    np.testing.assert_array_equal(bodyf[:, M.B_JINV:M.B_JINV + 9].reshape(nb, 3, 3), fm.jref_inv)
    np.testing.assert_array_equal(bodyf[:, M.B_COM:M.B_COM + 3], fm.com)
    np.testing.assert_array_equal(bodyf[:, M.B_PIVOT:M.B_PIVOT + 3], fm.pivot)
    np.testing.assert_array_equal(bodyi, fm.kind)
    np.testing.assert_array_equal(springf[:, M.S_POINT:M.S_POINT + 3], fm.spring_point)
    np.testing.assert_array_equal(springf[:, M.S_ANCHOR:M.S_ANCHOR + 3], fm.spring_anchor)
    np.testing.assert_array_equal(springf[:, M.S_K], fm.spring_k)
    np.testing.assert_array_equal(springf[:, M.S_REST], fm.spring_rest)
    np.testing.assert_array_equal(springi, fm.spring_body)
    # the layout is dense: every float of mf is one of the fields above
    assert M.B_PIVOT + 3 == M.B_WIDTH and M.S_REST + 1 == M.S_WIDTH
