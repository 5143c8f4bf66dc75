"""The scipy reference, importable under this name too: :mod:`rtrigid.references.scipy_ref`."""
from rtrigid.references.scipy_ref import *  # noqa: F401,F403
from rtrigid.references.scipy_ref import fitted_order, rigid_body_reference  # noqa: F401
