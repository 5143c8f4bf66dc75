"""rtrigid: fixed-step rigid-body dynamics for real-time loops.

    import rtrigid as rt
    sim = rt.scenarios.build("gyro_top", integrator="energy_momentum", dt=0.001)
    sim.step(1000)
"""
from rtrigid import quat, scenarios
from rtrigid.model import Model
from rtrigid.simulation import Simulation, SimulationError

__all__ = ["Model", "Simulation", "SimulationError", "quat", "scenarios"]
