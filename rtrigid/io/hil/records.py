"""What the lock-step and streaming clients share: a server's description (the HELLO rows)
read into a dict, and loads, controls and joint forces packed as STEP records
(``docs/hil/protocol.md``), checked with a ``ValueError`` naming the argument."""

from __future__ import annotations

import struct
from typing import Any, Sequence

import numpy as np

from rtrigid.io.hil.protocol import (
    ACTUATOR_ROW,
    CONTROL,
    HELLO_HEAD,
    JOINT_FORCE,
    JOINT_ROW,
    LOAD,
    SENSOR_ROW,
    STATE_HEAD,
    STATE_WIDTH,
    finite3,
    unpack_strings,
)
from rtrigid.validate import as_scalar, as_vector


def read_description(hello: bytes | bytearray) -> tuple[dict[str, Any], int]:
    """The description at the start of a HELLO reply (or a stream's DESCRIBE reply), as a
    dict (nb, dt, max_steps_per_request, nq, nv, integrator, scenario, names, joints,
    actuators, sensors, joint_names, actuator_names), and the offset where it ends."""
    (nb, dt, max_steps, n_joints, n_actuators, n_sensors, nq, nv) = HELLO_HEAD.unpack_from(hello)
    at = HELLO_HEAD.size
    integrator, scenario, *names = unpack_strings(hello, at, nb + 2)
    at += sum(2 + len(x.encode()) for x in (integrator, scenario, *names))

    def rows(count: int, row: struct.Struct, keys: Sequence[str]) -> list[dict[str, Any]]:
        nonlocal at
        out = []
        for _ in range(count):
            name, kind = unpack_strings(hello, at, 2)
            at += 4 + len(name.encode()) + len(kind.encode())
            out.append({"name": name, "kind": kind, **dict(zip(keys, row.unpack_from(hello, at)))})
            at += row.size
        return out

    joints = rows(
        n_joints, JOINT_ROW, ("parent", "child", "qpos_at", "nq", "qvel_at", "nv", "lower", "upper")
    )
    for j in joints:
        j["limits"] = (j.pop("lower"), j.pop("upper"))
    actuators = rows(
        n_actuators, ACTUATOR_ROW, ("joint", "gear", "ctrl_lo", "ctrl_hi", "force_lo", "force_hi")
    )
    for a in actuators:
        a["ctrl_range"] = (a.pop("ctrl_lo"), a.pop("ctrl_hi"))
        a["force_range"] = (a.pop("force_lo"), a.pop("force_hi"))
    sensors = rows(n_sensors, SENSOR_ROW, ("body", "px", "py", "pz", "width"))
    for sensor in sensors:
        sensor["point"] = (sensor.pop("px"), sensor.pop("py"), sensor.pop("pz"))
    return {
        "nb": nb,
        "dt": dt,
        "max_steps_per_request": max_steps,
        "nq": nq,
        "nv": nv,
        "integrator": integrator,
        "scenario": scenario,
        "names": names,
        "joints": joints,
        "actuators": actuators,
        "sensors": sensors,
        "joint_names": [j["name"] for j in joints],
        "actuator_names": [a["name"] for a in actuators],
    }, at


class Described:
    """A client's view of the served simulation, from :func:`read_description`."""

    nb: int
    dt: float
    max_steps_per_request: int
    nq: int
    nv: int
    integrator: str
    scenario: str
    names: list[str]
    joints: list[dict[str, Any]]
    actuators: list[dict[str, Any]]
    sensors: list[dict[str, Any]]
    joint_names: list[str]
    actuator_names: list[str]

    def take_description(self, info: dict[str, Any]) -> None:
        """Set the attributes above from :func:`read_description`'s dict."""
        for key in Described.__annotations__:
            setattr(self, key, info[key])


def index_of(what: str, key: object, names: list[str]) -> int:
    """An actuator's or joint's index from its name or index (``what``: the argument)."""
    if isinstance(key, str):
        if key in names:
            return names.index(key)
        raise ValueError(
            f"{what}: no {what[:-1].replace('joint_force', 'joint')} named {key!r}; known: {names}"
        )
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and (0 <= key < len(names)):
        return int(key)
    raise ValueError(f"{what}: {key!r} is neither a name nor an index < {len(names)}")


def pack_controls(controls: Any, actuator_names: list[str]) -> list[bytes]:
    """CONTROL records: ``controls`` maps actuators (name or index) to controls, or lists
    every actuator's control; None: none."""
    if controls is None:
        return []
    if not hasattr(controls, "items"):
        controls = dict(enumerate(as_vector(controls, len(actuator_names), "controls")))
    out, seen = [], set()
    for key, u in controls.items():
        a = index_of("controls", key, actuator_names)
        if a in seen:
            raise ValueError(f"controls: actuator {actuator_names[a]!r} given twice")
        seen.add(a)
        u = as_scalar(u, f"controls[{key!r}]")
        out.append(CONTROL.pack(a, u))
    return out


def pack_joint_forces(joint_forces: Any, joints: list[dict[str, Any]]) -> list[bytes]:
    """JOINT_FORCE records: ``joint_forces`` maps joints (name or index) to a force (a
    number, or one per rate of the joint)."""
    if not hasattr(joint_forces, "items"):
        raise ValueError(
            f"joint_forces: expected a mapping joint -> force, got {type(joint_forces).__name__}"
        )
    joint_names = [j["name"] for j in joints]
    out, seen = [], set()
    for key, value in joint_forces.items():
        j = index_of("joint_forces", key, joint_names)
        if j in seen:
            raise ValueError(f"joint_forces: joint {joint_names[j]!r} given twice")
        seen.add(j)
        nv = joints[j]["nv"]
        if nv == 0:
            raise ValueError(
                f"joint_forces[{key!r}]: joint {joint_names[j]!r} has no rates to take a force"
            )
        if np.ndim(value) == 0:
            value = [value]
        value = as_vector(value, nv, f"joint_forces[{key!r}]")
        out.append(JOINT_FORCE.pack(j) + value.astype("<f8").tobytes())
    return out


def body_of(body: object, names: list[str]) -> int:
    """A body's index from its name or index (for ``forces``)."""
    if isinstance(body, str):
        if body in names:
            return names.index(body)
        raise ValueError(f"forces: no body named {body!r}; known: {names}")
    if (
        isinstance(body, (int, np.integer))
        and not isinstance(body, bool)
        and (0 <= body < len(names))
    ):
        return int(body)
    raise ValueError(f"forces: body {body!r} is neither a name nor an index < {len(names)}")


def pack_loads(forces: Any, names: list[str]) -> list[bytes]:
    """LOAD records: ``forces`` maps bodies (name or index) to ``(force, torque)`` or to
    ``{"force": f, "torque": tau}``."""
    if not hasattr(forces, "items"):
        raise ValueError(
            f"forces: expected a mapping body -> (force, torque), got {type(forces).__name__}"
        )
    records = []
    seen = set()
    for body, value in forces.items():
        b = body_of(body, names)
        if b in seen:
            raise ValueError(f"forces: body {names[b]!r} given twice")
        seen.add(b)
        if isinstance(value, dict):
            unknown = set(value) - {"force", "torque"}
            if unknown:
                raise ValueError(f"forces[{body!r}]: unknown keys {sorted(unknown)}")
            force, torque = value.get("force", (0, 0, 0)), value.get("torque", (0, 0, 0))
        else:
            try:
                force, torque = value
            except (TypeError, ValueError):
                raise ValueError(
                    f"forces[{body!r}]: expected (force, torque), got {value!r}"
                ) from None
        records.append(
            LOAD.pack(
                b,
                *finite3(force, f"forces[{body!r}] force"),
                *finite3(torque, f"forces[{body!r}] torque"),
            )
        )
    return records


def read_state(
    body: bytes | bytearray | memoryview,
    sensors: list[dict[str, Any]],
    names: list[str],
    offset: int = 0,
) -> dict[str, Any]:
    """A state payload (from ``offset`` of ``body``) as the clients' state dict."""
    t, steps, nb, nq, nv, _ = STATE_HEAD.unpack_from(body, offset)
    values = np.frombuffer(body, dtype="<f8", offset=offset + STATE_HEAD.size)
    bodies = values[: nb * STATE_WIDTH].reshape(nb, STATE_WIDTH)
    at = nb * STATE_WIDTH
    qpos, qvel = values[at : at + nq], values[at + nq : at + nq + nv]
    at += nq + nv
    out_sensors: dict[str, Any] = {}
    for sensor in sensors:
        out_sensors[sensor["name"]] = values[at : at + sensor["width"]]
        at += sensor["width"]
    return {
        "t": t,
        "steps": steps,
        "poses": bodies[:, :7],
        "velocities": bodies[:, 7:],
        "qpos": qpos,
        "qvel": qvel,
        "sensors": out_sensors,
        "names": names,
    }
