"""MJCF through MuJoCo's compiler: public models move as MuJoCo moves them, and the load
report, options, geoms and refusals say what the file holds."""
import glob
import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest

import rtrigid as rt
from rtrigid import cli
from rtrigid.maths import quat

mujoco = pytest.importorskip("mujoco")
HINGE, SLIDE = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)


@pytest.fixture(autouse=True)
def _models(require):
    """gymnasium's and pybullet_data's model files (the dev extra installs both)."""
    require("gymnasium", "pybullet")


def _gymnasium_assets():
    spec = importlib.util.find_spec("gymnasium")  # found, not imported: only its files
    return os.path.join(spec.submodule_search_locations[0], "envs", "mujoco", "assets")


def _pybullet_mjcf():
    pybullet_data = pytest.importorskip("pybullet_data")
    return os.path.join(pybullet_data.getDataPath(), "mjcf")


def _quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.load_model(path, **kw)


def _random_twins(path, seed, integrator="nullspace_rk4", mj_integrator="RK4"):
    """MuJoCo and rtrigid on one file, contacts, joint limits and fluid forces off on both
    sides, every hinge and slide at a random coordinate within its range and a random rate."""
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{mj_integrator.upper()}")
    off = mujoco.mjtDisableBit
    m.opt.disableflags |= off.mjDSBL_CONTACT | off.mjDSBL_LIMIT
    m.opt.viscosity = m.opt.density = 0.0  # swimmer's fluid: reported ignored by rtrigid
    d = mujoco.MjData(m)
    sim = rt.Simulation(_quiet(path, collision=False, limits=False), integrator,
                        dt=m.opt.timestep)
    rng = np.random.default_rng(seed)
    names = []
    for j in range(m.njnt):
        if m.jnt_type[j] not in (HINGE, SLIDE):
            continue
        q0 = m.qpos0[m.jnt_qposadr[j]]
        lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (q0 - 0.5, q0 + 0.5)
        q, v = rng.uniform(lo, hi), rng.uniform(-1.0, 1.0)
        d.qpos[m.jnt_qposadr[j]], d.qvel[m.jnt_dofadr[j]] = q, v
        name = m.joint(j).name
        sim.set_joint_position(name, [q])
        sim.set_joint_velocity(name, [v])
        names.append(name)
    return sim, m, d, names


def _errors(sim, m, d, names):
    """(largest joint coordinate error, largest body origin error) against MuJoCo."""
    mujoco.mj_kinematics(m, d)
    ej = max(abs(d.qpos[m.jnt_qposadr[m.joint(n).id]] - sim.joint_position(n)[0])
             for n in names)
    ex = max(np.linalg.norm(sim.link_pose(m.body(i).name or f"body{i}")[0] - d.xpos[i])
             for i in range(1, m.nbody))  # unnamed bodies: named body<id>
    return ej, ex


GYM = ["ant", "half_cheetah", "hopper", "walker2d", "humanoid", "reacher", "pusher", "swimmer"]


@pytest.mark.parametrize("name", GYM)
def test_gymnasium_models_move_as_mujoco_moves_them(name):
    """0.2 s at the file's step, RK4 on both sides, zero controls: armature, damping,
    springs, refs and the free and multi-joint bodies included, joints within 1e-6."""
    path = os.path.join(_gymnasium_assets(), name + ".xml")
    _assert_moves_as_mujoco(*_random_twins(path, seed=7), 1e-6)


def test_the_ants_rotors_and_dampers_move_as_mujocos_under_energy_momentum():
    """energy_momentum steps the ant's armature (rotor inertia 1 on every leg joint, as heavy
    as the legs) and dampers: 0.2 s at the file's step (0.01 s) against MuJoCo's RK4, joints
    and bodies within 1e-5 (the scheme is of order 2; ~1e-6 here)."""
    path = os.path.join(_gymnasium_assets(), "ant.xml")
    sim, m, d, names = _random_twins(path, seed=7, integrator="energy_momentum")
    assert min(m.dof_armature[6:]) == 1.0 and min(m.dof_damping[6:]) == 1.0
    _assert_moves_as_mujoco(sim, m, d, names, 1e-5)


@pytest.mark.parametrize("name", GYM)
def test_gymnasium_models_move_as_mujoco_moves_them_under_energy_momentum4(name):
    """The order-4 conserving scheme on every model, the multi-joint bodies' massless links
    included: 0.2 s against MuJoCo's RK4 at the file's step, joints and bodies within 1e-6
    (measured 3.8e-7 on the humanoid, below 1e-7 elsewhere).  half_cheetah's stiff joint
    springs (k = 240 against armature 0.1 at 0.01 s) are taken at a quarter of its step on
    both sides, where both fourth-order schemes are that close (3.5e-5 at its step, 3.1e-6
    at half of it)."""
    path = os.path.join(_gymnasium_assets(), name + ".xml")
    sim, m, d, names = _random_twins(path, seed=7, integrator="energy_momentum4")
    if name == "half_cheetah":
        m.opt.timestep *= 0.25
        sim = _retimed(sim, names, m.opt.timestep)
    _assert_moves_as_mujoco(sim, m, d, names, 1e-6)


def _assert_moves_as_mujoco(sim, m, d, names, tol):
    """0.2 s on both sides at MuJoCo's step: joints and body origins within ``tol``, and
    the model moved."""
    n = int(round(0.2 / m.opt.timestep))
    start = d.qpos.copy()
    mujoco.mj_step(m, d, nstep=n)
    sim.step(n)
    ej, ex = _errors(sim, m, d, names)
    assert ej <= tol and ex <= tol, (ej, ex)
    assert np.max(np.abs(d.qpos - start)) > 1e-2  # it moved


def test_energy_momentum_converges_at_order_2_on_the_humanoid():
    """The humanoid's hips and abdomen are file bodies of two and three hinges (massless links
    between them): energy_momentum's error against MuJoCo's RK4 (at an eighth of the step)
    falls by 4 when the step halves (measured 6.98e-6 and 1.75e-6, ratio 4.0003)."""
    path = os.path.join(_gymnasium_assets(), "humanoid.xml")
    errors = []
    for k in (1, 2):
        sim, m, d, names = _random_twins(path, seed=7, integrator="energy_momentum")
        dt, n = m.opt.timestep, int(round(0.2 / m.opt.timestep))
        sim = _retimed(sim, names, dt / k)
        m.opt.timestep = dt / 8
        mujoco.mj_step(m, d, nstep=8 * n)
        sim.step(k * n)
        errors.append(_errors(sim, m, d, names)[0])
    assert 3.5 < errors[0] / errors[1] < 4.5, errors


def test_the_humanoid_balances_its_energy_under_energy_momentum():
    """Its rotors, springs, dampers and massless links under energy_momentum: over 0.5 s the
    energy changes by the dampers' discrete dissipation, sum d (c1 - c0)² / h (21 J of 462
    here), to 1e-11 of the energy (measured 9.2e-14)."""
    path = os.path.join(_gymnasium_assets(), "humanoid.xml")
    sim, m, d, names = _random_twins(path, seed=3, integrator="energy_momentum")
    damping = np.array([sim.model.joints[sim.model.joint_index(n)].damping for n in names])
    assert damping.max() > 0.0 and any(b.mass == 0.0 for b in sim.model.bodies)
    e0, dissipated, h = sim.energy(), 0.0, sim.dt
    c0 = np.array([sim.joint_position(n)[0] for n in names])
    for _ in range(round(0.5 / h)):
        sim.step(1)
        c1 = np.array([sim.joint_position(n)[0] for n in names])
        dissipated += np.sum(damping * (c1 - c0) ** 2) / h
        c0 = c1
    assert dissipated > 1.0
    assert abs(sim.energy() - e0 + dissipated) < 1e-11 * abs(e0)


def _retimed(sim, names, dt):
    """The simulation ``sim`` at another step, from its joints' coordinates and rates."""
    other = rt.Simulation(sim.model, sim.integrator, dt=dt)
    for n in names:
        other.set_joint_position(n, sim.joint_position(n))
        other.set_joint_velocity(n, sim.joint_velocity(n))
    return other


def test_the_ant_thrown_on_its_floor_never_gains_energy_under_energy_momentum():
    """Rotors (armature 1 on every leg joint), dampers, limits and contacts with the floor:
    thrown with random rates, the ant's energy (its rotors' a r²/2 included) never grows from
    one step to the next, and most of it is spent after 3 s."""
    model = _quiet(os.path.join(_gymnasium_assets(), "ant.xml"), floating_base=True)
    sim = rt.Simulation(model, "energy_momentum", dt=0.01)
    sim.set_qvel(np.random.default_rng(1).normal(size=sim.nv))
    e0 = sim.energy()
    assert _steps_never_gaining_energy(sim, 300) < 0.5 * e0
    assert sim.link_pose("torso")[0][2] > 0.2


def _steps_never_gaining_energy(sim, n):
    """n steps, the energy never growing from one to the next by more than 1e-12 of its
    start; returns the energy at the end."""
    e = e0 = sim.energy()
    for _ in range(n):
        sim.step(1)
        e1 = sim.energy()
        assert e1 <= e + 1e-12 * abs(e0)
        e = e1
    return e


def test_the_humanoid_dropped_on_its_floor_never_gains_energy_under_energy_momentum():
    """Massless links (its hips' and abdomen's file bodies carry two and three hinges),
    rotors, springs, dampers and contacts: falling from the file's pose at its 3 ms step, the
    humanoid's energy never grows from one step to the next (largest rise measured 7.8e-12 J
    of 391), and it comes to lie on the floor, its torso's capsule (radius 0.07) touching."""
    model = _quiet(os.path.join(_gymnasium_assets(), "humanoid.xml"))
    sim = rt.Simulation(model, "energy_momentum", dt=model.timestep)
    e0 = sim.energy()
    assert _steps_never_gaining_energy(sim, 1000) < 0.1 * e0
    assert abs(sim.link_pose("torso")[0][2] - 0.07) < 2e-3
    assert sim.solver_stats()["fallback_steps"] == 0


def test_the_half_cheetah_on_its_floor_never_gains_energy_under_energy_momentum():
    """Its stiff joint springs (k up to 240) under the contacts' position correction: the
    correction's lift pays for the springs' energy as for gravity's (it gained up to 6e-3 J a
    step of 76 J when it counted gravity's alone)."""
    model = _quiet(os.path.join(_gymnasium_assets(), "half_cheetah.xml"))
    assert max(j.stiffness for j in model.joints) == 240.0
    sim = rt.Simulation(model, "energy_momentum", dt=model.timestep)
    e0 = sim.energy()
    assert _steps_never_gaining_energy(sim, 200) < e0
    assert len(sim.contacts()) > 0


@pytest.mark.parametrize("integrator", ["energy_momentum", "semi_implicit_euler"])
def test_the_contacts_position_correction_keeps_the_joints_within_their_limits(integrator):
    """The humanoid falls onto its floor from the file's pose: the lift that takes the
    contacts' depths out moves the joints too, and has the limits among its rows, so no
    joint ends a step past a limit (when it knew the contacts' rows alone, it pushed the
    right elbow up to 0.063 rad past its stop under semi_implicit_euler, 3.5e-3 rad under
    energy_momentum, the next step putting it back)."""
    model = _quiet(os.path.join(_gymnasium_assets(), "humanoid.xml"))
    limited = [j for j in model.joints if j.kind == "revolute" and np.isfinite(j.limits).all()]
    assert len(limited) == 17
    sim = rt.Simulation(model, integrator, dt=model.timestep)
    touched = 0
    for _ in range(400):
        sim.step(1)
        touched += len(sim.contacts()) > 0
        for j in limited:
            c = sim.joint_position(j.name)[0]
            assert j.limits[0] - 1e-12 <= c <= j.limits[1] + 1e-12, (sim.t, j.name, c)
    assert touched > 200


def test_the_walker_standing_on_its_knee_stops_takes_few_iterations_under_energy_momentum():
    """gymnasium's walker2d falls onto its feet and stands on its knees' upper limits, its
    weight on them: the steps take few iterations and no fallback (2.5 a step over these 2 s;
    17.4, and 22 sub-step fallbacks, when the position correction pushed the knees past
    their stops and the scheme's limit locks then cycled)."""
    model = _quiet(os.path.join(_gymnasium_assets(), "walker2d.xml"))
    sim = rt.Simulation(model, "energy_momentum", dt=model.timestep)
    sim.step(1000)
    stats = sim.solver_stats()
    assert stats["fallback_steps"] == 0 and stats["mean_iterations"] < 4.0, stats
    assert abs(sim.joint_position("leg_joint")[0]) < 1e-12  # on its stop, the upper limit 0
    assert abs(sim.joint_position("rootz")[0] - 1.21) < 0.01 and len(sim.contacts()) == 4


def test_armature_matches_mujocos_euler_under_semi_implicit_euler():
    """semi_implicit_euler takes dampers implicitly with the armature in the inertia, as
    MuJoCo's Euler does: the same steps, to round-off."""
    path = os.path.join(_gymnasium_assets(), "hopper.xml")
    sim, m, d, names = _random_twins(path, seed=3, integrator="semi_implicit_euler",
                                     mj_integrator="Euler")
    assert min(m.dof_armature[3:]) > 0.0
    mujoco.mj_step(m, d, nstep=100)
    sim.step(100)
    assert max(_errors(sim, m, d, names)) <= 1e-9


PENDULUM = """<mujoco>
  <option timestep="0.001" gravity="0 0 -3.5"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="hinge" axis="0 1 0" armature="{armature}" ref="{ref}" range="-90 90"
             springref="20" stiffness="{stiffness}"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <body name="slider" pos="0.3 0 0">
        <joint name="slide" type="slide" axis="1 0 0" ref="0.05" armature="{armature}"/>
        <geom type="box" size="0.03 0.03 0.03"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_ref_armature_and_springs_of_a_written_file(tmp_path):
    """A joint's ref: rtrigid's coordinates are MuJoCo's (limits, springref unchanged) and
    start at ref; the file's gravity and time step are read; the motion matches MuJoCo."""
    path = tmp_path / "pendulum.xml"
    path.write_text(PENDULUM.format(armature=0.02, ref=30, stiffness=0.4))
    model = rt.load_model(str(path), collision=False)
    assert model.timestep == 0.001 and np.array_equal(model.gravity, [0, 0, -3.5])
    hinge = next(j for j in model.joints if j.name == "hinge")
    assert hinge.limits == pytest.approx(np.deg2rad([-90, 90]), abs=1e-15)
    assert hinge.rest == pytest.approx(np.deg2rad(20)) and hinge.armature == 0.02
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    d = mujoco.MjData(m)
    sim = rt.Simulation(model, "nullspace_rk4", dt=m.opt.timestep)
    assert sim.joint_position("hinge")[0] == pytest.approx(np.deg2rad(30), abs=1e-15)
    assert sim.joint_position("slide")[0] == 0.05
    mujoco.mj_forward(m, d)
    for i in range(1, m.nbody):  # the same pose at the start (qpos0 = ref)
        assert np.linalg.norm(sim.link_pose(m.body(i).name)[0] - d.xpos[i]) < 1e-14
    mujoco.mj_step(m, d, nstep=300)
    sim.step(300)
    assert max(_errors(sim, m, d, ["hinge", "slide"])) <= 1e-9


def test_armature_energy_is_kinetic_and_conserved(tmp_path):
    """The armature's 1/2 a c'^2 is part of the kinetic energy: a conservative pendulum with
    armature keeps its total energy (RK4: to O(h^4)); without it the energy would jump."""
    path = tmp_path / "pendulum.xml"
    path.write_text(PENDULUM.format(armature=0.05, ref=0, stiffness=0.0))
    model = rt.load_model(str(path), collision=False, limits=False)
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)
    sim.set_joint_velocity("hinge", [2.0])
    e0 = sim.energy()
    rotor = 0.5 * 0.05 * 2.0 ** 2
    body = sim.kinetic_energy() - rotor
    assert rotor > 1e-3 * abs(e0) and body > 0.0
    sim.step(2000)
    assert abs(sim.energy() - e0) <= 1e-9 * max(1.0, abs(e0))


def test_armature_is_refused_by_the_schemes_that_do_not_step_it(tmp_path):
    path = tmp_path / "pendulum.xml"
    path.write_text(PENDULUM.format(armature=0.05, ref=0, stiffness=0.0).replace(
        "</worldbody>", '</worldbody><equality><joint joint1="slide" joint2="hinge" '
        'polycoef="0 0.1 0 0 0"/></equality>'))
    model = rt.load_model(str(path), collision=False)
    with pytest.raises(ValueError, match="energy_momentum does not step joint armature.*"
                                         "loop joints or couplings.*'hinge'.*nullspace_rk4"):
        rt.Simulation(model, "energy_momentum", dt=1e-3)
    with pytest.raises(ValueError, match="armature: only revolute and prismatic"):
        m = rt.Model()
        b = m.add_body("b", 1.0, (0.1, 0.1, 0.1))
        m.add_joint("spherical", None, b, armature=0.1)


def test_every_gymnasium_and_pybullet_mjcf_mujoco_compiles_loads():
    """Coverage: each file MuJoCo compiles loads, with a report; none silently."""
    files = sorted(glob.glob(os.path.join(_gymnasium_assets(), "*.xml")))
    files += sorted(glob.glob(os.path.join(_pybullet_mjcf(), "*.xml")))
    compiled = loaded = 0
    for path in files:
        try:
            mujoco.MjModel.from_xml_path(path)
        except ValueError:
            with pytest.raises(ValueError, match="MuJoCo cannot compile the file"):
                _quiet(path)
            continue
        compiled += 1
        model = _quiet(path)
        assert model.load_report is not None and model.load_report.path == path
        loaded += 1
    assert loaded == compiled >= 14 + 18


def test_load_report_names_file_and_line_and_warns_once_per_kind():
    path = os.path.join(_gymnasium_assets(), "humanoid.xml")
    with pytest.warns(UserWarning) as caught:
        model = rt.load_model(path)
    report = model.load_report
    with open(path) as f:
        text = f.read().splitlines()
    tendons = [e for e in report.mapped if e.what == "tendon"]  # no limit, spring, damper
    assert len(tendons) == 2
    for e in tendons:  # each entry's line holds the element
        file, line = e.where.rsplit(":", 1)
        assert file == path and "<fixed" in text[int(line) - 1]
    timestep = next(e for e in report.mapped if e.what == "option timestep")
    assert "timestep" in text[int(timestep.where.rsplit(":", 1)[1]) - 1]
    limits = [e for e in report.approximated if e.what == "joint range"]
    messages = [str(w.message) for w in caught]
    assert len(limits) == 1 and sum("joint range approximated" in msg for msg in messages) == 1
    assert sum(e.what == "actuator" for e in report.mapped) == 17
    assert "ignored (" in str(report) and "mapped (" in str(report)
    swimmer = os.path.join(_gymnasium_assets(), "swimmer.xml")
    viscosity = next(e for e in _quiet(swimmer).load_report.ignored
                     if e.what == "option viscosity")
    assert "viscosity" in open(swimmer).read().splitlines()[int(viscosity.where.rsplit(
        ":", 1)[1]) - 1]
    with pytest.raises(ValueError, match=r"swimmer.xml:\d+: option viscosity: .*strict=True"):
        _quiet(swimmer, strict=True, collision=False)


def test_timestep_is_none_and_gravity_the_default_when_the_file_gives_none(tmp_path):
    path = tmp_path / "plain.xml"
    path.write_text('\n\n  <mujoco><worldbody><body name="b"><joint name="j"/>'
                    '<geom size="0.1"/></body></worldbody></mujoco>')  # XML after blanks
    model = rt.load_model(str(path))
    assert model.timestep is None and np.array_equal(model.gravity, [0, 0, -9.81])


def test_collision_geoms_in_body_frames_where_mujoco_puts_them():
    """The collision geoms (Model.add_geom's records): each geom's frame through its body's
    pose is MuJoCo's geom pose; the floor plane is a ground."""
    path = os.path.join(_gymnasium_assets(), "ant.xml")
    model = _quiet(path, limits=False)  # the ankles start at qpos0, outside their ranges
    geoms = [g for g in model.geoms if g.source == "add_geom"]
    assert [g.kind for g in geoms].count("capsule") >= 8 and len(model.grounds) == 1
    assert model.grounds[0].height == 0.0 and model.grounds[0].friction == 1.0
    assert not model.load_report.geoms  # none left aside: every one was added
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)
    colliding = [g for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]]
    colliding = [g for g in colliding if m.geom_type[g] != mujoco.mjtGeom.mjGEOM_PLANE]
    assert len(colliding) == len(geoms)
    for g, geom in zip(colliding, geoms):
        x, q = sim.pose(geom.body)
        centre = x + quat.rotate(q, geom.pos, np.empty(3))
        assert np.linalg.norm(centre - d.geom_xpos[g]) < 1e-12
        turn = quat.quat_mul(q, geom.quat, np.empty(4))
        R = quat.rotmat(turn, np.empty((3, 3)))
        assert np.abs(R - d.geom_xmat[g].reshape(3, 3)).max() < 1e-12
        assert (geom.contype, geom.conaffinity) == (m.geom_contype[g], m.geom_conaffinity[g])


def test_collision_false_loads_drawing_only():
    path = os.path.join(_gymnasium_assets(), "ant.xml")
    model = _quiet(path, collision=False)
    assert not model.grounds and not model.load_report.geoms
    assert model.bodies[0].shape is not None  # still drawn


@pytest.mark.parametrize("integrator", ["semi_implicit_euler", "nullspace_rk4", "energy_momentum"])
def test_the_ant_dropped_on_its_floor_rests_where_mujoco_rests_it(integrator):
    """gymnasium's ant, zero controls, dropped from the file's pose onto its floor at the
    file's step: after 3 s its torso rests within 1 cm of MuJoCo's on the same file, and
    still.  MuJoCo's side without the file's geom margins (0.01 m on every geom: its feet
    rest 2 cm above the floor, which the load report lists as approximated) and with hard
    friction (elliptic cones, impratio 100); with its default soft pyramidal friction the
    feet creep apart for 8 s until the ankles reach their limits, 13 cm lower
    (``scripts/ant_drop.py``).  Each ankle starts mid-range (qpos0 = 0 lies outside it)."""
    path = os.path.join(_gymnasium_assets(), "ant.xml")
    model = _quiet(path, floating_base=True)
    assert any(e.what == "geom margin" for e in model.load_report.approximated)
    m = mujoco.MjModel.from_xml_path(path)
    m.geom_margin[:] = 0.0
    m.opt.cone, m.opt.impratio = mujoco.mjtCone.mjCONE_ELLIPTIC, 100.0
    d = mujoco.MjData(m)
    sim = rt.Simulation(model, integrator, dt=m.opt.timestep)
    for j in range(m.njnt):
        lo, hi = m.jnt_range[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE and (lo > 0.0 or hi < 0.0):
            d.qpos[m.jnt_qposadr[j]] = 0.5 * (lo + hi)
            sim.set_joint_position(m.joint(j).name, [0.5 * (lo + hi)])
    heights = []
    for _ in range(2):
        while d.time < 1.5 * (len(heights) + 1) - 1e-9:
            mujoco.mj_step(m, d)
        sim.step(150)
        heights.append((sim.link_pose("torso")[0][2], d.qpos[2]))
    (mine1, theirs1), (mine, theirs) = heights
    assert abs(mine - theirs) < 0.01, heights
    assert abs(mine - mine1) < 1e-3 and abs(theirs - theirs1) < 1e-3, heights  # at rest
    assert 0.4 < mine < 0.6


def test_mjcf_without_mujoco_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "plain.xml"
    path.write_text('<mujoco><worldbody/></mujoco>')
    monkeypatch.setitem(sys.modules, "mujoco", None)  # import mujoco raises ImportError
    with pytest.raises(ValueError, match=r"rtrigid\[mjcf\]"):
        rt.load_model(str(path))


def test_run_takes_an_mjcf_path_at_its_own_step(capsys):
    path = os.path.join(_gymnasium_assets(), "hopper.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = cli.main(["run", path, "--t-end", "0.02", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    import json
    r = json.loads(out)
    assert r["steps"] == 10  # the file's 2 ms step


FOUR_BAR = """<mujoco>
  <worldbody>
    <body name="crank" pos="0 0 1">
      <joint name="a" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
      <body name="coupler" pos="0.2 0 0">
        <joint name="b" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.02"/>
        <body name="rocker" pos="0 0 0.5">
          <joint name="c" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.02"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality>
    <connect name="close" body1="rocker" body2="world" anchor="0.3 0 -0.3"/>
  </equality>
</mujoco>
"""


def test_connect_equality_is_a_loop_joint_held_where_mujoco_anchors_it(tmp_path):
    path = tmp_path / "four_bar.xml"
    path.write_text(FOUR_BAR)
    with pytest.warns(UserWarning, match="equality connect approximated.*lines 17"):
        model = rt.load_model(str(path), collision=False)
    assert [j.name for j in model.loop_joints] == ["close"]
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)
    # the world anchor: the rocker's anchor point where MuJoCo's compiled model puts it
    rocker = m.body("rocker").id
    anchor = d.xpos[rocker] + d.xmat[rocker].reshape(3, 3) @ m.eq_data[0, :3]
    assert np.allclose(model.loop_joints[0].anchor_parent, anchor, atol=1e-14)
    sim.step(500)
    assert sim.constraint_error() < 1e-10 and abs(sim.joint_position("a")[0]) > 0.1


def test_armature_in_the_mass_matrix_and_kinetic_energy_as_mujocos():
    """The walker's joint-space mass matrix (MuJoCo's qM holds the armature) has MuJoCo's
    eigenvalues (the rates' order may differ), and the kinetic energy, rotors included, is
    MuJoCo's."""
    path = os.path.join(_gymnasium_assets(), "walker2d.xml")
    sim, m, d, names = _random_twins(path, seed=11)
    m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    ours = np.linalg.eigvalsh(sim.mass_matrix())
    assert np.allclose(ours, np.linalg.eigvalsh(full), rtol=1e-12, atol=1e-14)
    assert sim.kinetic_energy() == pytest.approx(d.energy[1], rel=1e-12)
    assert min(m.dof_armature[3:]) > 0.0


SERVOS = """<mujoco>
  <option timestep="0.001"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="a" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="b" axis="0 1 0" armature="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="slider" pos="0.3 0 0">
          <joint name="c" type="slide" axis="1 0 0"/>
          <geom type="box" size="0.04 0.04 0.04"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <general name="servo" joint="a" gainprm="30" biastype="affine" biasprm="0 -30 -2"
             gear="1.5"/>
    <general name="motor" joint="b" gainprm="2" forcelimited="true" forcerange="-1 1"
             ctrllimited="true" ctrlrange="-0.8 0.8"/>
    <velocity name="speed" joint="c" kv="5"/>
    <general name="filtered" joint="c" dyntype="filter" dynprm="0.1"/>
  </actuator>
</mujoco>
"""


def test_general_actuators_map_to_servos_and_motors_as_mujoco_drives_them(tmp_path):
    """A general actuator with a position servo's gain and bias is one, a gain folds into a
    motor's gear (force range and control range as MuJoCo applies them); one with activation
    dynamics is reported ignored.  Driven with the same controls, RK4 on both sides."""
    path = tmp_path / "servos.xml"
    path.write_text(SERVOS)
    with pytest.warns(UserWarning, match="actuator ignored"):
        model = rt.load_model(str(path), collision=False)
    kinds = {a.name: (a.kind, a.gear, a.kp, a.kv) for a in model.actuators}
    assert kinds == {"servo": ("position", 1.5, 30.0, 2.0), "motor": ("motor", 2.0, 0.0, 0.0),
                     "speed": ("velocity", 1.0, 0.0, 5.0)}
    assert [e.where.endswith(":23") for e in model.load_report.ignored] == [True]
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.actuator_dyntype[3] = 0  # the one rtrigid ignores acts on neither side
    m.actuator_gainprm[3, 0] = 0.0
    d = mujoco.MjData(m)
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)
    d.ctrl[:3] = [0.4, 2.0, 0.3]  # the motor's control clamped to 0.8, its force to 1
    sim.set_controls([0.4, 2.0, 0.3])
    mujoco.mj_step(m, d, nstep=300)
    sim.step(300)
    assert max(_errors(sim, m, d, ["a", "b", "c"])) <= 1e-9
