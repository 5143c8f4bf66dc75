"""Model builders and helpers that tests in more than one file use (and the ones the
subprocess probes of test_energy_momentum4 and test_batch_loops import).

Each was moved here verbatim from the test file named above it, so every test builds exactly
the models it built before.  A name that was private there lost its leading underscore; five
were renamed to be unambiguous here: test_multibody's mixed tree is :func:`tree_of_kinds`
(other files have a ``mixed_tree`` of their own), test_tree_contact's random chain is
:func:`random_contact_chain` (beside test_multibody_em's :func:`random_chain`), test_limits'
arm is :func:`limited_link` (test_batch has an ``arm`` and a ``limited_arm``), and
test_batch_contact's rows and feedback are :func:`sim_rows` and :func:`batch_feedback`.
"""
import numba
import numpy as np

import rtrigid as rt
import rtrigid.maths.quat as rq
from rtrigid import scenarios
from rtrigid.backends.tree import energy_momentum as multibody_em
from rtrigid.backends.tree.kinematics import I_KIND, I_VOFF, NV
from rtrigid.maths import quat
from rtrigid.model import Model


# from tests/kernels/test_integrators.py
def random_unit_quaternion(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def spring_model(pivoted, rest_length):
    """One body with gravity, a spring to a world anchor, optionally pivoted."""
    m = Model(gravity=(0.3, -0.2, -9.81))
    m.add_body("b", 2.0, (0.3, 0.4, 0.5))
    if pivoted:
        m.attach_to_world("b", point_body=(0.1, -0.2, -0.5), point_world=(0.0, 0.1, 0.0))
    m.add_spring("b", point_body=(0.2, 0.1, 0.3), anchor_world=(1.0, 0.5, 0.8),
                 stiffness=40.0, rest_length=rest_length)
    return m


# from tests/kernels/test_multibody.py
def tree_of_kinds(kinds, seed=0):
    """A free root with a branch of the given joint kinds, random anchors and axes."""
    rng = np.random.default_rng(seed)
    m = Model()
    m.add_body("root", 2.0, (0.3, 0.4, 0.5))
    parent = 0
    for i, kind in enumerate(kinds):
        b = m.add_body(f"b{i}", 1.0 + i, (0.2, 0.25, 0.3))
        axis = {}
        if kind in ("revolute", "prismatic", "cylindrical", "planar"):
            axis = {"axis_parent": rng.normal(size=3), "axis_child": rng.normal(size=3)}
        elif kind == "universal":  # two perpendicular axes
            up, uc = rng.normal(size=3), rng.normal(size=3)
            axis = {"axis_parent": up, "axis_child": uc - (uc @ up) / (up @ up) * up}
        m.add_joint(kind, parent, b, anchor_parent=rng.normal(size=3),
                    anchor_child=rng.normal(size=3), **axis)
        parent = b if i % 2 == 0 else 0  # a branching tree
    return m


def randomize_joints(sim, rng):
    """Random coordinates and rates for every joint (quaternions normalised by the setter)."""
    for name in sim.joint_names:
        n = len(sim.joint_position(name))
        if n:
            sim.set_joint_position(name, rng.normal(size=n))
        n = len(sim.joint_velocity(name))
        if n:
            sim.set_joint_velocity(name, rng.normal(size=n))


# from tests/api/test_generalized.py
def single_bodies():
    """A free body and a pivoted top: the bodies backend."""
    m = Model()
    m.add_body("free", 2.0, (0.3, 0.4, 0.5))
    m.add_body("top", 1.0, (0.02, 0.02, 0.01))
    m.attach_to_world("top", (0.0, 0.0, -0.1), (1.0, 0.0, 0.0))
    return m


# from tests/api/test_dynamics.py
def _inertia(rng, mass):
    """Principal moments of a random box (the triangle inequality holds)."""
    a = rng.uniform(0.05, 0.5, 3) ** 2
    return mass / 3.0 * np.array([a[1] + a[2], a[0] + a[2], a[0] + a[1]])


def random_tree(seed, n=7, kinds=("revolute", "prismatic"), free_root=False):
    """n bodies with random masses, inertias, anchors, axes and parents (several roots),
    joint springs and dampers; with ``free_root`` body 0 has no joint (a free body)."""
    rng = np.random.default_rng(seed)
    m = Model(gravity=rng.normal(size=3) * 5.0)
    for i in range(n):
        mass = rng.uniform(0.5, 3.0)
        m.add_body(f"b{i}", mass, _inertia(rng, mass))
    for i in range(1 if free_root else 0, n):
        parent = int(rng.integers(0, i)) if i > 0 and rng.uniform() > 0.2 else None
        kind = kinds[int(rng.integers(len(kinds)))]
        extra = {}
        if kind in ("revolute", "prismatic"):
            extra = dict(axis_parent=rng.normal(size=3), axis_child=rng.normal(size=3),
                         stiffness=rng.uniform(0.0, 5.0), rest=rng.normal(),
                         damping=rng.uniform(0.0, 1.0))
        m.add_joint(kind, parent, i, anchor_parent=0.5 * rng.normal(size=3),
                    anchor_child=0.5 * rng.normal(size=3), **extra)
    return m


def random_state(sim, rng):
    sim.set_qpos(rng.normal(size=sim.nq))
    sim.set_qvel(2.0 * rng.normal(size=sim.nv))


def random_sim(seed, kinds, free_root, state_seed):
    """(simulation of random_tree(seed, ...) in a random state, the generator that made it)."""
    sim = rt.Simulation(random_tree(seed, kinds=kinds, free_root=free_root), "nullspace_rk4",
                        1e-3)
    rng = np.random.default_rng(state_seed)
    random_state(sim, rng)
    return sim, rng


MUJOCO_CASES = [(seed, kinds, free) for seed in range(4)
                for kinds, free in ((("revolute", "prismatic"), False),
                                    (("revolute", "prismatic", "spherical", "fixed"), True))]


# from tests/api/test_actuators.py
def chain(n, kind="motor", axis=(1.0, 0.0, 0.0), joint="revolute", **actuator):
    """n links of 0.5 m hanging from the world origin, one actuator per joint."""
    m = rt.Model()
    for i in range(n):
        m.add_body(f"l{i}", 1.0 - 0.1 * i, (0.03, 0.03, 0.004))
        j = m.add_joint(joint, None if i == 0 else i - 1, i, axis_parent=axis,
                        anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.0, 0.0, -0.25),
                        anchor_child=(0.0, 0.0, 0.25))
        m.add_actuator(j, kind, name=f"a{i}", **actuator)
    return m


# from tests/api/test_limits.py
def limited_link(limits=(-0.5, 0.5), restitution=0.0, kind="revolute"):
    """A 1 kg link hanging from a world hinge about x, its centre 0.3 m below the hinge."""
    m = rt.Model()
    m.add_body("link", 1.0, (0.02, 0.02, 0.01))
    axis = (1, 0, 0) if kind == "revolute" else (0, 0, 1)
    j = m.add_joint(kind, None, "link", anchor_child=(0, 0, 0.3), axis_parent=axis,
                    limits=limits, limit_restitution=restitution)
    return m, j


# from tests/kernels/test_multibody_em.py
def newton_error(sim, mu, seed=0, eps=1e-5):
    """max |M^-1 (h/2) J d - d| / |d| over random d: M the solver's Newton matrix at mu, J d
    the directional derivative of the residual by a fourth-order central difference."""
    nv, h = sim.backend.tree.nv, sim.dt
    rng = np.random.default_rng(seed)
    res, sol, zero = np.zeros(nv), np.zeros(nv), np.zeros(nv)
    worst = 0.0
    for _ in range(3):
        d = rng.normal(size=nv) * np.abs(mu).max()
        r = []
        for e in (eps, -eps, 2 * eps, -2 * eps):
            assert multibody_em.newton_probe(h, sim.backend.F, sim.backend.I, mu + e * d, zero, res, sol)
            r.append(res.copy())
        jd = (8.0 * (r[0] - r[1]) - (r[2] - r[3])) / (12.0 * eps)
        assert multibody_em.newton_probe(h, sim.backend.F, sim.backend.I, mu, 0.5 * h * jd, res, sol)
        worst = max(worst, np.abs(sol - d).max() / np.abs(d).max())
    return worst


def stored_rates(sim, b):
    """The rates the kernel stored for body b's inbound joint (the mean rates of the last
    step under the energy-momentum schemes: what seeds their predictor)."""
    ti = sim.backend.tree.ti
    o = int(ti[b, I_VOFF])
    return sim.backend.nu[o:o + int(NV[ti[b, I_KIND]])]


def random_chain(seed, dt, integrator="energy_momentum", motors=False, **options):
    """A seeded random open chain of 4-8 slender links hanging from near the origin: spherical
    and revolute joints (random axes) with random anchor offsets, gravity, and a lively start
    (joint angles ~0.5 rad, rates ~1.5 rad/s).  With ``motors`` every revolute joint gets a
    motor (controls 0 until set); ``options`` go to the Simulation."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 9))
    m = Model()
    prev_len = 0.0
    for i in range(n):
        length, radius = rng.uniform(0.3, 0.8), rng.uniform(0.01, 0.04)
        mass = rng.uniform(0.5, 2.0)
        m.add_body(f"l{i}", mass, rt.scenarios.rod_inertia(mass, length, radius))
        kind = "spherical" if rng.random() < 0.5 else "revolute"
        axis = {}
        if kind == "revolute":
            axis = {"axis_parent": rng.normal(size=3), "axis_child": rng.normal(size=3)}
        off = rng.normal(scale=0.05, size=3)
        anchor_parent = (rng.normal(scale=0.1, size=3) if i == 0 else
                         np.array([0.0, 0.0, -0.5 * prev_len]) + rng.normal(scale=0.05, size=3))
        j = m.add_joint(kind, None if i == 0 else i - 1, i, anchor_parent=anchor_parent,
                        anchor_child=np.array([0.0, 0.0, 0.5 * length]) + off, **axis)
        if motors and kind == "revolute":
            m.add_actuator(j, "motor")
        prev_len = length
    sim = rt.Simulation(m, integrator, dt, **options)
    for name in sim.joint_names:
        k = len(sim.joint_position(name))
        if k == 4:
            sim.set_joint_position(name, quat.from_rotvec(rng.normal(scale=0.5, size=3)))
        elif k:
            sim.set_joint_position(name, rng.normal(scale=0.5, size=k))
        sim.set_joint_velocity(name, rng.normal(scale=1.5, size=len(sim.joint_velocity(name))))
    return sim


# from tests/kernels/test_energy_momentum4.py
def lively(integrator, dt, n=3, seed=0):
    """The chain of ``rtrigid bench``: links tilted ~0.5 rad, ~1 rad/s (as ``lively_chain``)."""
    rng = np.random.default_rng(seed)
    q0 = [rq.from_rotvec(rng.normal(scale=0.5, size=3)) for _ in range(n)]
    return scenarios.build("chain", integrator=integrator, dt=dt, n=n, q0=q0,
                           omega0=rng.normal(size=(n, 3)))


# from tests/contact/test_contact.py
def random_drop(rng, integrator, spin=False):
    kind = ("sphere", "capsule", "box", "cylinder", "cone")[rng.integers(5)]
    r, hl, mass = rng.uniform(0.03, 0.2), rng.uniform(0.02, 0.2), rng.uniform(0.1, 5.0)
    params = {"sphere": {"radius": r}, "capsule": {"radius": r, "half_length": hl},
              "box": {"half_extents": rng.uniform(0.02, 0.2, 3)},
              "cylinder": {"radius": r, "half_length": hl},
              "cone": {"radius": r, "height": 2 * hl}}[kind]
    inertia = np.sort(mass * rng.uniform(0.005, 0.01, 3))
    inertia[2] = min(inertia[2], inertia[0] + inertia[1])
    m = rt.Model()
    height = rng.uniform(-1, 1)
    m.add_ground(height=height, friction=rng.uniform(0, 1))
    spin_friction = {}
    if spin:  # torsional and rolling friction up to a tenth of the shape's size
        spin_friction = {"torsional_friction": rng.uniform(0, 0.1 * r),
                         "rolling_friction": rng.uniform(0, 0.1 * r)}
    m.add_body("b", mass, inertia, shape=(kind, params), friction=rng.uniform(0, 1.5),
               **spin_friction)
    sim = rt.Simulation(m, integrator, float(rng.choice([1 / 60, 1 / 240, 1e-3])))
    sim.set_position("b", (0, 0, height + rng.uniform(0.3, 1.0)))
    sim.set_orientation("b", rng.normal(size=4))
    sim.set_velocity("b", rng.normal(size=3))
    sim.set_angular_velocity("b", 10 * rng.normal(size=3))
    return sim


# from tests/contact/test_tree_contact.py
G = 9.81


def random_contact_chain(rng):
    """A floating chain of 2-3 random shapes joined by random hinges or ball joints."""
    m = rt.Model(gravity=(0.0, 0.0, -G))
    m.add_ground(friction=float(rng.uniform(0.1, 1.0)))
    n = int(rng.integers(2, 4))
    parent = None
    for i in range(n):
        kind = rng.choice(["sphere", "capsule", "box"])
        size = rng.uniform(0.03, 0.1, 3)
        shape = {"sphere": ("sphere", {"radius": size[0]}),
                 "capsule": ("capsule", {"radius": size[0], "half_length": size[1]}),
                 "box": ("box", {"half_extents": size})}[kind]
        mass = float(rng.uniform(0.2, 2.0))
        name = f"b{i}"
        m.add_body(name, mass, mass * rng.uniform(0.003, 0.006, 3), shape=shape)
        if parent is not None:
            kind = str(rng.choice(["revolute", "spherical"]))
            axis = tuple(rng.normal(size=3)) if kind == "revolute" else None
            m.add_joint(kind, parent, name, anchor_parent=(0.0, 0.0, -0.12),
                        anchor_child=(0.0, 0.0, 0.12), axis_parent=axis)
        parent = name
    return m


# from tests/contact/test_batch_contact.py
def sim_rows(sim):
    """A Simulation's rows as a batch holds them: its buffers, then its contact arrays."""
    return sim._kernel.rows(sim.backend.F, sim.backend.I)[1:]


def with_threads(threads, f):
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        return f()
    finally:
        numba.set_num_threads(old)


def assert_batch_is_singles(model, body, starts, steps, dt):
    """Copies of ``model()`` whose ``body`` starts at each of ``starts``, stepped ``steps``
    times in a Batch under nullspace_rk4 (one thread, then two: each copy its own scratch),
    are their single simulations bit for bit, each with contacts at the end."""
    batches = []
    for threads in (1, 2):
        batch = rt.Batch(rt.Simulation(model(), "nullspace_rk4", dt), n=len(starts))
        q = batch.qpos()
        for i, p in enumerate(starts):
            q[i, :3] = p
        batch.set_qpos(q)
        with_threads(threads, lambda: batch.step(steps))
        batches.append(batch)
    for i, p in enumerate(starts):
        s = rt.Simulation(model(), "nullspace_rk4", dt)
        s.set_position(body, p)
        s.step(steps)
        assert s.contacts()
        F, I = sim_rows(s)
        for batch in batches:
            np.testing.assert_array_equal(batch.F[i], F)
            np.testing.assert_array_equal(batch.I[i], I)


def batch_feedback(s, K, u0):
    """The batch's feedback u = u0 - K (x - 0) on Simulation s's x = (qpos, qvel), summed in
    the batch's order (bit for bit)."""
    x = np.concatenate([s.qpos(), s.qvel()])
    u = u0.copy()
    for j in range(len(x)):
        u -= K[:, j] * (x[j] - 0.0)
    return u


# from tests/loops/test_batch_loops.py
DT = 1.0 / 240.0


# energy_momentum4's loop step fails pushed onto a loop joint's limit (its Newton solve, with
# and without the sub-steps, as the numpy solve before it did): its copies are not limited
LIMITED = {"nullspace_rk4": True, "energy_momentum": True, "energy_momentum4": False}


def four_bar(i, omega=None, integrator="nullspace_rk4"):
    """Copy i: the four-bar scenario from crank angle 0.5 + 0.2 i turning at i rad/s (or
    ``omega``), a motor ``drive`` on the crank, the crank's upper limit at 1 + 0.3 i rad
    (if the scheme holds loops on limits, :data:`LIMITED`)."""
    m = scenarios.build("four_bar", theta0=0.5 + 0.2 * i).model
    if LIMITED[integrator]:
        m.joints[0].limits = (-np.inf, 1.0 + 0.3 * i)
    m.add_actuator("crank", "motor", name="drive")
    s = rt.Simulation(m, integrator, DT)
    s.set_joint_velocity("crank", [float(i) if omega is None else omega])
    return s


def without_compile_notice(err):
    """stderr without the line that says numba is compiling: it comes before whichever command
    first compiles a kernel in its process (a cold cache), not from the command's outcome."""
    return "".join(line for line in err.splitlines(True)
                   if not line.startswith("rtrigid: compiling numba kernels"))
