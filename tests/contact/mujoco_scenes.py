"""Random convex geoms as rtrigid world geom rows and as a MuJoCo model, for the narrow-phase
and ray-cast tests and ``scripts/convex_bench.py``.

MuJoCo is the independent reference: each geom is a MuJoCo geom of the same kind and size
(a hull a mesh of its vertices, of which MuJoCo takes the convex hull; a cone, which MuJoCo
lacks, a mesh of ``CONE_SIDES`` rim points and its apex) on a body of its own at the same
pose.
"""
import numpy as np

from rtrigid.contact import convex as cv
from rtrigid.contact.geometry import BOX, CAPSULE, CONE, CYLINDER, ELLIPSOID, HULL, SPHERE

KINDS = {"sphere": SPHERE, "capsule": CAPSULE, "box": BOX, "cylinder": CYLINDER,
         "ellipsoid": ELLIPSOID, "hull": HULL, "cone": CONE}
CONE_SIDES = 512


def random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return q, np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def random_size(kind, rng):
    """Sizes of about 10 cm across."""
    if kind in ("box", "ellipsoid"):
        return rng.uniform(0.015, 0.06, 3)
    if kind == "cone":
        return np.array([rng.uniform(0.02, 0.05), rng.uniform(0.04, 0.1), 0.0])
    return np.array([rng.uniform(0.015, 0.05), rng.uniform(0.01, 0.05), 0.0])


def random_hull_points(rng):
    n = rng.integers(8, 24)
    p = rng.normal(size=(n, 3)) * rng.uniform(0.02, 0.05, 3)
    return p - p.mean(axis=0)


def cone_points(r, h, sides=CONE_SIDES):
    a = np.linspace(0.0, 2 * np.pi, sides, endpoint=False)
    rim = np.stack([r * np.cos(a), r * np.sin(a), np.full(sides, 0.25 * h)], axis=1)
    return np.vstack([rim, [[0.0, 0.0, -0.75 * h]]])


def box_points(half):
    return np.array([[sx * half[0], sy * half[1], sz * half[2]]
                     for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])


class Scene:
    """Geoms as rtrigid rows (``rows (n, W_WIDTH)``, pools ``verts``, ``planes``) and as a
    MuJoCo model: ``add`` them, then ``build()``."""

    def __init__(self, box_mesh=False):
        self.items = []   # (kind name, size, pos, quat, R, points)
        self.box_mesh = box_mesh  # boxes as meshes of their corners in MuJoCo

    def add(self, kind, size, pos, quat, rot, points=None):
        self.items.append((kind, np.asarray(size, float), np.asarray(pos, float),
                           np.asarray(quat, float), np.asarray(rot, float), points))
        return len(self.items) - 1

    def build(self, mujoco_too=True):
        n = len(self.items)
        self.rows = np.zeros((n, cv.W_WIDTH))
        verts, planes = [np.zeros((0, 3))], [np.zeros((0, 4))]
        nv = npl = 0
        for i, (kind, size, pos, _, rot, points) in enumerate(self.items):
            if kind == "hull":
                v, p = cv.hull_pools(points)
                cv.world_geom(self.rows[i], HULL, size, pos, rot, v, nv, npl, len(p))
                verts.append(v)
                planes.append(p)
                nv += len(v)
                npl += len(p)
            else:
                cv.world_geom(self.rows[i], KINDS[kind], size, pos, rot)
        self.verts = np.ascontiguousarray(np.vstack(verts))
        self.planes = np.ascontiguousarray(np.vstack(planes))
        if mujoco_too:
            self.model, self.data = self._mujoco()
        return self

    def _mujoco(self):
        import mujoco

        assets, bodies = [], []
        for i, (kind, size, pos, quat, _, points) in enumerate(self.items):
            p = " ".join(f"{x:.17g}" for x in pos)
            q = " ".join(f"{x:.17g}" for x in quat)
            if kind in ("hull", "cone") or (kind == "box" and self.box_mesh):
                pts = (points if kind == "hull" else cone_points(size[0], size[1])
                       if kind == "cone" else box_points(size))
                assets.append(f'<mesh name="m{i}" vertex="'
                              + " ".join(f"{x:.17g}" for x in pts.ravel()) + '"/>')
                geom = f'type="mesh" mesh="m{i}"'
            else:
                s = size[:3] if kind in ("box", "ellipsoid") else size[:1] if kind == "sphere" \
                    else size[:2]
                geom = f'type="{kind}" size="' + " ".join(f"{x:.17g}" for x in s) + '"'
            bodies.append(f'<body pos="{p}" quat="{q}"><freejoint/>'
                          f'<geom name="g{i}" {geom} margin="0"/></body>')
        xml = ('<mujoco><option ccd_tolerance="1e-12" ccd_iterations="1000">'
               '<flag gravity="disable"/></option><asset>' + "".join(assets)
               + '</asset><worldbody>' + "".join(bodies) + '</worldbody></mujoco>')
        model = mujoco.MjModel.from_xml_string(xml)
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        return model, data


def random_pairs(kind_a, kind_b, count, rng, spacing=1.0, mujoco_too=True, box_mesh=False):
    """``count`` random pairs of geoms of kinds a and b about 10 cm across at random poses
    (most of them overlapping), pair i at x = spacing * i; returns the Scene (geoms 2 i,
    2 i + 1)."""
    scene = Scene(box_mesh)
    for i in range(count):
        for kind in (kind_a, kind_b):
            q, rot = random_rotation(rng)
            pos = np.array([spacing * i, 0.0, 0.0]) + rng.uniform(-0.04, 0.04, 3)
            pts = random_hull_points(rng) if kind == "hull" else None
            scene.add(kind, random_size(kind, rng), pos, q, rot, pts)
    return scene.build(mujoco_too)
