"""What the lock-step and streaming servers serve: copies of the simulation, the rows HELLO
describes it by (joints, actuators, IMU sensors), its state packed as the protocol sends it,
and the Unix-domain listener."""

from __future__ import annotations

import math
import os
import socket
import stat
from typing import Any, Iterable, Sequence, Union

import numpy as np
from numpy.typing import NDArray

from rtrigid.backends.buffers import SOLVER_HALVINGS, SOLVER_MAX_ITER
from rtrigid.io.hil.protocol import (
    ACTUATOR_ROW,
    HELLO_HEAD,
    IMU_WIDTH,
    JOINT_ROW,
    SENSOR_ROW,
    STATE_HEAD,
    STATE_WIDTH,
    finite3,
    pack_strings,
)
from rtrigid.simulation import Simulation
from rtrigid.simulation_helpers import Handle

# an IMU as the server takes it: a body, or a (body, point in body axes) pair
ImuSpec = Union[Handle, tuple[Handle, Sequence[float]]]


def unix_listener(path: str | os.PathLike[str], backlog: int = 128) -> socket.socket:
    """A listening Unix-domain stream socket at ``path``; a stale socket file there is replaced,
    anything else at that path is refused."""
    path = os.fspath(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(mode):
            raise ValueError(f"unix: {path!r} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # nobody listens: left over from a server that did not stop
        else:
            raise ValueError(f"unix: a server already listens on {path!r}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def apply_records(
    sim: Simulation,
    controls: Iterable[tuple[Any, ...]],
    forces: Iterable[tuple[Any, ...]],
    loads: Iterable[tuple[Any, ...]],
) -> None:
    """A STEP's or a COMMAND's records applied to ``sim``: controls and joint forces (held),
    loads (body, force xyz, torque xyz; for the next step).  Raises what the Simulation's
    setters raise; the caller restores its snapshot then."""
    for a, u in controls:
        sim.set_control(a, u)
    for j, value in forces:
        sim.set_joint_force(j, value)
    for b, fx, fy, fz, tx, ty, tz in loads:
        sim.apply_force(b, (fx, fy, fz))
        sim.apply_torque(b, (tx, ty, tz))


def replica(sim: Simulation) -> Simulation:
    """A new Simulation that steps exactly like ``sim`` (restore it to one of sim's snapshots;
    the snapshot's fingerprint check refuses the restore if anything that matters differs)."""
    return Simulation(
        sim.model,
        sim.integrator,
        sim.dt,
        options=sim.options,
        max_iter=int(sim.backend.solver[SOLVER_MAX_ITER]),
        max_halvings=int(sim.backend.solver[SOLVER_HALVINGS]),
        step_budget=sim.step_budget,
        max_steps_per_advance=sim.max_steps_per_advance,
    )


def joint_rows(sim: Simulation) -> list[tuple[Any, ...]]:
    """The served simulation's joints in handle order: (name, kind, parent, child, qpos at,
    nq, qvel at, nv, lower, upper), positions in the layout of ``sim.qpos()``/``qvel()``."""
    by_name = {j.name: (b, j) for b, j in enumerate(sim.backend.joints)}
    rows, qat, vat = [], 0, 0
    for name in sim.joint_names:
        child, j = by_name[name]
        nq, nv = len(sim.joint_position(name)), len(sim.joint_velocity(name))
        lower, upper = getattr(j, "limits", None) or (-math.inf, math.inf)
        rows.append((name, j.kind, j.parent, child, qat, nq, vat, nv, lower, upper))
        qat, vat = qat + nq, vat + nv
    return rows


def actuator_rows(sim: Simulation) -> list[tuple[Any, ...]]:
    """The served simulation's actuators in model order: (name, kind, joint handle, gear,
    ctrl range, force range)."""
    unbounded = (-math.inf, math.inf)
    return [
        (
            a.name,
            a.kind,
            a.joint,
            a.gear,
            *(a.ctrl_range or unbounded),
            *(a.force_range or unbounded),
        )
        for a in sim.model.actuators
    ]


def imu_sensors(
    sim: Simulation, imus: Iterable[ImuSpec] | None
) -> list[tuple[str, int, NDArray[np.float64]]]:
    """IMU sensors as (name, body, point_body): ``imus`` lists bodies (name or index) or
    (body, point_body) pairs; each is named ``imu:BODY`` (``imu:BODY@x,y,z`` off the centre)."""
    out, names = [], set()
    for item in imus or ():
        body, point = (item, (0.0, 0.0, 0.0)) if isinstance(item, (str, int, np.integer)) else item
        b = sim.body_index(body)
        point = finite3(point, f"imus[{body!r}] point")
        name = f"imu:{sim.names[b]}" + (
            "" if point == (0.0, 0.0, 0.0) else "@{:g},{:g},{:g}".format(*point)
        )
        if name in names:
            raise ValueError(f"imus: {name} given twice")
        names.add(name)
        out.append((name, b, np.array(point)))
    return out


def describe(
    sim: Simulation,
    scenario: str,
    max_steps: int,
    joints: list[tuple[Any, ...]],
    actuators: list[tuple[Any, ...]],
    imus: list[tuple[str, int, NDArray[np.float64]]],
) -> bytes:
    """The HELLO reply's description of ``sim`` up to its sensor rows (the limits and the
    session follow it in a lock-step HELLO; a stream's DESCRIBE reply ends with its own
    block): ``docs/hil/protocol.md``."""
    out = [
        HELLO_HEAD.pack(
            sim.nb, sim.dt, max_steps, len(joints), len(actuators), len(imus), sim.nq, sim.nv
        ),
        pack_strings([sim.integrator, scenario, *sim.names]),
    ]
    for name, kind, *row in joints:
        out += [pack_strings([name, kind]), JOINT_ROW.pack(*row)]
    for name, kind, *row in actuators:
        out += [pack_strings([name, kind]), ACTUATOR_ROW.pack(*row)]
    for name, b, point in imus:
        out += [pack_strings([name, "imu"]), SENSOR_ROW.pack(b, *point, IMU_WIDTH)]
    return b"".join(out)


class StatePacker:
    """Packs a simulation's state as the protocol's state payload (STATE_HEAD, the bodies'
    poses and velocities, qpos, qvel, the IMU readings), into buffers it reuses."""

    def __init__(self, sim: Simulation, imus: list[tuple[str, int, NDArray[np.float64]]]) -> None:
        self.imus = imus
        n_sensor_values = IMU_WIDTH * len(imus)
        self.values = np.empty(STATE_WIDTH * sim.nb + sim.nq + sim.nv + n_sensor_values)
        self.bodies = self.values[: STATE_WIDTH * sim.nb].reshape(sim.nb, STATE_WIDTH)
        self.head = (sim.nb, sim.nq, sim.nv, n_sensor_values)
        self._head = b""

    def pack(self, sim: Simulation) -> bytes:
        """The state payload of ``sim`` (a simulation of the same model) now."""
        self.motion(sim)
        return self.finish(sim)

    def motion(self, sim: Simulation) -> None:
        """Take the part of the payload that only the simulation's state decides (t, the
        step count, the bodies' poses and velocities, qpos, qvel) from ``sim`` now; inputs
        set afterwards (controls, loads) do not change it until the next step."""
        out = self.bodies
        for b in range(sim.nb):
            out[b, 0:3], out[b, 3:7] = sim.pose(b)
            out[b, 7:10], out[b, 10:13] = sim.velocity(b)
        values = self.values
        at = STATE_WIDTH * sim.nb
        values[at : at + sim.nq] = sim.qpos()
        at += sim.nq
        values[at : at + sim.nv] = sim.qvel()
        self._head = STATE_HEAD.pack(sim.t, sim.steps_taken, *self.head)

    def finish(self, sim: Simulation) -> bytes:
        """The payload: what :meth:`motion` last took, with the IMU readings of ``sim`` now
        (an accelerometer reads the joint forces in force)."""
        values = self.values
        at = len(values) - IMU_WIDTH * len(self.imus)
        for _, b, point in self.imus:
            values[at : at + 3], values[at + 3 : at + 6] = sim.imu(b, point)
            at += IMU_WIDTH
        return self._head + values.tobytes()
