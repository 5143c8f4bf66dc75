"""Helpers the modules of :class:`~rtrigid.simulation.Simulation` share: a numba
dispatcher's compiled entry point, the overflow-safe normalisation of a quaternion, and what
its mixins see of it when type-checked (:class:`SimulationBase`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Union

import numpy as np
from numpy.typing import NDArray

from rtrigid._jit import entry_point

__all__ = ["Handle", "entry_point", "readonly", "unit_quaternion", "SimulationBase"]

# A body, joint or actuator handle (what Model.add_body / add_joint / add_actuator returned)
# or its name
Handle = Union[int, np.integer, str]


def readonly(a: NDArray[Any]) -> NDArray[Any]:
    """A read-only view of ``a`` (what the simulation hands out of its state)."""
    view = a.view()
    view.flags.writeable = False
    return view


if TYPE_CHECKING:
    from rtrigid.model import Model

    class SimulationBase:
        """What the mixins of ``Simulation`` (simulation_joints, _actuators, _queries, _loads)
        use of it: the attributes ``Simulation.__init__`` sets and the methods one mixin
        calls of another or of ``Simulation``.  Declarations for a type checker only: at run
        time the name is ``object``."""

        backend: Any
        model: Model
        integrator: str
        dt: float
        nb: int
        nq: int
        nv: int
        na: int
        names: list[str]
        joint_names: list[str]
        actuator_names: list[str]
        x: NDArray[np.float64]
        q: NDArray[np.float64]
        _queries: Any
        _rays: Any
        _qidx: NDArray[np.intp]
        _vidx: NDArray[np.intp]
        _quat_at: list[tuple[int, str]]
        _qpos_src: NDArray[np.float64] | None
        _qvel_src: NDArray[np.float64] | None
        _joint_child: list[int]
        _loop_names: list[str]
        _force_at: list[int]
        _limits: list[tuple[int, int, float, float]]
        _ctrl: NDArray[np.float64]
        _ctrl_lo: NDArray[np.float64]
        _ctrl_hi: NDArray[np.float64]
        _awork: NDArray[np.float64]
        _na_shape: tuple[int]

        def body_index(self, body: Handle) -> int: ...
        def energy(self) -> float: ...
        def momentum(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]: ...
        def _write(self, field: str, write: Callable[[], object]) -> None: ...
        def _to_world(
            self, b: int, vector: NDArray[np.float64], frame: str
        ) -> NDArray[np.float64]: ...
        def _joint_body(self, joint: Handle) -> int: ...
        def mass_matrix(self) -> NDArray[np.float64]: ...
        def actuator_forces(self) -> NDArray[np.float64]: ...
        @property
        def _f_app(self) -> NDArray[np.float64]: ...
        @property
        def _t_app(self) -> NDArray[np.float64]: ...
else:
    SimulationBase = object


def unit_quaternion(q: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    """q / |q|, computed without overflow (q may hold numbers up to 1e308)."""
    big = float(np.max(np.abs(q)))
    scaled = q / big if big > 0.0 else q
    norm = float(np.linalg.norm(scaled)) * big
    if norm < 1e-12:
        raise ValueError(f"{name}: quaternion of norm {norm:g} cannot be normalised")
    return scaled / np.linalg.norm(scaled)
