"""Lock-step stepping over TCP: a server that serves a Simulation, and clients that drive it.

    with Server(rtrigid.scenarios.build("arm"), port=0, imus=["link1"]).start() as server:
        with Client(*server.address) as client:
            r = client.step(10, controls={"joint0": 0.5}, joint_forces={"joint1": 0.1},
                            forces={"link1": ((0, 0, 0), (0, 0, 1e-3))})
            r["t"], r["qpos"], r["qvel"], r["sensors"]["imu:link1"], r["poses"]

``rtrigid serve SCENARIO`` runs the server as a process; ``rtrigid serve SCENARIO --udp PORT``
streams instead, at a fixed rate (:class:`StreamServer` in :mod:`.stream`, the client
:class:`StreamClient` in :mod:`.stream_client`).  The package holds
:mod:`.protocol` (message codes and packing; the specification is
``docs/hil/protocol.md``), :mod:`.limits` (the server's limits, checked), :mod:`.server`,
:mod:`.client` and :mod:`.command` (``rtrigid serve``); every name is re-exported here.
"""

from rtrigid.io.hil.protocol import *  # noqa: F401,F403
from rtrigid.io.hil.server import *  # noqa: F401,F403
from rtrigid.io.hil.client import *  # noqa: F401,F403
from rtrigid.io.hil.command import *  # noqa: F401,F403
from rtrigid.io.hil.protocol import (  # noqa: F401
    ACTUATOR_ROW,
    CONTROL,
    E_FULL,
    E_IDLE,
    E_INTERNAL,
    E_KIND,
    E_MAGIC,
    E_SIZE,
    E_STEP,
    E_TOO_LONG,
    E_TRUNCATED,
    E_VALUE,
    E_VERSION,
    ERROR,
    ERROR_HEAD,
    ERRORS,
    FATAL,
    HEADER,
    HELLO,
    HELLO_HEAD,
    HELLO_LIMITS,
    IMU_WIDTH,
    JOINT_FORCE,
    JOINT_ROW,
    KEEPALIVE,
    LOAD,
    MAGIC,
    MAX_STEPS_LIMIT,
    REPLY,
    RESET,
    SENSOR_ROW,
    SET_STATE,
    SET_STATE_HEAD,
    STATE,
    STATE_HEAD,
    STATE_WIDTH,
    STEP,
    STEP_HEAD,
    VERSION,
    ServerError,
)
from rtrigid.io.hil.limits import check_limits  # noqa: F401
from rtrigid.io.hil.server import Server  # noqa: F401
from rtrigid.io.hil.client import Client  # noqa: F401
from rtrigid.io.hil.command import parse_imu, serve_main  # noqa: F401
from rtrigid.io.hil.stream import StreamServer  # noqa: F401
from rtrigid.io.hil.stream_client import StreamClient  # noqa: F401
