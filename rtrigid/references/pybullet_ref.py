"""PyBullet reference scenes for comparing rtrigid's contacts against PyBullet (Bullet's
sequential-impulse solver with its default settings: 50 solver iterations, split impulse).

The scenes are the physical models of rtrigid's contact scenarios: ``box_stack`` (cubes of
half size ``size`` stacked on a ground plane, at rest) and a box sliding on the ground.
PyBullet multiplies the two friction coefficients of a pair, rtrigid takes their geometric
mean, so every body and the plane get sqrt(friction): each pair then has ``friction`` in both.

``pybullet`` is an optional dependency (the ``dev`` and ``models`` extras): it is imported
only inside the functions that need it; :func:`available` says whether it is installed.  Every
scene runs in its own DIRECT-mode client; :func:`close` ends it.
"""
import math
import statistics
import time

import numpy as np


def available() -> bool:
    """True if the ``pybullet`` module can be imported."""
    try:
        import pybullet  # noqa: F401
    except ImportError:
        return False
    return True


def _world(dt, friction, gravity=9.81):
    """A DIRECT client with gravity along -z and a ground plane at z = 0; returns it."""
    import pybullet as p

    cid = p.connect(p.DIRECT)
    p.setGravity(0.0, 0.0, -gravity, physicsClientId=cid)
    p.setTimeStep(dt, physicsClientId=cid)
    plane = p.createCollisionShape(p.GEOM_PLANE, physicsClientId=cid)
    ground = p.createMultiBody(0.0, plane, physicsClientId=cid)
    p.changeDynamics(ground, -1, lateralFriction=math.sqrt(friction), physicsClientId=cid)
    return cid


def _box(cid, size, mass, friction, position):
    import pybullet as p

    shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=[size] * 3, physicsClientId=cid)
    body = p.createMultiBody(mass, shape, basePosition=list(position), physicsClientId=cid)
    p.changeDynamics(body, -1, lateralFriction=math.sqrt(friction), physicsClientId=cid)
    return body


def box_stack(n, dt, size=0.1, mass=1.0, friction=0.5):
    """(client, bodies): ``n`` cubes stacked on the ground, at rest, as rtrigid's
    ``box_stack``."""
    cid = _world(dt, friction)
    return cid, [_box(cid, size, mass, friction, (0.0, 0.0, size * (2 * k + 1)))
                 for k in range(n)]


def sliding_box(dt, speed=2.0, size=0.1, mass=1.0, friction=0.5):
    """(client, body): a cube resting on the ground, sliding along x at ``speed``."""
    import pybullet as p

    cid = _world(dt, friction)
    body = _box(cid, size, mass, friction, (0.0, 0.0, size))
    p.resetBaseVelocity(body, [speed, 0.0, 0.0], [0.0, 0.0, 0.0], physicsClientId=cid)
    return cid, body


def positions(cid, bodies):
    """(len(bodies), 3) centres of the bodies."""
    import pybullet as p

    return np.array([p.getBasePositionAndOrientation(b, physicsClientId=cid)[0]
                     for b in bodies])


def velocity(cid, body):
    """(linear, angular) world velocity of a body."""
    import pybullet as p

    v, w = p.getBaseVelocity(body, physicsClientId=cid)
    return np.array(v), np.array(w)


def step(cid, n=1):
    import pybullet as p

    for _ in range(int(n)):
        p.stepSimulation(physicsClientId=cid)


def time_per_step(cid, steps=240, repeats=7):
    """Median wall-clock seconds per ``stepSimulation`` over ``repeats`` runs of ``steps``
    steps, each from the state on entry (restored again before returning)."""
    import pybullet as p

    step(cid, 1)  # anything done lazily on the first step, outside the timing
    saved = p.saveState(physicsClientId=cid)
    times = []
    for _ in range(int(repeats)):
        p.restoreState(saved, physicsClientId=cid)
        start = time.perf_counter()
        for _ in range(int(steps)):
            p.stepSimulation(physicsClientId=cid)
        times.append((time.perf_counter() - start) / steps)
    p.restoreState(saved, physicsClientId=cid)
    p.removeState(saved, physicsClientId=cid)
    return statistics.median(times)


def close(cid):
    import pybullet as p

    p.disconnect(physicsClientId=cid)
