"""rt.load_model: URDF files against MuJoCo loading the same file, link frames, refusals."""
import os
import warnings

import numpy as np
import pytest

import rtrigid as rt
from rtrigid.loaders.assemble import rpy_matrix
from rtrigid.maths import quat
from rtrigid.references import mujoco_ref

mujoco = pytest.importorskip("mujoco")
DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
TWISTED = os.path.join(DATA, "twisted.urdf")
DT, SPAN = 1e-4, 0.5
HINGE, SLIDE, BALL = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE),
                      int(mujoco.mjtJoint.mjJNT_BALL))


def _pybullet(name):
    pybullet_data = pytest.importorskip("pybullet_data")
    return os.path.join(pybullet_data.getDataPath(), name)


def _quiet_load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transmission / gazebo tags are ignored with a warning
        return rt.load_model(path, **kw)


def _twins(path, floating_base=False, seed=1, **kw):
    """rtrigid and MuJoCo on the same file, from the same random joint positions and rates.

    A ball joint's quaternion and rate are in the child body's principal axes in rtrigid and
    in the file body's axes in MuJoCo: they are turned from one to the other.
    """
    m, d = mujoco_ref.load_file(path, dt=DT, floating_base=floating_base)
    kw.setdefault("limits", False)   # MuJoCo's (soft) limits are off too: passive motion only
    kw.setdefault("collision", False)  # and so are its contacts
    sim = rt.Simulation(_quiet_load(path, floating_base=floating_base, **kw),
                        integrator="nullspace_rk4", dt=DT)
    mujoco.mj_forward(m, d)
    for i in range(1, m.nbody):  # the file's pose at zero joint coordinates, both sides
        x, q = sim.link_pose(m.body(i).name)
        assert np.linalg.norm(x - d.xpos[i]) <= 1e-12
    rng = np.random.default_rng(seed)
    names = [m.joint(i).name for i in range(m.njnt) if m.jnt_type[i] in (HINGE, SLIDE)]
    assert sorted(names) == sorted(n for n in sim.joint_names if sim.model.joint_info[n]["kind"]
                                   in ("revolute", "prismatic"))
    for n in names:
        j = m.joint(n)
        slide = m.jnt_type[j.id] == SLIDE
        q, v = (rng.uniform(0, 0.04), rng.uniform(-0.1, 0.1)) if slide else rng.uniform(-1, 1, 2)
        d.qpos[m.jnt_qposadr[j.id]], d.qvel[m.jnt_dofadr[j.id]] = q, v
        sim.set_joint_position(n, [q])
        sim.set_joint_velocity(n, [v])
    for i in range(m.njnt):
        if m.jnt_type[i] == BALL:
            s = rng.normal(size=4)
            s /= np.linalg.norm(s)
            w = rng.uniform(-1, 1, 3)
            d.qpos[m.jnt_qposadr[i]:m.jnt_qposadr[i] + 4] = s
            d.qvel[m.jnt_dofadr[i]:m.jnt_dofadr[i] + 3] = w
            c = sim.model.links[m.body(m.jnt_bodyid[i]).name][2]  # file axes -> body axes
            cs = quat.quat_mul(c, s, np.empty(4))
            sim.set_joint_position(m.joint(i).name,
                                   quat.quat_mul(cs, quat.quat_conj(c, np.empty(4)), np.empty(4)))
            sim.set_joint_velocity(m.joint(i).name, quat.rotate(c, w, np.empty(3)))
    mujoco.mj_forward(m, d)
    return sim, m, d, names


def _link_errors(sim, m, d):
    """Largest distance of any link origin and any link quaternion from MuJoCo's."""
    mujoco.mj_kinematics(m, d)  # after an RK4 step, xpos is that of the last stage's state
    ex = eq = 0.0
    for i in range(1, m.nbody):
        x, q = sim.link_pose(m.body(i).name)
        ex = max(ex, np.linalg.norm(x - d.xpos[i]))
        eq = max(eq, min(np.linalg.norm(q - d.xquat[i]), np.linalg.norm(q + d.xquat[i])))
    return ex, eq


def _joint_errors(sim, m, d, names):
    return {n: abs(d.qpos[m.jnt_qposadr[m.joint(n).id]] - sim.joint_position(n)[0])
            for n in names}


def _run(sim, m, d):
    n = int(round(SPAN / DT))
    mujoco.mj_step(m, d, nstep=n)
    sim.step(n)


def test_full_inertia_tensors_and_rotated_frames_match_mujoco():
    sim, m, d, names = _twins(TWISTED)
    _run(sim, m, d)
    err = _joint_errors(sim, m, d, names)
    assert max(err.values()) <= 1e-6, err
    assert max(_link_errors(sim, m, d)) <= 1e-6
    assert sim.joint_position("elbow")[0] != 0.0


@pytest.mark.slow
@pytest.mark.parametrize("path", ["kuka_iiwa/model.urdf", "franka_panda/panda.urdf",
                                  "a1/a1.urdf"])
def test_public_robots_fixed_base_match_mujoco(path):
    # the panda's second finger mimics the first; loaded as an independent joint on both sides
    sim, m, d, names = _twins(_pybullet(path), ignore=("mimic",))
    _run(sim, m, d)
    err = _joint_errors(sim, m, d, names)
    assert max(err.values()) <= 1e-6, err
    assert max(_link_errors(sim, m, d)) <= 1e-6


@pytest.mark.parametrize("path", [TWISTED, "a1/a1.urdf"])
def test_floating_base_root_pose_and_joints_match_mujoco(path):
    if not os.path.isabs(path):
        path = _pybullet(path)
    sim, m, d, names = _twins(path, floating_base=True, seed=3)
    root = m.body(1).name
    x0 = sim.link_pose(root)[0]
    _run(sim, m, d)
    err = _joint_errors(sim, m, d, names)
    assert max(err.values()) <= 1e-6, err
    x, q = sim.link_pose(root)
    assert np.linalg.norm(x - d.qpos[:3]) <= 1e-6
    assert min(np.linalg.norm(q - d.qpos[3:7]), np.linalg.norm(q + d.qpos[3:7])) <= 1e-6
    assert max(_link_errors(sim, m, d)) <= 1e-6
    assert np.linalg.norm(x - x0) > 1.0  # it fell


def test_every_link_frame_matches_mujoco_including_merged_and_massless():
    sim, m, d, names = _twins(TWISTED)
    _run(sim, m, d)
    m2, d2 = mujoco_ref.load_file(TWISTED, dt=DT, fusestatic=False)  # every link a body
    d2.qpos[:] = d.qpos  # the same joints (fusing removed no joint)
    mujoco.mj_kinematics(m2, d2)
    assert set(sim.model.links) == {"base", "upper", "fore", "wrist", "finger", "tool"}
    for link in sim.model.links:
        x, q = sim.link_pose(link)
        assert np.linalg.norm(x - d2.xpos[m2.body(link).id]) <= 1e-6, link
        qm = d2.xquat[m2.body(link).id]
        assert min(np.linalg.norm(q - qm), np.linalg.norm(q + qm)) <= 1e-6, link


def test_merge_fixed_false_keeps_a_body_and_moves_the_same():
    merged, kept = rt.load_model(TWISTED), rt.load_model(TWISTED, merge_fixed=False)
    assert [b.name for b in merged.bodies] == ["upper", "fore", "finger"]
    assert [b.name for b in kept.bodies] == ["upper", "fore", "wrist", "finger"]
    assert "wrist_mount" in [j.name for j in kept.joints]
    sims = [rt.Simulation(mo, integrator="nullspace_rk4", dt=1e-3) for mo in (merged, kept)]
    for s in sims:
        s.set_joint_position("shoulder", [0.7])
        s.set_joint_velocity("slide", [0.2])
        s.step(300)
    for n in ("shoulder", "elbow", "slide"):
        assert abs(sims[0].joint_position(n)[0] - sims[1].joint_position(n)[0]) <= 1e-9
    for link in merged.links:
        assert np.allclose(sims[0].link_pose(link)[0], sims[1].link_pose(link)[0], atol=1e-9)


def test_masses_are_summed_and_limits_kept():
    model = rt.load_model(TWISTED)
    assert sum(b.mass for b in model.bodies) == pytest.approx(1.7 + 0.9 + 0.4 + 0.1)
    info = model.joint_info["shoulder"]
    assert (info["lower"], info["upper"], info["effort"], info["velocity"]) == (-2, 2, 40, 3)
    assert info["source"].endswith("twisted.urdf:15")
    assert model.joint_info["slide"]["kind"] == "prismatic"


PENDULUM = """<robot name="p">
  <link name="base"/>
  <joint name="hinge" type="revolute">
    <parent link="base"/><child link="rod"/>
    <origin xyz="0 0 1" rpy="0.2 0 0"/><axis xyz="0 1 0"/>
  </joint>
  <link name="rod">
    <inertial>
      <origin xyz="0 0 -0.5" rpy="{rpy}"/>
      <mass value="2"/>
      <inertia ixx="{ixx}" ixy="{ixy}" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/>
    </inertial>
  </link>
</robot>
"""


@pytest.mark.parametrize("ixx,ixy,iyy,izz,rpy", [
    (0.04, 0.0, 0.04, 0.01, "0.3 0.5 0.7"),       # two equal moments, rotated
    (0.02, 0.005, 0.02, 0.015, "0 0 0"),         # repeated eigenvalue with off-diagonals
    (0.03, 0.0, 0.03, 0.03, "0.1 0.2 0.3"),       # a sphere: three equal moments
])
def test_repeated_principal_moments_match_mujoco(tmp_path, ixx, ixy, iyy, izz, rpy):
    path = tmp_path / "p.urdf"
    path.write_text(PENDULUM.format(ixx=ixx, ixy=ixy, iyy=iyy, izz=izz, rpy=rpy))
    sim, m, d, names = _twins(str(path))
    _run(sim, m, d)
    assert max(_joint_errors(sim, m, d, names).values()) <= 1e-6


def test_an_inertia_no_body_can_have_is_repaired_as_mujoco_repairs_it(tmp_path):
    """A triangle-violating inertia is balanced to the mean of its moments (MuJoCo's
    balanceinertia), a point mass gets the least moment (its boundinertia); both are
    reported as approximated, and allow_nonphysical_inertia=True keeps the first as given."""
    path = tmp_path / "p.urdf"
    path.write_text(PENDULUM.format(ixx=0.01, ixy=0, iyy=0.001, izz=0.001, rpy="0 0 0"))
    with pytest.warns(UserWarning, match="inertia"):
        model = rt.load_model(str(path))
    assert np.allclose(model.bodies[0].inertia, 0.004, rtol=1e-12)
    assert [e.where for e in model.load_report.approximated if e.what == "inertia"] == [
        f"{path}:7"]  # the link
    kept = rt.load_model(str(path), allow_nonphysical_inertia=True)
    assert np.allclose(sorted(kept.bodies[0].inertia), [0.001, 0.001, 0.01], rtol=1e-12)
    path.write_text(PENDULUM.format(ixx=0, ixy=0, iyy=0, izz=0, rpy="0 0 0"))
    with pytest.warns(UserWarning, match="inertia"):
        model = rt.load_model(str(path))
    assert np.allclose(model.bodies[0].inertia, 2e-6, rtol=1e-12)  # 1e-6 per kg, 2 kg
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)  # a point mass swings
    sim.set_qvel([1.0])
    sim.step(100)
    assert 0.09 < sim.qpos()[0] < 0.11

def _refused(tmp_path, text, *, name="bad.urdf", **kw):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        rt.load_model(str(path), **kw)
    return str(e.value)


@pytest.mark.parametrize("old,new,where", [
    ('<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/>\n    <safety_controller/>',
     ":6: <safety_controller>"),
])
def test_urdf_what_is_not_simulated_is_reported_warned_and_refused_when_strict(tmp_path, old,
                                                                              new, where):
    text = PENDULUM.format(ixx=.01, ixy=0, iyy=.01, izz=.01, rpy="0 0 0").replace(old, new)
    path = tmp_path / "bad.urdf"
    path.write_text(text)
    with pytest.warns(UserWarning, match="ignored"):
        model = rt.load_model(str(path))
    assert len(model.joints) == 1
    assert any(f"{e.where}: {e.what}".startswith(str(path) + where)
               for e in model.load_report.ignored), str(model.load_report)
    assert where in _refused(tmp_path, text, strict=True)


@pytest.mark.parametrize("old,new,where", [
    ('<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/><gripper_magic/>', ":5: <gripper_magic>"),
    ('<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/>\n    <mimic joint="other"/>', ":6: <mimic>"),
    ('<mass value="2"/>', '<mass value="-2"/>', ":10: <mass>"),
    ('<mass value="2"/>', '<mass value="two"/>', ":10: <mass>"),
    ('<mass value="2"/>', '', ":8: <inertial>"),
    ('type="revolute"', 'type="screw"', ":3: <joint name='hinge'>"),
    ('<child link="rod"/>', '<child link="rodd"/>', ":3: <joint name='hinge'>"),
    ('<inertial>', '<inertial_>', ":12: malformed XML: mismatched tag"),
    ('</robot>', '', ":15: malformed XML"),
])
def test_bad_files_are_refused_naming_file_and_line(tmp_path, old, new, where):
    text = PENDULUM.format(ixx=.01, ixy=0, iyy=.01, izz=.01, rpy="0 0 0").replace(old, new)
    assert where in _refused(tmp_path, text)


def test_massless_moving_link_and_second_parent_are_refused(tmp_path):
    text = PENDULUM.format(ixx=.01, ixy=0, iyy=.01, izz=.01, rpy="0 0 0")
    massless = text.replace(text[text.index("    <inertial>"):text.index("  </link>\n</robot>")],
                            "")
    assert "<link name='rod'>: has no mass" in _refused(tmp_path, massless)
    loop = text.replace("</robot>", '<joint name="again" type="fixed"><parent link="base"/>'
                                    '<child link="rod"/></joint></robot>')
    assert "already has a parent joint" in _refused(tmp_path, loop)


def test_unknown_root_element_and_missing_file(tmp_path):
    assert "<sdf>" in _refused(tmp_path, "<sdf/>")
    with pytest.raises(ValueError, match="path: cannot read"):
        rt.load_model(str(tmp_path / "absent.urdf"))


def test_link_pose_refuses_unknown_links():
    sim = rt.Simulation(rt.load_model(TWISTED), integrator="nullspace_rk4", dt=1e-3)
    with pytest.raises(ValueError, match="link: no link 'nose'"):
        sim.link_pose("nose")
    x, q = sim.link_pose("base")  # welded to the world: the world origin
    assert np.allclose(x, 0.0) and np.allclose(q, [1, 0, 0, 0])


KIT = os.path.join(DATA, "kit.xml")


def test_mjcf_kit_matches_mujoco_link_by_link():
    """Default classes, every orientation form, two joints in one body, fullinertia and geom
    inertias, slide, ball and free joints with springs and dampers: every body's frame."""
    sim, m, d, names = _twins(KIT, seed=5)
    _run(sim, m, d)
    assert max(_joint_errors(sim, m, d, names).values()) <= 1e-6
    assert max(_link_errors(sim, m, d)) <= 1e-6
    assert sim.joint_names[-1] == "puck_free"


@pytest.mark.slow
@pytest.mark.parametrize("floating_base", [False, True])
def test_mjcf_humanoid_matches_mujoco(floating_base):
    # its armature is ignored on both sides (rtrigid has no rotor inertia)
    path = _pybullet("mjcf/humanoid.xml")
    sim, m, d, names = _twins(path, floating_base=floating_base, ignore=("armature",))
    assert len(names) == 21
    _run(sim, m, d)
    assert max(_joint_errors(sim, m, d, names).values()) <= 1e-6
    assert max(_link_errors(sim, m, d)) <= 1e-6


@pytest.mark.parametrize("path", ["kuka_iiwa/model.urdf", "franka_panda/panda.urdf"])
def test_file_limits_are_hard_joint_limits_as_mujoco_reads_them(path):
    """Each revolute or prismatic joint's limits are the range MuJoCo reads from the same
    file; a joint pushed past one stops on it."""
    path = _pybullet(path)
    m, _ = mujoco_ref.load_file(path)
    sim = rt.Simulation(_quiet_load(path, ignore=("mimic",)), integrator="nullspace_rk4",
                        dt=1e-3)
    limits = {j["name"]: j["limits"] for j in sim.joints()}
    checked = 0
    for i in range(m.njnt):
        if m.jnt_type[i] in (HINGE, SLIDE) and m.jnt_limited[i]:
            np.testing.assert_allclose(limits[m.joint(i).name], m.jnt_range[i], rtol=0,
                                       atol=1e-12)
            checked += 1
    assert checked >= 7
    name, (lo, hi) = next((n, r) for n, r in limits.items() if np.isfinite(r[1]))
    sim.set_joint_velocity(name, [50.0])
    sim.step(200)
    assert sim.joint_position(name)[0] <= hi
    with pytest.raises(ValueError, match="limits"):
        sim.set_joint_position(name, [hi + 0.1])
    unlimited = rt.Simulation(_quiet_load(path, ignore=("mimic",), limits=False),
                              integrator="nullspace_rk4", dt=1e-3)
    assert all(j["limits"] == (-np.inf, np.inf) for j in unlimited.joints())


def test_mjcf_metadata_and_massless_chain_links():
    model = rt.load_model(KIT)
    assert [b.name for b in model.bodies] == ["base", "arm:bend", "arm", "slider", "tip", "puck"]
    assert model.bodies[1].mass == 0.0  # the link between bend and twist
    assert [(a.kind, model.joints[a.joint].name) for a in model.actuators] == [
        ("motor", "swing"), ("position", "bend"), ("velocity", "slide")]
    assert model.actuators[0].ctrl_range == (-1.0, 1.0) and model.actuators[1].kp == 10
    assert model.actuators[2].kv == 1.0
    bend = next(j for j in model.joints if j.name == "bend")
    assert bend.stiffness == 2.0 and bend.rest == pytest.approx(np.deg2rad(10.0))
    assert bend.damping == 0.1  # the top default class


@pytest.mark.parametrize("integrator,tol", [("semi_implicit_euler", 5e-3),
                                            ("energy_momentum", 2e-5),
                                            ("energy_momentum4", 1e-9)])
def test_massless_chain_links_step_under_every_tree_scheme(tmp_path, integrator, tol):
    """A file body with two joints (a massless link between them) swings as under
    nullspace_rk4 (to each scheme's order at 1 ms over 0.3 s: measured 1.5e-3, 6.1e-6 and
    5.7e-12), the energy-momentum schemes keeping its energy to round-off."""
    path = tmp_path / "two.xml"
    path.write_text('<mujoco><worldbody><body name="b" pos="0 0 1"><joint name="j1"/>'
                    '<joint name="j2" axis="1 0 0"/><inertial pos="0.1 0 -0.2" mass="1" '
                    'diaginertia="0.01 0.02 0.03"/></body></worldbody></mujoco>')
    model = rt.load_model(str(path))
    sims = [rt.Simulation(model, integrator=name, dt=1e-3)
            for name in ("nullspace_rk4", integrator)]
    for sim in sims:
        sim.set_joint_position("j2", [0.5])
        sim.set_joint_velocity("j1", [2.0])
    e0 = sims[1].energy()
    for sim in sims:
        sim.step(300)
    ref, got = (np.array([s.joint_position(j)[0] for j in ("j1", "j2")]) for s in sims)
    assert abs(ref[1] - 0.5) > 0.1  # it swung
    assert np.max(np.abs(got - ref)) < tol, got - ref
    if integrator != "semi_implicit_euler":
        assert abs(sims[1].energy() - e0) < 1e-12 * abs(e0)


@pytest.mark.parametrize("old,new,where", [
    ('<light pos="0 0 3"/>', '<light pos="0 0 3"/><composite type="grid"/>',
     ":18: MuJoCo cannot compile the file: XML Error: Schema violation: unrecognized element"),
    ('joint="bend" kp="10"', 'joint="bent" kp="10"',
     ":48: MuJoCo cannot compile the file: Error: unknown transmission target 'bent'"),
    ('fullinertia=', 'quat="1 0 0 0" fullinertia=', ":27: MuJoCo cannot compile the file"),
])
def test_files_mujoco_rejects_give_its_reason_and_line(tmp_path, old, new, where):
    with open(KIT) as f:
        text = f.read()
    assert old in text
    assert where in _refused(tmp_path, text.replace(old, new), name="bad.xml")


@pytest.mark.parametrize("old,new,where", [
    ('<joint name="ball" type="ball" damping="0" stiffness="0"',
     '<joint name="ball" type="ball" damping="0"', ":33: spherical joint stiffness"),
    ('<actuator>', '<tendon><fixed name="t" stiffness="3"><joint joint="bend" coef="1"/>'
     '</fixed></tendon><actuator>', ":46: tendon"),
    ('<motor name="m" joint="swing" gear="2"',
     '<general name="m" joint="swing" gear="2" dyntype="filter"', ":47: actuator: 'm'"),
    ('<joint name="ball" type="ball" damping="0" stiffness="0"',
     '<joint name="ball" type="ball" damping="0" stiffness="0" frictionloss="0.2"',
     ":33: spherical joint frictionloss"),
])
def test_what_is_not_simulated_is_reported_warned_and_refused_when_strict(tmp_path, old, new,
                                                                         where):
    """Loaded by default, listed in the load report as ignored and warned about with its
    line; strict=True refuses it naming file:line."""
    with open(KIT) as f:
        text = f.read()
    assert old in text
    path = tmp_path / "bad.xml"
    path.write_text(text.replace(old, new))
    with pytest.warns(UserWarning, match="ignored") as caught:
        model = rt.load_model(str(path), collision=False)
    assert any(str(path) + where in f"{e.where}: {e.what}: {e.detail}"
               for e in model.load_report.ignored), str(model.load_report)
    line = where.split(":")[1]
    assert any(f"lines {line}" in str(w.message) for w in caught)
    assert where in _refused(tmp_path, text.replace(old, new), name="bad.xml", strict=True,
                             collision=False)


def test_joint_friction_loads_as_joint_friction(tmp_path):
    """URDF <dynamics friction> (or <joint_properties friction>) and MJCF frictionloss on
    hinges and slides become Model.add_joint(friction=...), with nothing reported ignored for
    them."""
    text = PENDULUM.format(ixx=.01, ixy=0, iyy=.01, izz=.01, rpy="0 0 0").replace(
        '<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/>\n    <dynamics friction="0.3"/>')
    path = tmp_path / "f.urdf"
    path.write_text(text)
    model = rt.load_model(str(path))
    assert [j.friction for j in model.joints] == [0.3]
    assert not any("friction" in e.what for e in model.load_report.ignored)
    # ROS's older <joint_properties>, and <dynamics> over it where both give a number
    path.write_text(PENDULUM.format(ixx=.01, ixy=0, iyy=.01, izz=.01, rpy="0 0 0").replace(
        '<axis xyz="0 1 0"/>', '<axis xyz="0 1 0"/>\n    <joint_properties damping="0.1" '
        'friction="0.2"/><dynamics damping="0.05"/>'))
    model = rt.load_model(str(path))
    assert [(j.damping, j.friction) for j in model.joints] == [(0.05, 0.2)]
    assert not model.load_report.ignored
    with open(KIT) as f:
        text = f.read()
    path = tmp_path / "f.xml"
    path.write_text(text.replace('<joint name="bend"', '<joint name="bend" frictionloss="0.2"'))
    model = rt.load_model(str(path), collision=False)
    assert {j.name: j.friction for j in model.joints if j.friction} == {"bend": 0.2}
    assert not any("friction" in e.what for e in model.load_report.ignored)
    dropped = rt.load_model(str(path), collision=False, ignore=("frictionloss",))
    assert not any(j.friction for j in dropped.joints)

FLOATING = """<robot name="fl">
  <link name="world"/>
  <joint name="base_free" type="floating"><parent link="world"/><child link="base"/>
    <origin xyz="0 0 1" rpy="0.1 0.2 0.3"/></joint>
  <link name="base"><inertial><origin xyz="0.1 0 0" rpy="0 0.3 0"/><mass value="2"/>
    <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.04"/></inertial></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 1 0"/></joint>
  <link name="arm"><inertial><origin xyz="0 0 0.2"/><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.002"/></inertial></link>
  <joint name="p" type="planar"><parent link="arm"/><child link="puck"/>
    <origin xyz="0 0 0.4"/><axis xyz="0 0 1"/></joint>
  <link name="puck"><inertial><mass value="0.3"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>
</robot>
"""


def test_floating_joint_from_the_world_and_a_planar_joint(tmp_path):
    """A floating joint from a 'world' link is a free body with the joint's name, starting at
    the joint's pose; a planar joint keeps its child in the plane across its axis."""
    path = tmp_path / "fl.urdf"
    path.write_text(FLOATING)
    sim = rt.Simulation(rt.load_model(str(path)), integrator="nullspace_rk4", dt=1e-3)
    assert sim.joint_names == ["j", "p", "base_free"]
    x, q = sim.link_pose("base")
    assert np.allclose(x, [0, 0, 1], atol=1e-15)
    assert np.allclose(quat.rotmat(q, np.empty((3, 3))), rpy_matrix([0.1, 0.2, 0.3]), atol=1e-14)
    sim.set_joint_velocity("p", [1.0, 0.5, -0.3])
    m = sim.body_mass / sim.body_mass.sum()
    com0, vcom0 = m @ sim.x, m @ sim.v
    sim.step(500)
    fall = com0 + 0.5 * vcom0 + 0.5 * np.array([0, 0, -9.81]) * 0.5 ** 2  # free fall
    assert np.allclose(m @ sim.x, fall, atol=1e-9)
    x_arm, q_arm = sim.link_pose("arm")
    x_puck = sim.link_pose("puck")[0]
    assert quat.rotate_inv(q_arm, x_puck - x_arm, np.empty(3))[2] == pytest.approx(0.4, abs=1e-12)
    assert sim.constraint_error() < 1e-12


def test_actuators_from_the_file_effort_saturate_as_its_limit_says():
    """load_model(actuators=...) drives every revolute/prismatic joint; <limit effort> is the
    force range: a motor asked for twice the effort delivers exactly the effort."""
    path = _pybullet("kuka_iiwa/model.urdf")
    model = _quiet_load(path, actuators="motor")
    moving = [j.name for j in model.joints if j.kind in ("revolute", "prismatic")]
    assert [a.name for a in model.actuators] == moving and len(moving) == 7
    effort = {n: model.joint_info[n]["effort"] for n in moving}
    assert all(effort[a.name] > 0 and a.force_range == (-effort[a.name], effort[a.name])
               for a in model.actuators)
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)
    u = np.array([2.0 * effort[n] * (-1) ** k for k, n in enumerate(moving)])
    sim.set_controls(u)
    assert np.array_equal(sim.actuator_forces(), np.clip(u, [-effort[n] for n in moving],
                                                        [effort[n] for n in moving]))
    servo = _quiet_load(path, actuators="position", kp=50.0, kv=5.0)
    assert {a.kind for a in servo.actuators} == {"position"}
    assert all((a.kp, a.kv) == (50.0, 5.0) for a in servo.actuators)


def test_the_pandas_mimic_finger_follows_the_servo_on_the_first():
    """<mimic> loads as a coupling: actuators= drives the source finger only, and the
    other finger follows it exactly."""
    model = _quiet_load(_pybullet("franka_panda/panda.urdf"), actuators="position", kp=50.0,
                        kv=5.0)
    (c,) = model.couplings
    assert (c.joint, c.source, c.ratio, c.offset) == (
        "panda_finger_joint2", "panda_finger_joint1", 1.0, 0.0)
    assert "panda_finger_joint2" not in [a.name for a in model.actuators]
    assert len(model.actuators) == 8
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)
    sim.set_control("panda_finger_joint1", 0.03)
    sim.step(1000)
    first, second = (sim.joint_position(f"panda_finger_joint{k}")[0] for k in (1, 2))
    assert first == pytest.approx(0.03, abs=1e-4)
    assert abs(second - first) < 1e-12


def test_bad_actuators_option_is_refused_naming_it():
    path = _pybullet("kuka_iiwa/model.urdf")
    with pytest.raises(ValueError, match="actuators"):
        _quiet_load(path, actuators="servo")
    with pytest.raises(ValueError, match="kp"):
        _quiet_load(path, actuators="position")  # a position servo needs kp


TETRAHEDRON = """v 0.1 0.0 0.0
v 0.3 0.05 0.0
v 0.15 0.2 0.02
v 0.18 0.08 0.25
f 1 3 2
f 1 2 4
f 2 3 4
f 3 1 4
"""
MESHED = """<mujoco>
  <compiler meshdir="assets" angle="radian"/>
  <asset><mesh name="tet" file="tet.obj" scale="1 2 1"/></asset>
  <worldbody>
    <body name="b" pos="0.1 0.2 0.3" euler="0.3 0.2 0.1">
      <joint name="j" type="hinge" axis="0 1 0"/>
      <inertial pos="0.02 0 0.01" euler="0.1 0 0.2" mass="1" diaginertia="0.1 0.2 0.3"/>
      <geom type="mesh" mesh="tet" pos="0.05 -0.02 0.1" euler="0.5 -0.3 0.2" rgba="1 0 0 1"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_mjcf_mesh_geoms_are_drawn_where_mujoco_puts_their_vertices(tmp_path):
    """A mesh geom becomes a drawn mesh part (file from the compiler's meshdir, the asset's
    scale): the file's vertices through the body pose and the part's frame land where
    MuJoCo's compiled (re-centred) mesh vertices are."""
    mujoco = pytest.importorskip("mujoco")
    from scipy.spatial.transform import Rotation

    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "tet.obj").write_text(TETRAHEDRON)
    path = tmp_path / "meshed.xml"
    path.write_text(MESHED)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.qpos[0] = 0.7
    mujoco.mj_forward(m, d)
    mesh = m.geom_dataid[0]
    start = m.mesh_vertadr[mesh]
    verts = m.mesh_vert[start:start + m.mesh_vertnum[mesh]]
    theirs = d.geom_xpos[0] + verts @ d.geom_xmat[0].reshape(3, 3).T

    model = _quiet_load(str(path))
    (part,) = model.bodies[0].shape.params["parts"]
    assert part["type"] == "mesh" and part["file"] == str(tmp_path / "assets" / "tet.obj")
    assert not part["missing"] and np.array_equal(part["scale"], [1.0, 2.0, 1.0])
    sim = rt.Simulation(model, "nullspace_rk4", dt=1e-3)
    sim.set_joint_position("j", [0.7])
    x, q = sim.pose(0)

    def matrix(q):
        return Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_matrix()

    raw = np.array([[float(t) for t in line.split()[1:]] for line in TETRAHEDRON.splitlines()
                    if line.startswith("v ")]) * part["scale"]
    ours = x + (part["pos"] + raw @ matrix(part["quat"]).T) @ matrix(q).T
    # the same vertices (MuJoCo keeps them in float32), in any order
    assert np.abs(np.sort(ours, axis=0) - np.sort(theirs, axis=0)).max() < 1e-6


def test_mjcf_unknown_or_missing_mesh_is_mujocos_refusal(tmp_path):
    path = tmp_path / "meshed.xml"
    path.write_text(MESHED.replace('mesh="tet" pos', 'mesh="nope" pos'))
    with pytest.raises(ValueError, match="MuJoCo cannot compile the file.*nope"):
        _quiet_load(str(path))
    path.write_text(MESHED)  # assets/tet.obj does not exist here
    with pytest.raises(ValueError, match="meshed.xml.*MuJoCo cannot compile the file"):
        rt.load_model(str(path))


def test_mjcf_mesh_with_inline_vertices_loads_undrawn_with_a_warning(tmp_path):
    """A mesh asset given by its vertices (no file) is known: a geom naming it is not drawn
    and says so, rather than being refused as an unknown mesh."""
    path = tmp_path / "inline.xml"
    path.write_text(MESHED.replace('file="tet.obj" scale="1 2 1"',
                                   'vertex="0 0 0  1 0 0  0 1 0  0 0 1"'))
    with pytest.warns(UserWarning, match="inline vertices not drawn"):
        model = rt.load_model(str(path))
    assert model.bodies[0].name == "b" and model.joints[0].name == "j"
