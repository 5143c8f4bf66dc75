"""Symmetric compositions that raise a symmetric order-2 step to order 4, for both backends.

A symmetric one-step method Phi_h of order 2 (Phi_{-h} = Phi_h^-1) composed as
Phi_{g_s h} o ... o Phi_{g_1 h}, with symmetric weights (g_i = g_{s+1-i}), sum g = 1 and
sum g^3 = 0, is symmetric and of order 4 (Yoshida 1990; Hairer, Lubich & Wanner, Geometric
Numerical Integration, II.4 and V.3).  The weights are fractions of the step:

* ``suzuki``: five stages p, p, 1 - 4p, p, p with p = 1/(4 - 4^(1/3)) (Suzuki 1990): stages
  of 0.41 h and one of -0.66 h;
* ``triple_jump``: three stages g, 1 - 2g, g with g = 1/(2 - 2^(1/3)) (Yoshida; Forest and
  Ruth; Creutz and Gocksch): 1.35 h, -1.70 h, 1.35 h.

Which one is used by default, and why, is in :mod:`rtrigid.backends.bodies.energy_momentum4`.
"""
_P = 1.0 / (4.0 - 4.0 ** (1.0 / 3.0))
_G = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
SUZUKI = (_P, _P, 1.0 - 4.0 * _P, _P, _P)
TRIPLE_JUMP = (_G, 1.0 - 2.0 * _G, _G)
COMPOSITIONS = {"suzuki": SUZUKI, "triple_jump": TRIPLE_JUMP}


def mid_times(stages):
    """Mid-time of each stage as a fraction of the step."""
    out, t = [], 0.0
    for g in stages:
        out.append(t + 0.5 * g)
        t += g
    return tuple(out)
