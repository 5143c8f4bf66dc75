"""Model builder: bodies, joints and force elements, each argument checked as it is added.

A :class:`Model` is a plain description assembled in Python; a bad argument is refused with a
``ValueError`` that names it.  :class:`rtrigid.Simulation` freezes it into the flat arrays of
the backend that fits it (see :mod:`rtrigid.backends`); later edits of the model do not reach
a simulation built from it.

Frames.  Each body frame sits at the centre of mass with its axes along the principal axes of
inertia; ``inertia`` is given as the three principal moments about the centre of mass.  Every
body has exactly one *inbound joint* (:meth:`Model.inbound_joints`): the joint that holds it to
its parent body or to the world -- one added with :meth:`Model.add_joint`, the spherical joint
to the world of :meth:`Model.attach_to_world` (the top's tip), or else a free joint.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rtrigid.geoms import make_geoms, shape_geoms
from rtrigid.joints import KINDS, USER_KINDS, check_axes
from rtrigid.model_records import (  # noqa: F401  (the records: importable from here too)
    SHAPES,
    PART_TYPES,
    check_inertia,
    Shape,
    Body,
    Ground,
    Spring,
    Joint,
    LIMITED_KINDS,
    Coupling,
    make_coupling,
    check_limits,
    Actuator,
    ACTUATOR_KINDS,
)
from rtrigid.validate import (  # noqa: F401  (check_contact, check_spin_friction: also from here)
    as_scalar,
    as_vector,
    check_contact,
    check_spin_friction,
    unit_vector,
)


class Model:
    """Builder for a set of rigid bodies, their world attachments and force elements.

    >>> m = Model(gravity=(0, 0, -9.81))
    >>> top = m.add_body("top", mass=0.5, inertia=(1e-3, 1e-3, 4e-4))
    >>> m.attach_to_world(top, point_body=(0, 0, -0.075))
    """

    def __init__(self, gravity=(0.0, 0.0, -9.81)):
        self.gravity = as_vector(gravity, 3, "gravity")
        self.bodies: list[Body] = []
        self.springs: list[Spring] = []
        self.joints: list[Joint] = []
        # filled by rtrigid.load_model: link name -> (body index or -1 for the world, link
        # origin in the body frame, link axes -> body axes quaternion); and joint name -> what
        # the file says about the joint that the model does not simulate (limits, effort, ...)
        self.links: dict[str, tuple] = {}
        self.joint_info: dict[str, dict] = {}
        self.world_shape: Shape | None = None  # what robot files draw on links welded to the world
        self.actuators: list[Actuator] = []
        self.grounds: list[Ground] = []
        self.loop_joints: list[Joint] = []  # add_loop_joint: cut joints closing loops
        self.couplings: list[Coupling] = []  # add_coupling: q_joint = offset + ratio q_source
        self._geoms = []  # the Geom records, in handle order (see the geoms property)
        self.excluded: set[tuple[int, int]] = set()  # exclude_contacts: body pairs (a < b)
        # set by rtrigid.load_model: the file's own time step (None: the file gives none) and
        # what the loader mapped, approximated and ignored (rtrigid.loaders.report.LoadReport)
        self.timestep: float | None = None
        self.load_report = None

    # -- bodies -------------------------------------------------------------------------
    def add_body(
        self,
        name,
        mass,
        inertia,
        *,
        shape=None,
        allow_nonphysical_inertia=False,
        massless=False,
        friction=0.5,
        restitution=0.0,
        collide=True,
        torsional_friction=0.0,
        rolling_friction=0.0,
        kinematic=False,
    ):
        """Add a rigid body and return its index.

        ``massless=True`` (mass and inertia then 0) adds a link between two joints, as
        :func:`rtrigid.load_model` does for a file body with several joints: it must carry a
        child joint.

        ``inertia``: principal moments (I1, I2, I3) about the centre of mass, body axes.
        ``shape``: optional render shape, ``(kind, params)`` or a :class:`Shape`, with kind one
        of box (half_extents), sphere (radius), cylinder/capsule (radius, half_length),
        cone (radius, height; apex at -3 height/4 on the z axis, base centre at +height/4, as the
        gyro top stands on its apex), torus (radius of the centre circle, tube_radius; about z).
        Params may add ``offset`` (3,), ``axis`` (3,: the shape's z axis in the body frame) and
        ``color`` (r, g, b).  A list of such shapes draws the body as their union (a racket, a
        gimbal ring with its pins, a marked body).  Shapes are drawn only: they do not change
        the mass or the inertia.

        Contact (:mod:`rtrigid.contact`): the shape is also the body's collision shape unless
        ``collide=False`` (a ``visuals`` shape never collides).  ``friction`` (Coulomb's
        coefficient, >= 0) and ``restitution`` (in [0, 1]: the fraction of the approach speed
        it rebounds with) combine with the other side's as sqrt(mu_a mu_b) and max(e_a, e_b).
        ``torsional_friction`` and ``rolling_friction`` (lengths in m, >= 0, default 0: off)
        are MuJoCo's condim 4 and 6 options: at each contact a torque about the normal up to
        torsional_friction x the normal force resists spinning, and a torque about the
        tangents up to rolling_friction x the normal force resists rolling.  A pair's value
        is the larger of its two sides' (as MuJoCo's default), so one side alone turns it on.

        ``kinematic=True``: a body the user moves (a moving platform, a conveyor's pallet, a
        robot's target that pushes): it keeps its velocity and angular velocity (body axes)
        through each step, whatever gravity, loads, impulses or contacts do, until
        :meth:`Simulation.set_kinematic_target` (or ``set_velocity``) sets new ones; to the
        bodies it touches it is an infinite mass that carries them by friction.  It touches
        dynamic bodies only (not grounds, scenery or other kinematic bodies) and takes no
        joint or pivot.  Its ``mass`` and ``inertia`` count in :meth:`Simulation.energy`
        and :meth:`Simulation.momentum` only.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if any(b.name == name for b in self.bodies):
            raise ValueError(f"name: a body called {name!r} already exists")
        if massless:
            if as_scalar(mass, "mass") != 0.0 or np.any(as_vector(inertia, 3, "inertia")):
                raise ValueError("mass: a massless body has mass and inertia 0")
            mass, inertia = 0.0, np.zeros(3)
        else:
            mass = as_scalar(mass, "mass", positive=True)
            inertia = check_inertia(inertia, allow_nonphysical_inertia)
        mu, e = check_contact(friction, restitution)
        mu_t, mu_r = check_spin_friction(torsional_friction, rolling_friction)
        for what, flag in (("collide", collide), ("kinematic", kinematic)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ValueError(f"{what}: expected True or False, got {flag!r}")
        if kinematic and massless:
            raise ValueError("kinematic: a massless link cannot be kinematic")
        body = Body(
            name,
            mass,
            inertia,
            self.check_shape(shape),
            friction=mu,
            restitution=e,
            collide=bool(collide),
            torsional_friction=mu_t,
            rolling_friction=mu_r,
            kinematic=bool(kinematic),
        )
        self.bodies.append(body)
        self._geoms.extend(shape_geoms(len(self.bodies) - 1, body))
        return len(self.bodies) - 1

    # -- geoms ---------------------------------------------------------------------------
    def add_geom(
        self,
        body,
        kind,
        *,
        pos=(0.0, 0.0, 0.0),
        quat=(1.0, 0.0, 0.0, 0.0),
        friction=0.5,
        restitution=0.0,
        torsional_friction=0.0,
        rolling_friction=0.0,
        contype=1,
        conaffinity=1,
        **params,
    ):
        """Add a collision geom to ``body`` (an index or name; ``None``: static scenery on
        the world) and return its handle, an index into :attr:`geoms`.

        ``kind`` and its ``params`` (see :mod:`rtrigid.geoms`): ``sphere`` (radius),
        ``capsule`` (radius, half_length), ``box`` (half_extents), ``cylinder`` (radius,
        half_length), ``cone`` (radius, height), ``ellipsoid`` (radii), ``convex``
        (vertices (N, 3): their convex hull), ``mesh`` (file, scale=1: one convex hull per
        object in the file; returns the tuple of the handles, one per object),
        ``heightfield`` (heights (ny, nx), size (sx, sy); the world only).  ``pos``,
        ``quat``: the geom's frame in the body frame (the body's centre of mass and
        principal axes; world for scenery); :func:`rtrigid.mass_properties` places pieces
        around a body described by them.  ``friction``, ``restitution``,
        ``torsional_friction``, ``rolling_friction``: as :meth:`add_body`'s, per geom.
        ``contype``, ``conaffinity``: MuJoCo's bits; two geoms may touch when
        ``(contype_a & conaffinity_b) or (contype_b & conaffinity_a)`` (a ground has both
        1).  Geoms do not change a body's mass or inertia.  ``ValueError`` naming the field
        (for a mesh file: the file and the geom) and nothing added on bad input.
        """
        records = make_geoms(
            self,
            body,
            kind,
            pos,
            quat,
            friction,
            restitution,
            torsional_friction,
            rolling_friction,
            contype,
            conaffinity,
            params,
        )
        first = len(self._geoms)
        self._geoms.extend(records)
        if kind == "mesh":
            return tuple(range(first, len(self._geoms)))
        return first

    @property
    def geoms(self):
        """Every geom, in handle order (a tuple of read-only :class:`rtrigid.geoms.Geom`):
        those :meth:`add_body` made of a ``shape`` (with the body's present contact
        coefficients) and those of :meth:`add_geom`."""
        out = []
        for g in self._geoms:
            if g.source == "shape":
                body = self.bodies[g.body]
                g = replace(
                    g,
                    friction=body.friction,
                    restitution=body.restitution,
                    torsional_friction=body.torsional_friction,
                    rolling_friction=body.rolling_friction,
                )
            out.append(g)
        return tuple(out)

    def exclude_contacts(self, body_a, body_b):
        """Let bodies ``body_a`` and ``body_b`` (indices or names) never collide.  (Bodies a
        joint joins directly never do: a body does not touch its parent.)"""
        try:
            a = self.body_index(body_a)
        except ValueError as e:
            raise ValueError(str(e).replace("body:", "body_a:", 1)) from None
        try:
            b = self.body_index(body_b)
        except ValueError as e:
            raise ValueError(str(e).replace("body:", "body_b:", 1)) from None
        if a == b:
            raise ValueError("body_b: a body does not collide with itself")
        self.excluded.add((min(a, b), max(a, b)))

    def add_ground(
        self,
        height=0.0,
        normal=(0.0, 0.0, 1.0),
        friction=0.5,
        restitution=0.0,
        torsional_friction=0.0,
        rolling_friction=0.0,
    ):
        """Add a ground: the half-space below the plane normal . p = height (world), its
        surface facing ``normal`` (made unit).  Bodies with a collision shape rest on it; a
        tilted normal makes an incline.  ``friction`` and ``restitution`` as for
        :meth:`add_body` (combined per contact as sqrt(mu_a mu_b), max(e_a, e_b)), and
        ``torsional_friction``, ``rolling_friction`` too (the pair takes the larger).  Returns
        the ground's index (``contacts()`` reports ground contacts with ``other`` None).
        """
        h = as_scalar(height, "height")
        n = unit_vector(normal, "normal")
        mu, e = check_contact(friction, restitution)
        mu_t, mu_r = check_spin_friction(torsional_friction, rolling_friction)
        self.grounds.append(Ground(h, n, mu, e, mu_t, mu_r))
        return len(self.grounds) - 1

    def jointed_pairs(self):
        """The set of body pairs (a, b), a < b, that a joint joins
        directly: they do not collide with each other."""
        pairs = {tuple(sorted((j.parent, j.child))) for j in self.joints if j.parent >= 0}
        return pairs

    @staticmethod
    def check_shape(shape):
        """A body's ``shape`` checked and normalised: None, a :class:`Shape`, a tuple of
        them for a list, or ``ValueError`` naming the offending field."""
        if shape is None or isinstance(shape, Shape):
            return shape
        if isinstance(shape, list):
            if not shape:
                raise ValueError("shape: an empty list of shapes")
            return tuple(Model.check_shape(part) for part in shape)
        try:
            kind, params = shape
        except (TypeError, ValueError):
            raise ValueError(f"shape: expected (kind, params), got {shape!r}") from None
        if kind not in SHAPES:
            raise ValueError(f"shape: unknown kind {kind!r}; known: {sorted(SHAPES)}")
        if kind == "visuals":
            return Shape(kind, {"parts": Model._check_parts(params.get("parts"))})
        clean = {}
        for key in SHAPES[kind]:
            if key not in params:
                raise ValueError(f"shape: {kind} needs {key!r}")
            if key == "half_extents":
                clean[key] = as_vector(params[key], 3, f"shape.{key}")
                if np.any(clean[key] <= 0.0):
                    raise ValueError(f"shape.{key}: must be > 0, got {clean[key].tolist()}")
            else:
                clean[key] = as_scalar(params[key], f"shape.{key}", positive=True)
        offset = as_vector(params.get("offset", (0.0, 0.0, 0.0)), 3, "shape.offset")
        axis = unit_vector(params.get("axis", (0.0, 0.0, 1.0)), "shape.axis")
        color = params.get("color")
        if color is not None:
            color = as_vector(color, 3, "shape.color")
            if np.any(color < 0.0) or np.any(color > 1.0):
                raise ValueError(f"shape.color: components must be in [0, 1], got {color.tolist()}")
            color = tuple(float(c) for c in color)
        return Shape(kind, clean, offset, axis, color)

    @staticmethod
    def _check_parts(parts):
        if not isinstance(parts, (list, tuple)) or not parts:
            raise ValueError("shape.parts: expected a non-empty list of parts")
        out = []
        for part in parts:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in PART_TYPES:
                raise ValueError(
                    f"shape.parts: a part's type must be one of {sorted(PART_TYPES)}, got {kind!r}"
                )
            missing = [k for k in PART_TYPES[kind] if k not in part]
            if missing:
                raise ValueError(f"shape.parts: a {kind} part needs {missing}")
            clean = dict(part)
            clean["pos"] = as_vector(part.get("pos", (0.0, 0.0, 0.0)), 3, "shape.parts.pos")
            clean["quat"] = as_vector(part.get("quat", (1.0, 0.0, 0.0, 0.0)), 4, "shape.parts.quat")
            clean.setdefault("color", None)
            out.append(clean)
        return out

    def body_index(self, body):
        """Resolve a body index or name; ``ValueError`` naming ``body`` if there is none."""
        if isinstance(body, (int, np.integer)) and not isinstance(body, bool):
            if 0 <= body < len(self.bodies):
                return int(body)
            raise ValueError(f"body: index {body} out of range (model has {len(self.bodies)})")
        if isinstance(body, str):
            for i, b in enumerate(self.bodies):
                if b.name == body:
                    return i
            raise ValueError(
                f"body: no body named {body!r}; known: {[b.name for b in self.bodies]}"
            )
        raise ValueError(f"body: expected an index or a name, got {body!r}")

    # -- attachments and force elements ------------------------------------------------
    def attach_to_world(self, body, point_body, point_world=(0.0, 0.0, 0.0)):
        """Hold body point ``point_body`` (body frame, from the centre of mass) at ``point_world``.

        This is a spherical joint to the world: the body keeps three rotational freedoms.
        Returns the joint's name, ``pivot_<body>``, which the simulation's joint queries take.
        """
        i = self.body_index(body)
        b = self.bodies[i]
        if b.pivot_body is not None or any(j.child == i for j in self.joints):
            raise ValueError(f"body: {b.name!r} is already attached to the world or jointed")
        b.pivot_body = as_vector(point_body, 3, "point_body")
        b.pivot_world = as_vector(point_world, 3, "point_world")
        return f"pivot_{b.name}"

    def add_spring(self, body, point_body, anchor_world, stiffness, rest_length=0.0):
        """Linear spring from a body point to a world anchor; ``rest_length=0`` is a bushing.

        Potential ½ k (|d| - L0)², d the vector from anchor to the body point.
        """
        i = self.body_index(body)
        self.springs.append(
            Spring(
                i,
                as_vector(point_body, 3, "point_body"),
                as_vector(anchor_world, 3, "anchor_world"),
                as_scalar(stiffness, "stiffness", positive=True),
                as_scalar(rest_length, "rest_length", nonnegative=True),
            )
        )
        return len(self.springs) - 1

    def add_spring_between(self, body_a, point_a, body_b, point_b, stiffness, rest_length=0.0):
        """Linear spring between a point of ``body_a`` and a point of ``body_b`` (body frames).

        Potential ½ k (|d| - L0)², d from one point to the other; ``rest_length=0`` is a
        bushing.  A model with such a spring is stepped as a multibody system.
        """
        a = self.body_index(body_a)
        b = self.body_index(body_b)
        if a == b:
            raise ValueError("body_b: a spring needs two different bodies")
        self.springs.append(
            Spring(
                a,
                as_vector(point_a, 3, "point_a"),
                as_vector(point_b, 3, "point_b"),
                as_scalar(stiffness, "stiffness", positive=True),
                as_scalar(rest_length, "rest_length", nonnegative=True),
                other=b,
            )
        )
        return len(self.springs) - 1

    def add_joint(
        self,
        kind,
        parent,
        child,
        *,
        anchor_parent=(0.0, 0.0, 0.0),
        anchor_child=(0.0, 0.0, 0.0),
        axis_parent=None,
        axis_child=None,
        stiffness=0.0,
        rest=0.0,
        damping=0.0,
        limits=None,
        limit_restitution=0.0,
        name=None,
        rotation=None,
        position=None,
        armature=0.0,
        friction=0.0,
    ):
        """Join ``child`` to ``parent`` (a body, or ``None`` / ``"world"``) by a lower pair.

        ``kind``: spherical, revolute, prismatic, cylindrical, planar or fixed.
        ``anchor_parent`` / ``anchor_child``: the joint point in each body's frame (from its
        centre of mass; world coordinates for the world).  ``axis_parent`` / ``axis_child``:
        the joint axis in each frame (the plane normal for planar joints); give one and the
        other is taken equal.  At zero joint coordinates the child is turned so that its axis
        lies along the parent's by the smallest rotation (no rotation for spherical and fixed
        joints).  ``stiffness``, ``rest``, ``damping``: a joint spring -k (c - rest) and damper
        -d c' on a revolute or prismatic joint's coordinate c.  Each body has at most one
        parent joint (a tree); a joint that would close a loop is refused here: close
        loops with :meth:`add_loop_joint`.

        ``limits``: ``(lower, upper)`` of a revolute or prismatic joint's coordinate (rad or
        m), lower < upper, either may be -inf / +inf.  A limit is hard and unilateral (it
        only pushes) and gains no energy; ``limit_restitution`` in [0, 1] (default 0: the
        joint stops dead at the limit) is the fraction of the approach rate it rebounds with
        (``nullspace_rk4``; the energy-momentum schemes keep limits inelastic and refuse it).
        The coordinates start at zero; if zero lies outside the limits the joint starts at
        the nearer limit.  ``position``: the initial coordinates instead (one number per
        coordinate, within the limits; a spherical joint's relative quaternion, normalised);
        a mechanism with loop joints starts from them (:meth:`add_loop_joint`).

        ``armature`` (>= 0, kg m^2 or kg): a revolute or prismatic joint's rotor inertia, as
        MuJoCo's joint armature: it adds to the coordinate's diagonal of the joint-space mass
        matrix and 1/2 armature c'^2 to the kinetic energy (a geared motor's rotor reflected
        through its gear, without gyroscopic coupling).  ``nullspace_rk4`` and
        ``semi_implicit_euler`` step it; the other schemes refuse it.

        ``friction`` (>= 0, N m or N): a revolute or prismatic joint's Coulomb friction, as
        MuJoCo's ``frictionloss`` and URDF's ``<dynamics friction>``: a torque (force) of at
        most this size that opposes the joint's motion, and holds the joint still while the
        other forces on it need no more (stick and slip, see ``docs/guide/joints.md``).
        ``nullspace_rk4`` and ``semi_implicit_euler`` step it, without loop joints; the other
        schemes refuse it.

        Returns the joint's handle, which every joint query of the simulation takes (as it
        takes the joint's name).
        """
        p, c = self._joint_bodies(kind, parent, child)
        if any(j.child == c for j in self.joints) or self.bodies[c].pivot_body is not None:
            raise ValueError(
                f"child: {self.bodies[c].name!r} already has a parent joint; close "
                "a loop with add_loop_joint (each body has one parent joint)"
            )
        # walking up from the parent must not reach the child (that would close a loop)
        a = p
        while a >= 0:
            if a == c:
                raise ValueError(
                    "parent: this joint would close a loop; close loops with add_loop_joint"
                )
            a = next((j.parent for j in self.joints if j.child == a), -1)
        joint = self._joint_record(
            kind,
            p,
            c,
            anchor_parent=anchor_parent,
            anchor_child=anchor_child,
            axis_parent=axis_parent,
            axis_child=axis_child,
            stiffness=stiffness,
            rest=rest,
            damping=damping,
            limits=limits,
            limit_restitution=limit_restitution,
            name=name,
            rotation=rotation,
        )
        joint.position = self._initial_position(joint, position)
        joint.armature = as_scalar(armature, "armature", nonnegative=True)
        if joint.armature and kind not in LIMITED_KINDS:
            raise ValueError(
                f"armature: only {' and '.join(LIMITED_KINDS)} joints take an armature, not {kind}"
            )
        joint.friction = as_scalar(friction, "friction", nonnegative=True)
        if joint.friction and kind not in LIMITED_KINDS:
            raise ValueError(
                f"friction: only {' and '.join(LIMITED_KINDS)} joints take a joint friction, "
                f"not {kind}"
            )
        self.joints.append(joint)
        return len(self.joints) - 1

    @staticmethod
    def _initial_position(joint, position):
        """The checked ``position`` of :meth:`add_joint` (None stays None)."""
        if position is None:
            return None
        kind = KINDS[joint.kind]
        if kind.nq == 0:
            raise ValueError(f"position: a {joint.kind} joint has no coordinates")
        if kind.quaternion >= 0:  # a spherical joint: the relative unit quaternion
            value = as_vector(position, 4, "position")
            norm = np.linalg.norm(value)
            if not norm > 1e-12:
                raise ValueError(f"position: expected a unit quaternion, got {value.tolist()}")
            return value / norm
        if isinstance(position, (list, tuple, np.ndarray)):
            value = as_vector(position, kind.nq, "position")
        else:
            value = as_vector([as_scalar(position, "position")], kind.nq, "position")
        lo, hi = joint.limits
        if kind.nq == 1 and not lo <= value[0] <= hi:
            raise ValueError(f"position: {value[0]} is outside the limits [{lo}, {hi}]")
        return value

    def _joint_bodies(self, kind, parent, child):
        """(parent index or -1, child index) of a new joint, checked."""
        if kind not in USER_KINDS:
            raise ValueError(f"kind: unknown joint kind {kind!r}; known: {list(USER_KINDS)}")
        p = (
            -1
            if parent is None or (isinstance(parent, str) and parent == "world")
            else self.body_index(parent)
        )
        try:
            c = self.body_index(child)
        except ValueError as e:
            raise ValueError(str(e).replace("body:", "child:", 1)) from None
        if p == c:
            raise ValueError("child: a body cannot be jointed to itself")
        return p, c

    def _joint_record(
        self,
        kind,
        p,
        c,
        *,
        anchor_parent,
        anchor_child,
        axis_parent,
        axis_child,
        stiffness,
        rest,
        damping,
        limits,
        limit_restitution,
        name,
        rotation,
    ):
        """The checked :class:`Joint` of :meth:`add_joint` / :meth:`add_loop_joint`."""
        ap = as_vector(anchor_parent, 3, "anchor_parent")
        ac = as_vector(anchor_child, 3, "anchor_child")
        up = uc = np.array([0.0, 0.0, 1.0])
        if KINDS[kind].axial:
            if axis_parent is None and axis_child is None:
                raise ValueError(f"axis_parent: a {kind} joint needs an axis")
            up = unit_vector(axis_parent if axis_parent is not None else axis_child, "axis_parent")
            uc = unit_vector(axis_child if axis_child is not None else axis_parent, "axis_child")
        elif axis_parent is not None or axis_child is not None:
            raise ValueError(f"axis_parent: a {kind} joint takes no axis")
        k = as_scalar(stiffness, "stiffness", nonnegative=True)
        d = as_scalar(damping, "damping", nonnegative=True)
        rest = as_scalar(rest, "rest")
        if (k or d or rest) and not KINDS[kind].spring:
            springy = [name for name, jk in KINDS.items() if jk.spring]
            raise ValueError(
                f"stiffness: only {' and '.join(springy)} joints take a spring or "
                f"damper, not {kind}"
            )
        if rotation is not None:
            r = as_vector(rotation, 4, "rotation")
            if abs(np.linalg.norm(r) - 1.0) > 1e-9:
                raise ValueError(f"rotation: expected a unit quaternion, got {r.tolist()}")
            rotation = r
        check_axes(kind, up, uc, rotation)
        limits, bounce = check_limits(kind, limits, limit_restitution)
        if name is None:
            name = f"{kind}_{self.bodies[c].name}"
        self._check_new_name(name)
        return Joint(name, kind, p, c, ap, ac, up, uc, k, rest, d, rotation, limits, bounce)

    def add_loop_joint(
        self,
        kind,
        parent,
        child,
        *,
        anchor_parent=(0.0, 0.0, 0.0),
        anchor_child=(0.0, 0.0, 0.0),
        axis_parent=None,
        axis_child=None,
        name=None,
        rotation=None,
    ):
        """Close a loop: join ``child`` to ``parent`` by a lower pair that is not part of the
        tree (a *cut joint*); the arguments are those of :meth:`add_joint`.

        The bodies keep their tree joints; the cut joint becomes constraint rows on the
        tree's coordinates (:mod:`rtrigid.backends.tree.loops`), held exactly at velocity
        level and by a projection at position level.  Redundant rows (a planar four-bar of
        spatial revolute joints) are allowed.  The simulation closes the loops from the
        initial coordinates and refuses a locked mechanism (zero mobility) or a singular
        configuration.  Loop joints take no spring, damper, limits or actuator, and only
        ``nullspace_rk4`` steps them.  Returns the joint's name (``loop_<child>`` by default).
        """
        p, c = self._joint_bodies(kind, parent, child)
        if name is None:
            name = f"loop_{self.bodies[c].name}"
        joint = self._joint_record(
            kind,
            p,
            c,
            anchor_parent=anchor_parent,
            anchor_child=anchor_child,
            axis_parent=axis_parent,
            axis_child=axis_child,
            stiffness=0.0,
            rest=0.0,
            damping=0.0,
            limits=None,
            limit_restitution=0.0,
            name=name,
            rotation=rotation,
        )
        self.loop_joints.append(joint)
        return joint.name

    def _check_new_name(self, name):
        taken = [j.name for j in self.joints + self.loop_joints]
        taken += [c.name for c in self.couplings]
        if not isinstance(name, str) or name in taken:
            raise ValueError(f"name: joint name {name!r} is not a new string")

    def add_coupling(self, joint, source, ratio=1.0, offset=0.0, *, name=None):
        """Couple two joints: ``q_joint = offset + ratio * q_source`` at every instant (URDF's
        ``<mimic multiplier offset>``, MuJoCo's joint equality with ``polycoef="offset
        ratio 0 0 0"``, a gear pair or a rack).  Both are revolute or prismatic joints of
        :meth:`add_joint` (names or handles); a joint follows at most one source.

        The coupling is a constraint row on the tree's coordinates, held as the loop joints
        are (:meth:`add_loop_joint`: exactly at velocity level, by a projection at position
        level, its reaction a pair of joint forces f on ``joint`` and -ratio * f on
        ``source`` that does no work), so the schemes that step loops step it.  The
        simulation starts from the initial coordinates moved to the nearest (mass-weighted)
        coupled ones.  Returns the coupling's name (``coupling_<joint>`` by default)."""
        follower, src = (self.joints[self.joint_index(j)] for j in (joint, source))
        coupling = make_coupling(follower, src, ratio, offset, name, self.couplings)
        self._check_new_name(coupling.name)
        self.couplings.append(coupling)
        return coupling.name

    def joint_index(self, joint):
        """Resolve a joint handle (what :meth:`add_joint` returned) or name of this model."""
        if isinstance(joint, (int, np.integer)) and not isinstance(joint, bool):
            if 0 <= joint < len(self.joints):
                return int(joint)
            raise ValueError(
                f"joint: index {joint} out of range (model has {len(self.joints)} "
                "joints added with add_joint)"
            )
        if isinstance(joint, str):
            for i, j in enumerate(self.joints):
                if j.name == joint:
                    return i
            raise ValueError(
                f"joint: no joint named {joint!r} added with add_joint; known: "
                f"{[j.name for j in self.joints]}"
            )
        raise ValueError(f"joint: expected a joint handle or name, got {joint!r}")

    def add_actuator(
        self,
        joint,
        kind,
        *,
        gear=1.0,
        kp=None,
        kv=None,
        force_range=None,
        ctrl_range=None,
        name=None,
    ):
        """Drive a revolute or prismatic joint; return the actuator's handle.

        MuJoCo's actuators on a joint: the actuator length is l = gear * c (c the joint
        coordinate), its force f is

        - ``"motor"``: f = u (the control is the force, N m or N before the gear);
        - ``"position"``: f = kp (u - l) - kv l' (a servo to the target u; kp > 0 needed,
          kv >= 0, default 0);
        - ``"velocity"``: f = kv (u - l') (kv > 0 needed),

        clipped to ``force_range`` (lo, hi) if given, and the joint receives gear * f.
        ``ctrl_range`` (lo, hi) clamps the controls the simulation is given (MuJoCo's
        ctrllimited).  Controls start at 0 (:meth:`Simulation.set_control`).  How each
        integrator treats the servos (exact work, unconditional stability, RK4's stable
        range) is in :meth:`Simulation.set_control`.
        """
        j = self.joint_index(joint)
        kind_j = self.joints[j].kind
        if kind_j not in ("revolute", "prismatic"):
            raise ValueError(
                f"joint: actuators drive revolute or prismatic joints, not "
                f"{kind_j} ({self.joints[j].name!r})"
            )
        if kind not in ACTUATOR_KINDS:
            raise ValueError(f"kind: unknown actuator kind {kind!r}; known: {list(ACTUATOR_KINDS)}")
        gear = as_scalar(gear, "gear")
        if gear == 0.0:
            raise ValueError("gear: must be non-zero")
        need = {"motor": (), "position": ("kp",), "velocity": ("kv",)}[kind]
        gains = {}
        for key, value in (("kp", kp), ("kv", kv)):
            if value is None:
                if key in need:
                    raise ValueError(f"{key}: a {kind} actuator needs {key} > 0")
                gains[key] = 0.0
                continue
            if kind == "motor" or (kind == "velocity" and key == "kp"):
                raise ValueError(f"{key}: a {kind} actuator takes no {key}")
            gains[key] = as_scalar(value, key, positive=key in need, nonnegative=True)
        fr = self._range(force_range, "force_range")
        cr = self._range(ctrl_range, "ctrl_range")
        if name is None:
            name = f"{kind}_{self.joints[j].name}"
        if not isinstance(name, str) or not name or any(a.name == name for a in self.actuators):
            raise ValueError(f"name: actuator name {name!r} is not a new non-empty string")
        self.actuators.append(Actuator(name, j, kind, gear, gains["kp"], gains["kv"], fr, cr))
        return len(self.actuators) - 1

    @staticmethod
    def _range(value, name):
        """(lo, hi) with lo < hi, or (-inf, inf) for None."""
        if value is None:
            return (-np.inf, np.inf)
        lo, hi = as_vector(value, 2, name)
        if not lo < hi:
            raise ValueError(f"{name}: expected lo < hi, got ({lo}, {hi})")
        return (float(lo), float(hi))

    def inbound_joints(self) -> list[Joint]:
        """Each body's inbound joint, in body order (a new list of the model's own records).

        A body no :meth:`add_joint` holds gets a spherical joint to the world named
        ``pivot_<body>`` if it was attached with :meth:`attach_to_world`, else a free joint
        named ``free_<body>``.
        """
        inbound = [None] * len(self.bodies)
        for j in self.joints:
            inbound[j.child] = j
        zero, ez = np.zeros(3), np.array([0.0, 0.0, 1.0])
        for b, body in enumerate(self.bodies):
            if inbound[b] is None:
                if body.pivot_body is not None:
                    inbound[b] = Joint(
                        f"pivot_{body.name}",
                        "spherical",
                        -1,
                        b,
                        body.pivot_world.copy(),
                        body.pivot_body.copy(),
                        ez,
                        ez,
                    )
                else:
                    inbound[b] = Joint(
                        body.free_joint or f"free_{body.name}", "free", -1, b, zero, zero, ez, ez
                    )
        return inbound
