"""Requests of the lock-step protocol read and checked (specification:
``docs/hil/protocol.md``): a refused request is a :class:`Refusal` carrying its error code."""

from __future__ import annotations

import math
import struct
from typing import Any

from rtrigid.io.hil.protocol import CONTROL, E_SIZE, E_VALUE, JOINT_FORCE, LOAD, STEP_HEAD

StepRequest = tuple[
    int, list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[int, tuple[float, ...]]]
]


class Refusal(Exception):
    """A request the server refuses: ``code`` is the ERROR code of the specification."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_step(
    payload: bytes, nb: int, n_actuators: int, joint_nv: list[int], max_steps: int
) -> StepRequest:
    """A STEP payload read and checked against the served simulation's counts (its bodies,
    actuators and each joint's rates): (n_steps, loads, controls, joint forces), or a
    :class:`Refusal` with the error code the specification gives."""
    if len(payload) < STEP_HEAD.size:
        raise Refusal(
            E_SIZE, f"STEP payload of {len(payload)} bytes; needs at least {STEP_HEAD.size}"
        )
    n, n_loads, n_controls, n_forces = STEP_HEAD.unpack_from(payload)
    at = STEP_HEAD.size + LOAD.size * n_loads + CONTROL.size * n_controls
    if len(payload) < at + JOINT_FORCE.size * n_forces:
        raise Refusal(
            E_SIZE,
            f"STEP with {n_loads} loads, {n_controls} controls and "
            f"{n_forces} joint forces needs more than its {len(payload)} bytes",
        )
    if n > max_steps:
        raise Refusal(E_VALUE, f"n_steps {n} over max_steps_per_request {max_steps}")
    loads = list(LOAD.iter_unpack(payload[STEP_HEAD.size : STEP_HEAD.size + LOAD.size * n_loads]))
    check_records("body", [r[0] for r in loads], nb, "n_bodies")
    for record in loads:
        if not all(map(math.isfinite, record[1:])):
            raise Refusal(
                E_VALUE, f"loads of body {record[0]} must be finite, got {list(record[1:])}"
            )
    controls = list(CONTROL.iter_unpack(payload[at - CONTROL.size * n_controls : at]))
    check_records("actuator", [a for a, _ in controls], n_actuators, "n_actuators")
    for a, u in controls:
        if not math.isfinite(u):
            raise Refusal(E_VALUE, f"control of actuator {a} must be finite, got {u}")
    forces = []
    for _ in range(n_forces):  # sizes known once each joint is: checked record by record
        if len(payload) < at + JOINT_FORCE.size:
            raise Refusal(E_SIZE, f"STEP payload ends inside its joint forces, at byte {at}")
        (j,) = JOINT_FORCE.unpack_from(payload, at)
        if j >= len(joint_nv):
            raise Refusal(E_VALUE, f"joint {j} out of range (n_joints {len(joint_nv)})")
        nv = joint_nv[j]
        at += JOINT_FORCE.size
        if nv == 0 or len(payload) < at + 8 * nv:
            raise Refusal(
                E_VALUE if nv == 0 else E_SIZE,
                f"joint {j} has no rates to take a force"
                if nv == 0
                else f"STEP payload ends inside the force of joint {j}",
            )
        value = struct.unpack_from(f"<{nv}d", payload, at)
        at += 8 * nv
        if not all(map(math.isfinite, value)):
            raise Refusal(E_VALUE, f"force on joint {j} must be finite, got {list(value)}")
        forces.append((j, value))
    check_records("joint", [j for j, _ in forces], len(joint_nv), "n_joints")
    if at != len(payload):
        raise Refusal(E_SIZE, f"STEP payload has {len(payload) - at} bytes after its records")
    return n, loads, controls, forces


def check_records(what: str, indices: list[int], count: int, count_name: str) -> None:
    """Each record's index in range and none repeated, or a refusal naming ``what``."""
    for i in indices:
        if i >= count:
            raise Refusal(E_VALUE, f"{what} {i} out of range ({count_name} {count})")
    if len(set(indices)) != len(indices):
        raise Refusal(E_VALUE, f"{what} repeated in {indices}")
