"""Viewer geometry without OpenGL: generated meshes, analytic ray casts, the orbit camera.

The analytic ray casts (used for picking) are checked against a brute-force ray/triangle
intersection with the generated meshes (what is drawn), and the meshes against the volumes
of the solids they approximate.
"""
import math

import numpy as np
import pytest

from viewer import meshes, scene
from viewer.camera import OrbitCamera
from viewer.picking import ray_mesh, ray_shape

SHAPES = [
    ("box", {"half_extents": np.array([0.3, 0.5, 0.2])}, 8 * 0.3 * 0.5 * 0.2),
    ("sphere", {"radius": 0.4}, 4 / 3 * math.pi * 0.4 ** 3),
    ("cylinder", {"radius": 0.25, "half_length": 0.6}, math.pi * 0.25 ** 2 * 1.2),
    ("capsule", {"radius": 0.2, "half_length": 0.5},
     math.pi * 0.2 ** 2 * 1.0 + 4 / 3 * math.pi * 0.2 ** 3),
    ("cone", {"radius": 0.3, "height": 0.8}, math.pi * 0.3 ** 2 * 0.8 / 3),
]


def mesh_volume(verts, idx):
    p = verts[:, :3].astype(np.float64)
    a, b, c = p[idx[:, 0]], p[idx[:, 1]], p[idx[:, 2]]
    return np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0


@pytest.mark.parametrize("kind,params,volume", SHAPES, ids=[s[0] for s in SHAPES])
def test_mesh_is_closed_outward_and_has_the_solid_volume(kind, params, volume):
    verts, idx = meshes.shape_mesh(kind, params)
    # outward orientation gives a positive volume; faceting loses at most a few per cent
    assert mesh_volume(verts, idx) == pytest.approx(volume, rel=0.03)
    # closed: every edge is shared by exactly two triangles (after merging equal positions)
    pos = np.round(verts[:, :3].astype(np.float64), 9)
    _, canon = np.unique(pos, axis=0, return_inverse=True)
    tri = canon.ravel()[idx]
    edges = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
    edges = edges[edges[:, 0] != edges[:, 1]]
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert np.all(counts == 2)
    n = np.linalg.norm(verts[:, 3:], axis=1)
    assert np.allclose(n, 1.0, atol=1e-6)


@pytest.mark.parametrize("kind,params,volume", SHAPES, ids=[s[0] for s in SHAPES])
def test_ray_cast_agrees_with_the_drawn_mesh(kind, params, volume):
    rng = np.random.default_rng(7)
    offset = np.array([0.05, -0.02, 0.1])
    verts, idx = meshes.shape_mesh(kind, params, offset)
    size = float(np.max(np.linalg.norm(verts[:, :3], axis=1)))
    hits = misses = 0
    for _ in range(300):
        o = rng.normal(size=3)
        o *= 3.0 * size / np.linalg.norm(o)
        target = rng.uniform(-size, size, 3)
        d = target - o
        t_exact = ray_shape(kind, params, offset, o, d)
        t_mesh, normal = ray_mesh(verts, idx, o, d, normal=True)
        if t_exact is None and t_mesh is None:
            misses += 1
            continue
        if t_exact is None or t_mesh is None:
            continue  # grazing rays between the facets and the true surface
        hits += 1
        # the mesh is inscribed in the solid: the facet hit lies within the sagitta of the
        # facets (< 1 % of the size for 32 segments) of the true surface, measured across
        # the facet (a grazing ray runs a long way within that thin layer)
        gap = abs(t_exact - t_mesh) * np.linalg.norm(d)
        across = gap * abs(normal @ d) / np.linalg.norm(d)
        assert across < 0.01 * size, (kind, o, d)
        # the true surface comes first (up to the float32 rounding of the mesh)
        assert t_exact * np.linalg.norm(d) <= t_mesh * np.linalg.norm(d) + 1e-6 * size
    assert hits > 50 and misses > 20


def test_ray_from_inside_leaves_through_the_surface():
    t = ray_shape("sphere", {"radius": 1.0}, np.zeros(3), np.zeros(3), np.array([0.0, 0.0, 2.0]))
    assert t == pytest.approx(0.5)


def test_cone_stands_on_its_apex_like_the_gyro_top():
    """The apex is at body z = -3H/4: the gyro top's pivot point (scenarios.gyro_top)."""
    from rtrigid import scenarios

    sim = scenarios.build("gyro_top")
    h = sim.model.bodies[0].shape.params["height"]
    verts, _ = meshes.shape_mesh("cone", sim.model.bodies[0].shape.params)
    assert verts[:, 2].min() == pytest.approx(-0.75 * h)
    x, q = sim.pose(0)
    apex_world = scene.rotation(q) @ np.array([0.0, 0.0, -0.75 * h]) + x
    assert np.allclose(apex_world, sim.joints()[0]["anchor"], atol=1e-12)


def test_camera_projection_and_ray_are_inverse():
    cam = OrbitCamera(target=(0.1, -0.2, 0.3), distance=2.5, yaw=0.7, pitch=0.4)
    cam.resize(640, 360)
    rng = np.random.default_rng(3)
    for _ in range(20):
        p = cam.target + rng.uniform(-0.5, 0.5, 3)
        px, py = cam.project(p)
        o, d = cam.ray(px, py)
        # the ray through the projected pixel passes through the point
        assert np.linalg.norm(np.cross(p - o, d)) < 1e-9
    cx, cy = cam.project(cam.target)
    assert (cx, cy) == pytest.approx((320.0, 180.0))
    with pytest.raises(ValueError, match="behind the camera"):
        cam.project(cam.eye + 2.0 * (cam.eye - cam.target))


def test_camera_orbit_pan_zoom():
    cam = OrbitCamera(distance=2.0)
    cam.resize(400, 300)
    eye = cam.eye.copy()
    cam.orbit(50, 0)
    assert np.linalg.norm(cam.eye - cam.target) == pytest.approx(2.0)
    assert not np.allclose(cam.eye, eye)
    target = cam.target.copy()
    px0 = cam.project(np.zeros(3))
    cam.pan(10, 0)
    # panning right by 10 pixels moves the scene 10 pixels right, at the target's depth
    assert cam.project(target)[0] == pytest.approx(px0[0] + 10.0, abs=1e-6)
    cam.zoom(2)
    assert cam.distance == pytest.approx(2.0 * 0.81)
    cam.reset()
    assert cam.distance == 2.0 and np.allclose(cam.target, 0.0)


def test_joint_markers_for_every_kind():
    kinds = ["spherical", "revolute", "prismatic", "cylindrical", "planar", "fixed", "helical"]
    for kind in kinds:
        axis = None if kind in ("spherical", "fixed") else (0.0, 0.6, 0.8)
        parts = scene.joint_markers({"kind": kind, "parent": -1, "child": 0,
                                     "anchor": np.array([1.0, 2.0, 3.0]), "axis": axis}, 0.1)
        assert parts, kind
        for name, model, color in parts:
            assert name in ("sphere", "cylinder", "box")
            assert np.allclose(model[:3, 3], (1.0, 2.0, 3.0))
            assert np.all(np.isfinite(model))
        if kind in ("revolute", "prismatic", "cylindrical"):
            # pin or rail along the joint axis: the scaled z column is parallel to the axis
            zcol = parts[0][1][:3, 2]
            assert abs(zcol @ np.array([0.0, 0.6, 0.8])) == pytest.approx(np.linalg.norm(zcol))


def test_default_shape_has_the_bodys_inertia():
    kind, params = scene.default_shape(2.0, (0.5, 0.4, 0.3))
    a, b, c = params["half_extents"]
    assert kind == "box"
    assert 2.0 * (b * b + c * c) / 3 == pytest.approx(0.5)
    assert 2.0 * (a * a + c * c) / 3 == pytest.approx(0.4)
    assert 2.0 * (a * a + b * b) / 3 == pytest.approx(0.3)


def test_robot_file_meshes_are_drawn_at_their_link_frames():
    """The panda's link-1 mesh, read by trimesh, placed in the body frame by the loader: its
    drawn vertices, carried to the world by the body pose, are the file's vertices carried by
    the link pose (so the mesh sits at the link frame the file defines)."""
    import os
    import warnings

    import rtrigid as rt
    pybullet_data = pytest.importorskip("pybullet_data")
    trimesh = pytest.importorskip("trimesh")
    root = pybullet_data.getDataPath()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = rt.Simulation(rt.load_model(os.path.join(root, "franka_panda/panda.urdf"),
                                          ignore=("mimic",)), integrator="nullspace_rk4", dt=1e-3)
    sim.set_joint_position("panda_joint1", [0.7])
    sim.set_joint_position("panda_joint2", [-0.4])
    visual = scene.body_visuals(sim)[sim.body_index("panda_link2")]
    drawn = visual.mesh[0][:, :3].astype(np.float64)
    x, q = sim.pose("panda_link2")
    world = drawn @ scene.rotation(q).T + x
    raw = np.asarray(trimesh.load(os.path.join(root, "franka_panda/meshes/visual/link2.obj"),
                                  force="mesh").vertices)
    xl, ql = sim.link_pose("panda_link2")
    expected = raw @ scene.rotation(ql).T + xl
    # every triangle of the file is drawn (vertices split at creases for the shading)
    assert len(visual.mesh[1]) == len(trimesh.load(os.path.join(
        root, "franka_panda/meshes/visual/link2.obj"), force="mesh").faces)
    assert np.allclose(world.min(axis=0), expected.min(axis=0), atol=1e-5)
    assert np.allclose(world.max(axis=0), expected.max(axis=0), atol=1e-5)
    # link 0, welded to the world, is drawn where the file puts it: at the world origin
    base, _ = scene.world_visual(sim)
    raw0 = np.asarray(trimesh.load(os.path.join(root, "franka_panda/meshes/collision/link0.obj"),
                                   force="mesh").vertices)
    assert np.allclose(base[0][:, :3].min(axis=0), raw0.min(axis=0), atol=1e-5)
    # picking hits the drawn mesh: a ray from outside through the mesh's centre
    centre = 0.5 * (drawn.min(axis=0) + drawn.max(axis=0))
    t = ray_shape(visual.kind, visual.params, visual.offset, centre + np.array([0, 0, 5.0]),
                  np.array([0.0, 0.0, -1.0]), visual.mesh)
    assert t is not None and 0.0 < t < 5.0


def test_missing_mesh_file_is_a_warning_and_a_placeholder(tmp_path):
    import rtrigid as rt
    path = tmp_path / "m.urdf"
    path.write_text(
        '<robot name="m"><link name="base"/><joint name="j" type="revolute"><parent link="base"/>'
        '<child link="arm"/><axis xyz="0 1 0"/></joint><link name="arm"><inertial>'
        '<mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>'
        '</inertial><visual><geometry><mesh filename="package://nowhere/arm.stl"/></geometry>'
        '</visual><visual><origin xyz="0 0 -0.5"/><geometry><sphere radius="0.1"/></geometry>'
        '<material name="red"><color rgba="1 0 0 1"/></material></visual></link></robot>')
    with pytest.warns(UserWarning, match="mesh files not found .*line"):
        model = rt.load_model(str(path))
    sim = rt.Simulation(model, integrator="nullspace_rk4", dt=1e-3)
    visual = scene.body_visuals(sim)[0]
    cube = meshes.box((meshes.PLACEHOLDER_HALF,) * 3)
    sphere = meshes.sphere(0.1)
    assert len(visual.mesh[0]) == len(cube[0]) + len(sphere[0])
    assert visual.color == (1.0, 0.0, 0.0)
    assert np.allclose(visual.mesh[0][:len(cube[0]), :3].max(axis=0), meshes.PLACEHOLDER_HALF)
    assert visual.mesh[0][len(cube[0]):, 2].min() == pytest.approx(-0.6, abs=1e-6)
