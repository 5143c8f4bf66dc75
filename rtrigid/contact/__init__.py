"""Contact and friction: grounds, collision shapes, the contact table and its solve.

:class:`Contacts` freezes what a :class:`~rtrigid.Model` says about contact -- each body's
collision shape, friction and restitution, the grounds -- into flat arrays, owns the contact
table the kernels fill (no allocation in the step), and reads it back for
:meth:`rtrigid.Simulation.contacts`.  The narrow phase is :mod:`.geometry` (against a ground)
and :mod:`.pairs` (between bodies), the shape kinds' table :mod:`.shapes`, the solve
:mod:`.solver`; a backend runs :func:`.solver.resolve` after each free-flight step.
"""
from __future__ import annotations

import hashlib

import numpy as np

from rtrigid.contact.geometry import (
    C_BODY,
    C_DEPTH,
    C_IMPULSE,
    C_NORMAL,
    C_OTHER,
    C_POINT,
    C_WIDTH,
    G_E,
    G_KIND,
    G_MU,
    G_MUR,
    G_MUT,
    G_OFFSET,
    G_P,
    G_RADIUS,
    G_WIDTH,
    MAX_POINTS,
    NONE,
    P_E,
    P_HEIGHT,
    P_MU,
    P_MUR,
    P_MUT,
    P_NORMAL,
    P_WIDTH,
    SHAPE_CODES,
)
from rtrigid.contact.shapes import bounding_radius
from rtrigid.contact.solver import VEL_WIDTH
from rtrigid.model import SHAPES

SWEEPS = 16  # most Gauss-Seidel sweeps over the contacts per step: the solve's budget
PAIR_ROWS = 16  # table rows per body for contacts between bodies


def has_contacts(model) -> bool:
    """True when the model has a ground (bodies collide with each other only then, so far)."""
    return bool(model.grounds)


class Contacts:
    """The frozen contact model of a Model and the contact table of the last step.

    geom (nb, G_WIDTH): per body the shape code (``NONE``: no collision shape, or
    ``collide=False``), its parameters, offset, friction and restitution.  grounds
    (ng, P_WIDTH): normal, height, friction, restitution.  table (nb * ng * MAX_POINTS,
    C_WIDTH): a row per contact found, ``count`` of them.
    """

    def __init__(self, model):
        nb = len(model.bodies)
        self.geom = np.zeros((nb, G_WIDTH))
        for b, body in enumerate(model.bodies):
            shape = body.shape
            row = self.geom[b]
            row[G_KIND] = NONE
            row[G_MU], row[G_E] = body.friction, body.restitution
            row[G_MUT], row[G_MUR] = body.torsional_friction, body.rolling_friction
            if shape is None or not body.collide:
                continue
            if isinstance(shape, tuple):
                raise ValueError(f"shape: body {body.name!r} is drawn as a list of parts, which "
                                 "does not collide yet; give it one shape or collide=False")
            if shape.kind not in SHAPE_CODES:  # (torus, a robot file's visuals: drawn only)
                continue
            if shape.kind != "sphere" and not np.array_equal(shape.axis, (0.0, 0.0, 1.0)):
                raise ValueError(f"shape: body {body.name!r}'s {shape.kind} turned by axis= "
                                 "does not collide yet; keep its axis along the body's z axis "
                                 "or set collide=False")
            row[G_KIND] = SHAPE_CODES[shape.kind]
            values = np.concatenate([np.atleast_1d(shape.params[k])
                                     for k in SHAPES[shape.kind]])
            row[G_P:G_P + len(values)] = values
            row[G_OFFSET:G_OFFSET + 3] = shape.offset
            row[G_RADIUS] = bounding_radius(shape.kind, values)
        self.grounds = np.zeros((len(model.grounds), P_WIDTH))
        for g, ground in enumerate(model.grounds):
            self.grounds[g, P_NORMAL:P_NORMAL + 3] = ground.normal
            self.grounds[g, P_HEIGHT] = ground.height
            self.grounds[g, P_MU], self.grounds[g, P_E] = ground.friction, ground.restitution
            self.grounds[g, P_MUT] = ground.torsional_friction
            self.grounds[g, P_MUR] = ground.rolling_friction
        # room for every ground contact and PAIR_ROWS pair contacts per body; contacts beyond
        # it are dropped (the cost of a step stays bounded)
        self.table = np.zeros((nb * (len(model.grounds) * MAX_POINTS + PAIR_ROWS), C_WIDTH))
        self.count = 0
        self.touched = np.zeros(nb, np.int64)
        self.vel = np.zeros((nb, VEL_WIDTH))  # solver scratch; its last column: the flight gap
        self.lift = np.zeros((nb, 3))
        # order, rank (by body name: results do not depend on the order bodies were added
        # in), the broad phase's sweep order, islands, levels (see contact.solver)
        self.ints = np.zeros((nb, 5), np.int64)
        order = sorted(range(nb), key=lambda b: model.bodies[b].name)
        self.ints[:, 0] = order
        self.ints[order, 1] = np.arange(nb)
        self.ints[:, 2] = order
        # the last step's impulses by contact identity, which start the next solve (state:
        # snapshots keep them)
        self.keys = np.full((1 << int(np.ceil(np.log2(2 * len(self.table)))), 2), -1, np.int64)
        self.lam = np.zeros((len(self.table), 3))
        self.rows = np.zeros(len(self.table), np.int64)
        self.digest = hashlib.sha256(self.geom.tobytes() + self.grounds.tobytes()).digest()

    def state(self):
        """A copy of what a snapshot keeps: the table, its count, the warm-start impulses."""
        return self.table.copy(), self.count, self.keys.copy(), self.lam.copy()

    def set_state(self, state):
        table, self.count, keys, lam = state
        self.table[:], self.keys[:], self.lam[:] = table, keys, lam

    def report(self, names):
        """The contacts of the last step, as :meth:`rtrigid.Simulation.contacts` gives them:
        those that touch (depth > 0) or pushed (a speculative one, within the margin, that
        took an impulse)."""
        out = []
        for row in self.table[:self.count]:
            if row[C_DEPTH] <= 0.0 and not row[C_IMPULSE:C_IMPULSE + 3].any():
                continue
            other = int(row[C_OTHER])
            out.append({"body": int(row[C_BODY]), "name": names[int(row[C_BODY])],
                        "other": None if other < 0 else other,
                        "point": row[C_POINT:C_POINT + 3].copy(),
                        "normal": row[C_NORMAL:C_NORMAL + 3].copy(),
                        "depth": float(row[C_DEPTH]),
                        "impulse": row[C_IMPULSE:C_IMPULSE + 3].copy()})
        return out
