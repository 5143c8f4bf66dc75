"""The implicit schemes' Newton stopping rule, in one place for every backend.

Newton stops on an exactly-zero scaled residual, or on a residual below :data:`ACCEPT` that
has stalled (fell by less than :data:`STALL_FACTOR` in the last iteration: round-off is all
that is left) or that followed an update at round-off size.  A fixed tolerance instead would
leave an error of the same sign in every step, and that error grows linearly (see the
energy-momentum modules).  A solve that does not stop within ``max_iter`` iterations fails;
the step loop (the bodies' :mod:`rtrigid.backends.bodies.implicit`, the tree's
:mod:`rtrigid.backends.tree.energy_momentum`) then takes the documented sub-step fallback.
"""
import numpy as np

from rtrigid._jit import jit_inline

STALL_FACTOR = 0.25
ACCEPT = 1e-9
UPDATE_ROUNDOFF = 4.0 * np.finfo(np.float64).eps


@jit_inline
def converged(rnorm, previous, update, size):
    """The stopping rule on the scaled residual ``rnorm`` (``previous``: the iteration
    before's) and the last update's size ``update`` measured against ``size``."""
    return rnorm == 0.0 or (rnorm < ACCEPT and (rnorm > STALL_FACTOR * previous
                                                or update <= UPDATE_ROUNDOFF * size))
