"""Properties of rtrigid.quat: identities of paper 000 (Appendix A, (8)-(14), (D4)), the Euler map
of paper 002 ((41), (47)-(56), (63)), Spurrier's extraction (003 (203)-(205)) and the angle
conversions, checked against scipy/mpmath references.  Every kernel-level property runs both
compiled and through ``kernel.py_func``.
"""
import mpmath
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from rtrigid.maths import quat as Q

I3 = np.eye(3)
I4 = np.eye(4)

OUT_SHAPES = {
    "quat_mul": (4,), "quat_conj": (4,), "quat_normalize": (4,), "quat_tangent": (4,),
    "skew": (3, 3), "Emat": (3, 4), "Gmat": (3, 4), "Qleft": (4, 4), "Qright": (4, 4),
    "plus4": (4, 4), "minus4": (4, 4), "rotmat": (3, 3), "rotate": (3,), "rotate_inv": (3,),
    "quat_exp": (4,), "quat_log": (3,), "quat_from_rotvec": (4,), "quat_to_rotvec": (3,),
    "dexp_matrix": (3, 3), "euler_map": (9,), "euler_map_diff": (9, 4),
    "euler_map_diff_pinv": (4, 9), "nullspace_matrix": (4, 3), "spurrier_klumpp": (4,),
    "quat_from_euler313": (4,), "quat_to_euler313": (3,), "quat_from_bryant123": (4,),
    "quat_to_bryant123": (3,), "quat_slerp": (4,),
}


class Kernels:
    """Access kernels as allocating functions, compiled or through their ``py_func``."""

    def __init__(self, python):
        self.python = python

    def __getattr__(self, name):
        kernel = getattr(Q, name)
        body = kernel.py_func if self.python else kernel
        shape = OUT_SHAPES[name]

        def call(*args):
            out = np.full(shape, 7.0)  # garbage, so a missed entry shows up
            result = body(*args, out)
            assert result is out
            return out

        return call


@pytest.fixture(params=["jit", "py"])
def K(request):
    return Kernels(request.param == "py")


def rand_quat(rng, unit=True):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q) if unit else q * rng.uniform(0.3, 3.0)


def same_rotation(p, q, atol=1e-12):
    """p and q are equal up to the sign ambiguity q ~ -q."""
    return min(np.abs(p - q).max(), np.abs(p + q).max()) <= atol


def scipy_rot(q):
    return Rotation.from_quat(np.roll(q, -1))  # scipy stores scalar last


def scipy_quat(r):
    return np.roll(r.as_quat(), 1)


def hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def angle_diff(a, b):
    return np.abs((np.asarray(a) - np.asarray(b) + np.pi) % (2 * np.pi) - np.pi)


def axis_rot(axis, angle):
    return scipy_rot(np.r_[np.cos(angle / 2), np.sin(angle / 2) * np.asarray(axis, float)])


# ------------------------------------------------------------------------ quaternion algebra


def test_product_matches_definition_000_eq1(K):
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b, c = (rand_quat(rng, unit=False) for _ in range(3))
        ref = np.r_[a[0] * b[0] - a[1:] @ b[1:],
                    a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:])]
        assert np.allclose(K.quat_mul(a, b), ref, atol=1e-14)
        assert np.allclose(K.quat_mul(K.quat_mul(a, b), c), K.quat_mul(a, K.quat_mul(b, c)))
        assert np.allclose(K.quat_conj(K.quat_mul(a, b)),
                           K.quat_mul(K.quat_conj(b), K.quat_conj(a)))
        assert np.allclose(K.quat_mul(a, K.quat_conj(a)), [a @ a, 0, 0, 0])


def test_product_allows_output_aliasing_an_input():
    rng = np.random.default_rng(2)
    a, b = rand_quat(rng), rand_quat(rng)
    ref = Q.mul(a, b)
    x = a.copy()
    Q.quat_mul(x, b, x)
    assert np.allclose(x, ref, atol=1e-15)


def test_normalize_and_tangent_projection_002_eq63(K):
    rng = np.random.default_rng(3)
    for _ in range(10):
        p_star = rand_quat(rng, unit=False)
        p = K.quat_normalize(p_star)
        assert abs(np.linalg.norm(p) - 1.0) < 1e-15
        assert np.allclose(p, p_star / np.linalg.norm(p_star), atol=1e-15)
        v = K.quat_tangent(p, rng.normal(size=4))
        assert abs(p @ v) < 1e-14
        assert np.allclose(K.quat_tangent(p, v), v, atol=1e-15)


# ---------------------------------------------------------------- 000 Appendix A identities


def test_A1_E_G_annihilate_q_and_are_scaled_orthonormal(K):
    rng = np.random.default_rng(10)
    for _ in range(10):
        q = rand_quat(rng, unit=False)
        n2 = q @ q
        E, G = K.Emat(q), K.Gmat(q)
        assert np.allclose(E @ q, 0, atol=1e-14) and np.allclose(G @ q, 0, atol=1e-14)
        assert np.allclose(E @ E.T, n2 * I3) and np.allclose(G @ G.T, n2 * I3)
        assert np.allclose(E.T @ E, n2 * I4 - np.outer(q, q))
        assert np.allclose(G.T @ G, n2 * I4 - np.outer(q, q))


def test_A2_antisymmetry_and_exchange(K):
    rng = np.random.default_rng(11)
    for _ in range(10):
        p, q = rand_quat(rng, unit=False), rand_quat(rng, unit=False)
        assert np.allclose(K.Emat(q) @ p, -K.Emat(p) @ q)
        assert np.allclose(K.Gmat(q) @ p, -K.Gmat(p) @ q)
        assert np.allclose(K.Emat(q) @ K.Gmat(p).T, K.Emat(p) @ K.Gmat(q).T)


def test_A3_skew4_times_q_equals_E_G_transpose(K):
    rng = np.random.default_rng(12)
    for _ in range(10):
        q, a = rand_quat(rng, unit=False), rng.normal(size=3)
        assert np.allclose(K.plus4(a) @ q, K.Emat(q).T @ a)
        assert np.allclose(K.minus4(a) @ q, K.Gmat(q).T @ a)


def test_A4_inverse_of_Qleft_Qright_is_scaled_transpose(K):
    rng = np.random.default_rng(13)
    for _ in range(10):
        q = rand_quat(rng, unit=False)
        n2, qc = q @ q, K.quat_conj(q)
        for Qm in (K.Qleft, K.Qright):
            assert np.allclose(np.linalg.inv(Qm(q)), Qm(q).T / n2)
            assert np.allclose(Qm(q).T, Qm(qc))
        u = rand_quat(rng)
        assert np.allclose(K.Qleft(u) @ K.Qleft(u).T, I4)
        assert np.allclose(K.Qright(u) @ K.Qright(u).T, I4)


def test_A5_products_of_skew4_matrices(K):
    # The two printed forms of (A5) both describe a- b-:
    #   a- b- = -(a.b) I4 + [[0, (a x b)^T], [-(a x b), hat(a x b)]] = -(a.b) I4 - (a x b)-.
    # The companion for the plus matrices is a+ b+ = -(a.b) I4 + (a x b)+, because
    # a+ = Qleft((0, a)) and a- = Qright((0, a)); left and right multiplications commute.
    rng = np.random.default_rng(14)
    for _ in range(10):
        a, b = rng.normal(size=3), rng.normal(size=3)
        c = np.cross(a, b)
        block = np.zeros((4, 4))
        block[0, 1:], block[1:, 0], block[1:, 1:] = c, -c, hat(c)
        amb = K.minus4(a) @ K.minus4(b)
        assert np.allclose(amb, -(a @ b) * I4 + block)
        assert np.allclose(amb, -(a @ b) * I4 - K.minus4(c))
        assert np.allclose(K.plus4(a) @ K.plus4(b), -(a @ b) * I4 + K.plus4(c))
        assert np.allclose(K.plus4(a) @ K.minus4(b), K.minus4(b) @ K.plus4(a))


def test_A6_matrix_exponential_of_half_plus4(K):
    rng = np.random.default_rng(15)
    for scale in (1e-8, 0.5, 2.0, 3.1):
        w = rng.normal(size=3)
        w *= scale / np.linalg.norm(w)
        n = np.linalg.norm(w)
        ref = scipy.linalg.expm(0.5 * K.plus4(w))
        closed = np.cos(n / 2) * I4 + np.sin(n / 2) / n * K.plus4(w)
        assert np.allclose(ref, closed, atol=1e-13)
        assert np.allclose(ref, K.Qleft(K.quat_from_rotvec(w)), atol=1e-13)
        assert np.allclose(scipy.linalg.expm(0.5 * K.minus4(w)),
                           K.Qright(K.quat_from_rotvec(w)), atol=1e-13)


# ------------------------------------------------------------------- 000 (9)-(14)


def test_eq9_eq10_left_right_matrices(K):
    rng = np.random.default_rng(20)
    for _ in range(10):
        a, b, q = (rand_quat(rng, unit=False) for _ in range(3))
        ab = K.quat_mul(a, b)
        assert np.allclose(K.Qleft(a) @ b, ab) and np.allclose(K.Qright(b) @ a, ab)
        assert np.allclose(K.Qleft(q), np.column_stack([q, K.Gmat(q).T]))
        assert np.allclose(K.Qright(q), np.column_stack([q, K.Emat(q).T]))
        assert np.allclose(K.Qleft(q), q[0] * I4 + K.plus4(q[1:]))
        assert np.allclose(K.Qright(q), q[0] * I4 + K.minus4(q[1:]))
        assert np.allclose(K.Qleft(a) @ K.Qright(b), K.Qright(b) @ K.Qleft(a))


def test_E_G_transpose_act_as_spatial_and_body_products(K):
    rng = np.random.default_rng(21)
    q, w = rand_quat(rng, unit=False), rng.normal(size=3)
    assert np.allclose(K.Emat(q).T @ w, K.quat_mul(np.r_[0.0, w], q))
    assert np.allclose(K.Gmat(q).T @ w, K.quat_mul(q, np.r_[0.0, w]))
    assert np.allclose(K.skew(w), hat(w))


def test_eq8_eq12_rotation_matrix(K):
    rng = np.random.default_rng(22)
    for _ in range(10):
        q = rand_quat(rng, unit=False)
        R = K.rotmat(q)
        assert np.allclose(R, K.Emat(q) @ K.Gmat(q).T)
        n2 = q @ q
        assert np.allclose(R, (q[0] ** 2 - q[1:] @ q[1:]) * I3 + 2 * np.outer(q[1:], q[1:])
                           + 2 * q[0] * hat(q[1:]))
        assert np.allclose(K.rotmat(2.5 * q), 2.5 ** 2 * R)  # homogeneous of degree two
        assert np.allclose(R / n2, scipy_rot(q).as_matrix())


def test_rotation_is_a_homomorphism_and_proper_orthogonal(K):
    rng = np.random.default_rng(23)
    for _ in range(10):
        p, q = rand_quat(rng), rand_quat(rng)
        R = K.rotmat(q)
        assert np.allclose(K.rotmat(K.quat_mul(p, q)), K.rotmat(p) @ R)
        assert np.allclose(R.T @ R, I3) and abs(np.linalg.det(R) - 1) < 1e-13
        x = rng.normal(size=3)
        conj_act = K.quat_mul(K.quat_mul(q, np.r_[0.0, x]), K.quat_conj(q))  # 000 (7)
        assert np.allclose(conj_act, np.r_[0.0, R @ x])
        assert np.allclose(K.rotate(q, x), R @ x)
        assert np.allclose(K.rotate_inv(q, x), R.T @ x)


def test_rotate_allows_output_aliasing_the_vector():
    rng = np.random.default_rng(24)
    q, x = rand_quat(rng), rng.normal(size=3)
    ref = Q.to_matrix(q) @ x
    Q.rotate(q, x, x)
    assert np.allclose(x, ref)


def test_eq13_eq14_angular_velocity_kinematics(K):
    rng = np.random.default_rng(25)
    for _ in range(10):
        q, Om = rand_quat(rng), rng.normal(size=3)
        qdot = 0.5 * K.Gmat(q).T @ Om
        assert np.allclose(qdot, 0.5 * K.quat_mul(q, np.r_[0.0, Om]))  # 000 (3)
        assert np.allclose(2 * K.Gmat(q) @ qdot, Om)
        om = 2 * K.Emat(q) @ qdot
        R = K.rotmat(q)
        assert np.allclose(om, R @ Om)
        assert np.allclose(0.5 * K.Emat(q).T @ om, qdot)
        Rdot = R @ hat(Om)
        assert np.allclose(Rdot, hat(om) @ R)
        assert np.allclose(Rdot, 2 * K.Emat(q) @ K.Gmat(qdot).T)  # 000 (13)
        h = 1e-6
        fd = (K.rotmat(q + h * qdot) - K.rotmat(q - h * qdot)) / (2 * h)
        assert np.allclose(fd, Rdot, atol=1e-8)


# ------------------------------------------------------------ exponential map and its inverse


def test_exp_log_round_trip_on_principal_branch(K):
    rng = np.random.default_rng(30)
    for mag in (1e-12, 1e-6, 0.3, 1.0, np.pi / 2 - 1e-9, np.pi / 2):
        w = rng.normal(size=3)
        w *= mag / np.linalg.norm(w)
        q = K.quat_exp(w)
        assert abs(np.linalg.norm(q) - 1) < 1e-15
        assert np.allclose(q, np.r_[np.cos(mag), np.sin(mag) * w / mag], atol=1e-16)
        assert np.allclose(K.quat_log(q), w, rtol=1e-12, atol=1e-15)


def test_log_uses_antipode_so_norm_is_at_most_half_pi(K):
    rng = np.random.default_rng(31)
    for mag in (2.0, np.pi - 1e-9, 3.0):
        w = rng.normal(size=3)
        w *= mag / np.linalg.norm(w)
        q = K.quat_exp(w)
        v = K.quat_log(q)
        assert np.linalg.norm(v) <= np.pi / 2 + 1e-15
        assert np.allclose(K.quat_exp(v), -q, atol=1e-15)


def test_rotvec_round_trip_matches_scipy(K):
    rng = np.random.default_rng(32)
    axes = rng.normal(size=(8, 3))
    for axis, angle in zip(axes, (1e-12, 1e-5, 0.7, 2.0, 3.0, np.pi - 1e-9, np.pi, 4.0)):
        theta = axis / np.linalg.norm(axis) * angle
        q = K.quat_from_rotvec(theta)
        assert np.allclose(K.rotmat(q), Rotation.from_rotvec(theta).as_matrix(), atol=1e-14)
        back = K.quat_to_rotvec(q)
        assert np.linalg.norm(back) <= np.pi + 1e-15
        assert np.allclose(K.rotmat(K.quat_from_rotvec(back)), K.rotmat(q), atol=1e-14)
        if angle < np.pi:
            assert np.allclose(back, theta, rtol=1e-10, atol=1e-15)
            assert np.allclose(back, Rotation.from_rotvec(theta).as_rotvec(), atol=1e-12)


def test_dexp_matrix_matches_central_difference_000_D4(K):
    rng = np.random.default_rng(33)
    h = 1e-6
    for mag in (1e-3, 0.009, 0.011, 0.4, 2.0, 3.0):
        theta = rng.normal(size=3)
        theta *= mag / np.linalg.norm(theta)
        dtheta = rng.normal(size=3)
        inv = K.quat_conj(K.quat_from_rotvec(theta))
        plus = K.quat_mul(K.quat_from_rotvec(theta + h * dtheta), inv)
        minus = K.quat_mul(K.quat_from_rotvec(theta - h * dtheta), inv)
        fd = (plus - minus) / (2 * h)
        H = K.dexp_matrix(theta)
        assert np.allclose(fd, np.r_[0.0, 0.5 * H @ dtheta], atol=1e-9)
        assert np.allclose(H @ theta, theta)


def test_dexp_matrix_small_angle_series_against_mpmath(K):
    mpmath.mp.dps = 40
    rng = np.random.default_rng(34)
    for mag in (1e-12, 1e-6, 0.0099999, 0.0100001, 0.05):
        theta = rng.normal(size=3)
        theta *= mag / np.linalg.norm(theta)
        t = [mpmath.mpf(float(x)) for x in theta]
        n = mpmath.sqrt(sum(x * x for x in t))
        a, b = mpmath.sin(n) / n, (1 - mpmath.cos(n)) / n ** 2
        c = (1 - a) / n ** 2
        th = hat(t)
        ref = np.array([[float(a * (i == j) + b * th[i][j] + c * t[i] * t[j]) for j in range(3)]
                        for i in range(3)])
        assert np.allclose(K.dexp_matrix(theta), ref, rtol=0, atol=4e-16)  # a few ulp of 1


# -------------------------------------------------------------------- Euler map, paper 002


def test_euler_map_stacks_columns_of_R_002_eq47(K):
    rng = np.random.default_rng(40)
    p = rand_quat(rng, unit=False)
    assert np.allclose(K.euler_map(p), K.rotmat(p).T.ravel())


def test_euler_map_diff_matches_finite_differences_and_table_002_eq48(K):
    rng = np.random.default_rng(41)
    h = 1e-6
    for _ in range(5):
        p = rand_quat(rng, unit=False)
        D = K.euler_map_diff(p)
        fd = np.column_stack([(K.euler_map(p + h * e) - K.euler_map(p - h * e)) / (2 * h)
                              for e in I4])
        assert np.allclose(D, fd, atol=1e-8)
        p0, p1, p2, p3 = p
        table = 2 * np.array([
            [p0, p1, -p2, -p3], [p3, p2, p1, p0], [-p2, p3, -p0, p1],
            [-p3, p2, p1, -p0], [p0, -p1, p2, -p3], [p1, p0, p3, p2],
            [p2, p3, p0, p1], [-p1, -p0, p3, p2], [p0, -p1, -p2, p3]])
        assert np.allclose(D, table, atol=1e-14)


def test_euler_map_diff_pinv_lemma_5_1_eq55_eq56(K):
    rng = np.random.default_rng(42)
    for _ in range(10):
        p = rand_quat(rng, unit=False)
        n2 = p @ p
        D, Dp = K.euler_map_diff(p), K.euler_map_diff_pinv(p)
        assert np.allclose(Dp @ D, I4)
        assert np.allclose(Dp, np.linalg.pinv(D))
        assert np.allclose(D.T @ D, 4 * (2 * n2 * I4 + np.outer(p, p)))
        assert np.allclose(Dp, (0.5 * I4 - np.outer(p, p) / (6 * n2)) @ D.T / (4 * n2))


def test_radial_stretch_002_eq54_with_homogeneity_factor_two(K):
    # phi is homogeneous of degree two, so Euler's relation gives Dphi(p) p = 2 phi(p)
    # (002 (54) prints it without the factor 2), hence p = 2 Dphi(p)^+ phi(p).
    rng = np.random.default_rng(43)
    for _ in range(10):
        p = rand_quat(rng, unit=False)
        phi = K.euler_map(p)
        assert np.allclose(K.euler_map_diff(p) @ p, 2 * phi)
        assert np.allclose(2 * K.euler_map_diff_pinv(p) @ phi, p)
        assert np.allclose(K.euler_map(3.0 * p), 9.0 * phi)


def test_nullspace_matrix_002_eq41(K):
    rng = np.random.default_rng(44)
    for _ in range(10):
        p, Om = rand_quat(rng, unit=False), rng.normal(size=3)
        T = K.nullspace_matrix(p)
        assert np.allclose(T, 0.5 * K.Gmat(p).T)
        assert np.allclose(p @ T, 0, atol=1e-14)
        assert np.allclose(T.T @ T, 0.25 * (p @ p) * I3)
        assert np.allclose(T @ Om, 0.5 * K.quat_mul(p, np.r_[0.0, Om]))
        # 002 (53): the Euler differential carries T_p(p) Omega to the director rates R hat(Omega)
        Rdot = K.rotmat(p) @ hat(Om)
        assert np.allclose(K.euler_map_diff(p) @ T @ Om, Rdot.T.ravel())
        assert np.allclose(K.euler_map_diff_pinv(p) @ Rdot.T.ravel(), T @ Om)


# --------------------------------------------------------------------- Spurrier-Klumpp


def canonical(q):
    q = q / np.linalg.norm(q)
    nz = np.flatnonzero(q)
    return -q if q[nz[0]] < 0 else q


def test_spurrier_round_trip_on_random_rotations(K):
    rng = np.random.default_rng(50)
    for _ in range(50):
        q = rand_quat(rng)
        p = K.spurrier_klumpp(K.rotmat(q))
        assert same_rotation(p, q, atol=1e-14)
        assert p[0] >= 0
        assert np.allclose(p, canonical(q), atol=1e-14)


@settings(derandomize=True, max_examples=200, deadline=None, database=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(
    lambda x: np.linalg.norm(x) > 1e-3))
def test_spurrier_round_trip_hypothesis(x):
    q = np.asarray(x) / np.linalg.norm(x)
    p = Q.from_matrix(Q.to_matrix(q))
    assert same_rotation(p, q, atol=1e-13)
    assert abs(np.linalg.norm(p) - 1) < 1e-15


@pytest.mark.parametrize("largest", ["trace", "R11", "R22", "R33"])
def test_spurrier_each_branch(K, largest):
    rng = np.random.default_rng(51)
    for _ in range(5):
        if largest == "trace":
            axis, angle = rng.normal(size=3), rng.uniform(0.0, 1.5)
        else:
            axis = 0.3 * rng.normal(size=3)
            axis[int(largest[-2]) - 1] = 1.0
            angle = rng.uniform(2.6, 3.1)
        q = axis_rot(axis / np.linalg.norm(axis), angle).as_quat()
        q = np.roll(q, 1)
        R = K.rotmat(q)
        candidates = dict(trace=np.trace(R), R11=R[0, 0], R22=R[1, 1], R33=R[2, 2])
        assert max(candidates, key=candidates.get) == largest
        assert same_rotation(K.spurrier_klumpp(R), q, atol=1e-14)


def test_spurrier_near_and_at_half_turn(K):
    rng = np.random.default_rng(52)
    for _ in range(10):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        q = np.r_[np.cos((np.pi - 1e-9) / 2), np.sin((np.pi - 1e-9) / 2) * axis]
        assert same_rotation(K.spurrier_klumpp(K.rotmat(q)), q, atol=1e-14)
    for axis in (I3[0], I3[1], I3[2], np.ones(3) / np.sqrt(3)):
        R = 2 * np.outer(axis, axis) - I3  # exactly pi about axis
        p = K.spurrier_klumpp(R)
        assert np.allclose(p, np.r_[0.0, axis], atol=1e-15)
        assert np.allclose(K.rotmat(p), R, atol=1e-15)


def test_spurrier_near_identity(K):
    rng = np.random.default_rng(53)
    for mag in (0.0, 1e-12, 1e-8):
        theta = rng.normal(size=3)
        theta *= mag / max(np.linalg.norm(theta), 1e-300)
        q = K.quat_from_rotvec(theta)
        p = K.spurrier_klumpp(K.rotmat(q))
        assert np.allclose(p, q, atol=1e-16)


def test_spurrier_projects_slightly_non_orthogonal_input(K):
    rng = np.random.default_rng(54)
    for _ in range(20):
        q = rand_quat(rng)
        R = K.rotmat(q) + 1e-6 * rng.normal(size=(3, 3))
        p = K.spurrier_klumpp(R)
        assert abs(np.linalg.norm(p) - 1) < 1e-15
        assert same_rotation(p, q, atol=3e-6)
        U, _, Vt = np.linalg.svd(R)  # nearest rotation (polar factor) as a reference
        assert np.allclose(K.rotmat(p), U @ Vt, atol=5e-6)


# ------------------------------------------------------------------------- angle sequences


def test_euler313_matches_scipy_ZXZ(K):
    rng = np.random.default_rng(60)
    for _ in range(20):
        q = rand_quat(rng)
        ang = K.quat_to_euler313(q)
        ref = scipy_rot(q).as_euler("ZXZ")
        assert 0 <= ang[1] <= np.pi
        assert np.all(angle_diff(ang, ref) < 1e-12)
        assert same_rotation(K.quat_from_euler313(*ang), q, atol=1e-14)
        psi, theta, phi = rng.uniform(-np.pi, np.pi, 3)
        assert np.allclose(K.rotmat(K.quat_from_euler313(psi, theta, phi)),
                           Rotation.from_euler("ZXZ", [psi, theta, phi]).as_matrix(), atol=1e-14)


@pytest.mark.parametrize("theta", [0.0, 1e-14, np.pi, np.pi - 1e-14])
def test_euler313_degenerate_puts_rotation_into_psi(K, theta):
    q = K.quat_from_euler313(0.7, theta, -1.1)
    psi, th, phi = K.quat_to_euler313(q)
    assert phi == 0.0 and 0 <= th <= np.pi
    assert abs(th - theta) < 1e-13
    assert np.allclose(K.rotmat(K.quat_from_euler313(psi, th, phi)), K.rotmat(q), atol=1e-13)


def test_bryant123_matches_scipy_XYZ(K):
    rng = np.random.default_rng(61)
    for _ in range(20):
        q = rand_quat(rng)
        ang = K.quat_to_bryant123(q)
        ref = scipy_rot(q).as_euler("XYZ")
        assert -np.pi / 2 <= ang[1] <= np.pi / 2
        assert np.all(angle_diff(ang, ref) < 1e-12)
        assert same_rotation(K.quat_from_bryant123(*ang), q, atol=1e-14)
        a = rng.uniform(-np.pi, np.pi, 3)
        assert np.allclose(K.rotmat(K.quat_from_bryant123(*a)),
                           Rotation.from_euler("XYZ", a).as_matrix(), atol=1e-14)
        assert np.allclose(K.rotmat(K.quat_from_bryant123(*a)),
                           axis_rot(I3[0], a[0]).as_matrix() @ axis_rot(I3[1], a[1]).as_matrix()
                           @ axis_rot(I3[2], a[2]).as_matrix(), atol=1e-14)


@pytest.mark.parametrize("a2", [np.pi / 2, -np.pi / 2, np.pi / 2 - 1e-14])
def test_bryant123_gimbal_lock(K, a2):
    q = K.quat_from_bryant123(0.4, a2, 1.3)
    a = K.quat_to_bryant123(q)
    assert a[2] == 0.0
    assert abs(a[1] - a2) < 1e-15
    assert np.allclose(K.rotmat(K.quat_from_bryant123(*a)), K.rotmat(q), atol=1e-13)


# --------------------------------------------------------------------------------- slerp


def test_slerp_endpoints_midpoint_and_geodesic(K):
    rng = np.random.default_rng(70)
    for _ in range(10):
        a, b = rand_quat(rng), rand_quat(rng)
        if a @ b < 0:
            b = -b
        assert np.allclose(K.quat_slerp(a, b, 0.0), a)
        assert np.allclose(K.quat_slerp(a, b, 1.0), b)
        rel = K.quat_mul(K.quat_conj(a), b)
        for t in (0.25, 0.5, 0.9):
            ref = K.quat_mul(a, K.quat_exp(t * K.quat_log(rel)))
            assert np.allclose(K.quat_slerp(a, b, t), ref)
        m = K.quat_slerp(a, b, 0.5)
        full = np.arccos(np.clip(a @ b, -1, 1))
        assert np.isclose(np.arccos(np.clip(a @ m, -1, 1)), full / 2)
        assert np.isclose(np.arccos(np.clip(m @ b, -1, 1)), full / 2)


def test_slerp_takes_the_shorter_arc(K):
    rng = np.random.default_rng(71)
    a, b = rand_quat(rng), rand_quat(rng)
    for t in (0.0, 0.3, 1.0):
        assert np.allclose(K.quat_slerp(a, b, t), K.quat_slerp(a, -b, t))
    m = K.quat_slerp(a, b, 0.5)
    assert m @ a > 0
    half = np.arccos(abs(a @ b)) / 2
    assert np.isclose(np.arccos(np.clip(a @ m, -1, 1)), half)


def test_slerp_nearly_parallel_falls_back_to_unit_lerp(K):
    rng = np.random.default_rng(72)
    a = rand_quat(rng)
    b = K.quat_normalize(a + 1e-10 * rng.normal(size=4))
    for t in (0.0, 0.5, 1.0):
        m = K.quat_slerp(a, b, t)
        assert abs(np.linalg.norm(m) - 1) < 1e-15
        assert np.allclose(m, (1 - t) * a + t * b, atol=1e-15)
    assert np.allclose(K.quat_slerp(a, a, 0.3), a, atol=1e-16)


# ---------------------------------------------------------------------- non-finite input

NAN4 = np.full(4, np.nan)
NAN3 = np.full(3, np.nan)
NAN_CALLS = {
    "quat_mul": (NAN4, np.ones(4)), "quat_conj": (NAN4,), "quat_normalize": (NAN4,),
    "quat_tangent": (NAN4, np.ones(4)), "skew": (NAN3,), "Emat": (NAN4,), "Gmat": (NAN4,),
    "Qleft": (NAN4,), "Qright": (NAN4,), "plus4": (NAN3,), "minus4": (NAN3,),
    "rotmat": (NAN4,), "rotate": (NAN4, np.ones(3)), "rotate_inv": (np.ones(4), NAN3),
    "quat_exp": (NAN3,), "quat_log": (NAN4,), "quat_from_rotvec": (NAN3,),
    "quat_to_rotvec": (NAN4,), "dexp_matrix": (NAN3,), "euler_map": (NAN4,),
    "euler_map_diff": (NAN4,), "euler_map_diff_pinv": (NAN4,), "nullspace_matrix": (NAN4,),
    "spurrier_klumpp": (np.full((3, 3), np.nan),),
    "quat_from_euler313": (np.nan, 0.1, 0.2), "quat_to_euler313": (NAN4,),
    "quat_from_bryant123": (0.1, np.nan, 0.2), "quat_to_bryant123": (NAN4,),
    "quat_slerp": (NAN4, np.ones(4) / 2, 0.5),
}


@pytest.mark.parametrize("name", sorted(NAN_CALLS))
def test_nan_input_gives_nan_output_without_raising(K, name):
    assert sorted(NAN_CALLS) == sorted(OUT_SHAPES)
    with np.errstate(all="ignore"):
        out = getattr(K, name)(*NAN_CALLS[name])
    assert np.isnan(out).any()


def test_degenerate_and_infinite_inputs_are_documented_behaviour(K):
    with np.errstate(all="ignore"):
        assert np.isnan(K.quat_normalize(np.zeros(4))).all()
        assert np.isnan(K.quat_log(np.zeros(4))).all()
        assert np.isnan(K.quat_exp(np.array([np.inf, 0.0, 0.0]))).any()
        assert np.isnan(K.spurrier_klumpp(np.full((3, 3), np.inf))).any()
        assert not np.isfinite(K.quat_normalize(np.array([np.inf, 1.0, 0.0, 0.0]))).all()
        # angle extraction only looks at directions, so an infinite scalar part reads as identity
        assert np.array_equal(K.quat_to_euler313(np.array([np.inf, 0.0, 0.0, 0.0])), np.zeros(3))


# ------------------------------------------------------------------ allocating wrappers


def test_python_wrappers_accept_lists_and_agree_with_kernels():
    q = [0.5, 0.5, -0.5, 0.5]
    assert np.allclose(Q.mul(q, Q.conj(q)), [1, 0, 0, 0])
    assert np.allclose(Q.normalize([2.0, 0, 0, 0]), [1, 0, 0, 0])
    assert np.allclose(Q.from_matrix(Q.to_matrix(q)), q)
    assert np.allclose(Q.from_rotvec(Q.to_rotvec(q)), q)
    assert np.allclose(Q.from_euler313(*Q.to_euler313(q)), q)
    assert np.allclose(Q.from_bryant123(*Q.to_bryant123(q)), q)
    assert np.allclose(Q.slerp([1, 0, 0, 0], q, 1.0), q)
    assert np.allclose(Q.to_matrix(q), scipy_rot(np.asarray(q)).as_matrix())
    assert np.allclose(scipy_quat(scipy_rot(np.asarray(q))), q)
