"""URDF collision geometry: geoms where MuJoCo puts the same file's collision shapes, a loaded
quadruped that lands on the ground instead of falling through it, meshes found through
package_dirs, and pybullet's files that needed leniency (blank lines before the XML, text
after it, commas in numbers, lower > upper, a four-number scale, pybullet's plane)."""
import os
import shutil
import warnings

import numpy as np
import pytest

import rtrigid as rt

mujoco = pytest.importorskip("mujoco")
SPHERE, CYLINDER, BOX = (int(mujoco.mjtGeom.mjGEOM_SPHERE), int(mujoco.mjtGeom.mjGEOM_CYLINDER),
                         int(mujoco.mjtGeom.mjGEOM_BOX))
KINDS = {SPHERE: "sphere", CYLINDER: "cylinder", BOX: "box"}


def _pybullet(name):
    pybullet_data = pytest.importorskip("pybullet_data")
    return os.path.join(pybullet_data.getDataPath(), name)


def _quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.load_model(path, **kw)


def _world_geoms(sim):
    """(kind, sizes, world position, world rotation) of every geom at the current state."""
    out = []
    for g in sim.model.geoms:
        if g.body is None:
            x, R = np.zeros(3), np.eye(3)
        else:
            x, q = sim.pose(g.body)
            R = rt.geoms.quat_matrix(q)
        p = g.params
        size = {"sphere": lambda: [p["radius"]],
                "cylinder": lambda: [p["radius"], p["half_length"]],
                "box": lambda: list(p["half_extents"])}[g.kind]()
        out.append((g.kind, np.array(size), x + R @ g.pos, R @ rt.geoms.quat_matrix(g.quat)))
    return out


@pytest.mark.parametrize("floating_base", [False, True])
def test_a1_collision_geoms_are_where_mujoco_puts_them(floating_base):
    """Every collision element of pybullet's A1 is a geom of the same kind and size at the
    world pose MuJoCo compiles for it (zero joint coordinates; a free base starts at the
    file's pose)."""
    path = _pybullet("a1/a1.urdf")
    spec = mujoco.MjSpec.from_file(path)
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    spec.compiler.discardvisual = True
    m = spec.compile()
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    theirs = [(KINDS[int(m.geom_type[i])], m.geom_size[i], d.geom_xpos[i],
               d.geom_xmat[i].reshape(3, 3)) for i in range(m.ngeom)]
    # without limits every joint starts at 0, as MuJoCo's qpos0 (rtrigid starts a joint
    # whose limits exclude 0 at the nearer limit)
    model = _quiet(path, floating_base=floating_base, limits=False)
    sim = rt.Simulation(model, "nullspace_rk4", 1e-3)
    mine = _world_geoms(sim)
    assert len(mine) == len(theirs) == 22
    left = list(range(len(theirs)))
    for kind, size, x, R in mine:
        match = [i for i in left if theirs[i][0] == kind
                 and np.allclose(theirs[i][1][:len(size)], size, atol=1e-12)
                 and np.linalg.norm(theirs[i][2] - x) < 1e-9]
        assert match, (kind, size, x)
        i = match[0]
        Rt = theirs[i][3]
        if kind == "cylinder":  # its axis, either way
            assert abs(Rt[:, 2] @ R[:, 2]) == pytest.approx(1.0, abs=1e-9)
        elif kind == "box":
            assert np.allclose(np.abs(Rt.T @ R), np.eye(3), atol=1e-9)
        left.remove(i)
    assert model.load_report.of("mapped")


def _lowest(kind, size, x, R):
    """The lowest world z of a sphere, cylinder or box."""
    if kind == "sphere":
        return x[2] - size[0]
    if kind == "box":
        return x[2] - np.abs(R[2]) @ size
    az = abs(R[2, 2])
    return x[2] - az * size[1] - size[0] * np.sqrt(max(0.0, 1.0 - az * az))


def test_a_loaded_a1_lands_on_the_ground_instead_of_falling_through():
    """The A1, its base free, dropped from 0.5 m onto a ground: its collision geometry stops
    it (no geom more than 2 mm below the ground at any step); it comes to rest on it."""
    model = _quiet(_pybullet("a1/a1.urdf"), floating_base=True)
    model.add_ground(friction=0.8)
    sim = rt.Simulation(model, "nullspace_rk4", 1e-3)
    sim.set_position(0, sim.pose(0)[0] + (0.0, 0.0, 0.5))
    worst = np.inf
    for _ in range(100):
        sim.step(15)
        worst = min(worst, min(_lowest(*g) for g in _world_geoms(sim)))
    assert worst > -2e-3
    assert sim.contacts()
    assert np.linalg.norm(sim.velocity(0)[0]) < 0.05
    assert min(_lowest(*g) for g in _world_geoms(sim)) == pytest.approx(0.0, abs=2e-3)


def test_collision_false_and_self_collision():
    """Without self-collision a fixed base's geoms are in filter group 2 and no two links
    may touch: the arm alone has no contacts to step; with it, only jointed links are kept
    apart."""
    from rtrigid.contact import has_contacts

    path = _pybullet("a1/a1.urdf")
    assert not _quiet(path, collision=False).geoms
    assert len(_quiet(path).geoms) == 22
    arm = _pybullet("kuka_iiwa/model.urdf")
    alone = _quiet(arm)
    base = [g for g in alone.geoms if g.body is None]
    assert base and all((g.contype, g.conaffinity) == (2, 2) for g in base)
    assert not has_contacts(alone)
    selfish = _quiet(arm, self_collision=True)
    assert all((g.contype, g.conaffinity) == (1, 1) for g in selfish.geoms)
    assert has_contacts(selfish)


def test_package_paths_resolve_through_package_dirs(tmp_path):
    """A collision mesh named package://duck/meshes/duck.obj is found in a package_dirs
    folder (not beside the file): the duck's five convex pieces become geoms."""
    root = tmp_path / "pkgs"
    (root / "duck" / "meshes").mkdir(parents=True)
    shutil.copy(_pybullet("duck_vhacd.obj"), root / "duck" / "meshes" / "duck.obj")
    robot = tmp_path / "robot" / "duck.urdf"
    robot.parent.mkdir()
    robot.write_text("""<robot name="duck"><link name="duck">
  <inertial><mass value="1"/><inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/>
  </inertial>
  <collision><origin xyz="0 0 0.1"/>
    <geometry><mesh filename="package://duck/meshes/duck.obj" scale="0.1 0.1 0.1"/></geometry>
  </collision></link></robot>""")
    with pytest.warns(UserWarning, match="collision mesh files not found"):
        assert not rt.load_model(str(robot), floating_base=True).geoms
    model = rt.load_model(str(robot), floating_base=True, package_dirs=[str(root)])
    assert len(model.geoms) == 5 and all(g.kind == "mesh" for g in model.geoms)


@pytest.mark.parametrize("name, reported", [
    ("differential/diff_ring.urdf", None),          # blank lines before the XML
    ("cube_no_rotation.urdf", None),                 # lower > upper: no limit
    ("humanoid/humanoid.urdf", "text after the root element"),
    ("bicycle/bike.urdf", None),                     # commas between numbers
    ("racecar/racecar_differential.urdf", "fourth number"),
    ("biped/biped2d_pybullet.urdf", "'-1.57.' read as -1.57"),
    ("quadruped/microtaur/microtaur.urdf", "rpy: numbers past the third ignored"),
    ("plane.urdf", None),                            # its <contact> friction on its box
    ("plane_implicit.urdf", None),                   # pybullet's <plane>: a ground
])
def test_pybullet_files_that_needed_leniency_load(name, reported):
    model = _quiet(_pybullet(name))
    if reported:
        assert any(reported in e.what for e in model.load_report.ignored), \
            str(model.load_report)
    if name == "plane.urdf":
        (box,) = model.geoms
        assert box.body is None and box.friction == 1.0
    if name == "plane_implicit.urdf":
        assert len(model.grounds) == 1 and model.grounds[0].height == 0.0
