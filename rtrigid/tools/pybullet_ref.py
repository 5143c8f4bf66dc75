"""The PyBullet reference, importable under this name too:
:mod:`rtrigid.references.pybullet_ref`."""
from rtrigid.references.pybullet_ref import *  # noqa: F401,F403
from rtrigid.references.pybullet_ref import (  # noqa: F401
    available, box_stack, close, positions, sliding_box, step, time_per_step, velocity)
