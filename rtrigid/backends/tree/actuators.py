"""The actuators of a tree (:meth:`rtrigid.Model.add_actuator`): the columns of their float
rows, their kinds, their force law and the generalized loads they put on the rates."""
from rtrigid._jit import jit, jit_inline


# actuators (Model.add_actuator), one float row each
ACT_KIND = 0   # MOTOR, POSITION or VELOCITY
ACT_Q = 1      # its joint's coordinate offset in Qg
ACT_V = 2      # and rate offset in nu
ACT_GEAR = 3
ACT_KP = 4
ACT_KV = 5
ACT_LO = 6     # force_range (-inf, inf when none)
ACT_HI = 7
ACT_BODY = 8   # the child body of its joint
ACT_WIDTH = 9
MOTOR, POSITION, VELOCITY = 0, 1, 2
ACTUATOR_KINDS = {"motor": MOTOR, "position": POSITION, "velocity": VELOCITY}


@jit_inline
def actuator_force(act, a, ctrl, c, cdot):
    """Actuator a's force (before the gear) at joint coordinate c and rate cdot, MuJoCo's
    rule: motor u, position kp (u - g c) - kv g cdot, velocity kv (u - g cdot), clipped to
    force_range.  The joint receives g times it."""
    kind = act[a, ACT_KIND]
    g = act[a, ACT_GEAR]
    if kind == MOTOR:
        f = ctrl[a]
    elif kind == POSITION:
        f = act[a, ACT_KP] * (ctrl[a] - g * c) - act[a, ACT_KV] * g * cdot
    else:
        f = act[a, ACT_KV] * (ctrl[a] - g * cdot)
    return min(max(f, act[a, ACT_LO]), act[a, ACT_HI])


@jit
def actuator_loads(act, ctrl, Qg, nu, tau, work, weight):
    """tau += every actuator's generalized force at (Qg, nu); work[a] += weight times its
    power."""
    for a in range(act.shape[0]):
        o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
        gf = act[a, ACT_GEAR] * actuator_force(act, a, ctrl, Qg[o], nu[ov])
        tau[ov] += gf
        work[a] += weight * gf * nu[ov]
