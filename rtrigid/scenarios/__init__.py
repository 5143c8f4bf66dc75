"""Named, parametrized scenarios: the papers' test cases, ready to step.

    sim = rtrigid.scenarios.build("gyro_top", integrator="energy_momentum", dt=1e-3, omega_p=10)

Each builder returns a :class:`~rtrigid.simulation.Simulation`; :func:`info` gives what the
scenario conserves, its default duration and -- where the papers give one -- an analytic
reference.

Besides the registered names, :func:`build` takes a model factory as ``"module:function"``:
a function of the parameters that returns a :class:`~rtrigid.model.Model` (or a ready
``Simulation``), so ``rtrigid run/serve/view mypackage.robots:arm`` works on a user's own
model.  Its step is ``dt`` (default :data:`FACTORY_DT`), its duration :data:`FACTORY_T_END`.
And it takes the path of a URDF or MJCF robot file (:func:`rtrigid.load_model`).

The registry (:func:`scenario`, :func:`build`, :func:`names`, :func:`info`, ...) is in
:mod:`.registry`; the builders by family in :mod:`.bodies` (single bodies and tops),
:mod:`.chains` (jointed systems), :mod:`.actuated` (the arm, the quadrotor), :mod:`.contact`
(bodies on a ground) and :mod:`.linkages` (closed loops).  Every name is re-exported here; the
families are imported in the order that gives :func:`names` its order.
"""

from rtrigid.scenarios.registry import *  # noqa: F401,F403
from rtrigid.scenarios.bodies import *  # noqa: F401,F403
from rtrigid.scenarios.chains import *  # noqa: F401,F403
from rtrigid.scenarios.actuated import *  # noqa: F401,F403
from rtrigid.scenarios.contact import *  # noqa: F401,F403
from rtrigid.scenarios.linkages import *  # noqa: F401,F403
from rtrigid.scenarios.registry import (  # noqa: F401
    ALL_AXES,
    FACTORY_DT,
    FACTORY_T_END,
    FILE_DT,
    FILE_PARAMETERS,
    FILE_T_END,
    build,
    default_integrator,
    defaults,
    describe,
    factory,
    info,
    integrators_for,
    is_factory,
    is_file,
    names,
    parameters,
    scenario,
)
from rtrigid.scenarios.bodies import (  # noqa: F401
    free_body,
    geradin_top,
    gyro_top,
    heavy_top,
    tennis_racket,
)
from rtrigid.scenarios.chains import (  # noqa: F401
    chain,
    double_pendulum,
    gimbal_gyroscope,
    rod_inertia,
    two_body_spherical,
)
from rtrigid.scenarios.actuated import (  # noqa: F401
    QUADROTOR_ARM,
    QUADROTOR_YAW_PER_THRUST,
    arm,
    quadrotor,
    set_rotor_thrusts,
)
from rtrigid.scenarios.contact import (  # noqa: F401
    QUADRUPED_STAND,
    ball_on_incline,
    box_inertia,
    box_stack,
    crate_on_ramp,
    euler_disk,
    euler_disk_precession,
    quadruped_model,
    quadruped_on_ground,
    tippe_top,
    top_on_table,
    turntable,
)
from rtrigid.scenarios.linkages import (  # noqa: F401
    bennett,
    bennett_theta2,
    delta_robot,
    delta_robot_arm_angles,
    four_bar,
    four_bar_angles,
    slider_crank,
)
