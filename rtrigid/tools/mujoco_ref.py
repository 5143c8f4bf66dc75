"""The MuJoCo reference, importable under this name too: :mod:`rtrigid.references.mujoco_ref`."""
from rtrigid.references.mujoco_ref import *  # noqa: F401,F403
from rtrigid.references.mujoco_ref import (  # noqa: F401
    LOOP_PIN_SPREAD, available, build_chain, build_single_body, build_tree, chain_energy,
    chain_link_tips, energy, euler_disk, get_state, gyro_top_state, load_file, rolling_ball,
    servoed_on_floor, set_state, step, time_per_step)
