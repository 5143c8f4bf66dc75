"""rtrigid: fixed-step rigid-body dynamics for real-time loops.

    import rtrigid as rt
    sim = rt.scenarios.build("gyro_top", integrator="energy_momentum", dt=0.001)
    sim.step(1000)

Layout (each package's docstring says more):

- :mod:`rtrigid.model`, :mod:`rtrigid.joints`: describing a system (bodies, the joint-kind table)
- :mod:`rtrigid.geoms`: collision geoms (``Model.add_geom``) and :func:`mass_properties`
- :mod:`rtrigid.loaders`: :func:`load_model` for URDF and MJCF robot descriptions
- :mod:`rtrigid.simulation`: the one Simulation façade; :mod:`rtrigid.integrators`: the registry
- :mod:`rtrigid.backends`: the engines (``bodies``, ``tree``) with their kernels
- :mod:`rtrigid.maths`: quaternions and small linear algebra for the kernels
- :mod:`rtrigid.io`: the paced real-time runner and the lock-step HIL server
- :mod:`rtrigid.tools`: benchmarks, the accuracy study, the MuJoCo and scipy references
- :mod:`rtrigid.scenarios`, :mod:`rtrigid.cli`: ready-made systems and the command line
"""

from rtrigid import geoms, integrators, scenarios
from rtrigid.geoms import mass_properties
from rtrigid.loaders import load_model
from rtrigid.maths import quat
from rtrigid.model import Model
from rtrigid.simulation import Closest, Hit, Overlap, Simulation, SimulationError, Snapshot
from rtrigid.batch import Batch

__all__ = [
    "Batch",
    "Closest",
    "Hit",
    "Model",
    "Overlap",
    "load_model",
    "Simulation",
    "SimulationError",
    "Snapshot",
    "geoms",
    "integrators",
    "mass_properties",
    "quat",
    "scenarios",
]
