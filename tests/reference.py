"""The independent scipy reference lives in :mod:`rtrigid.reference` (the accuracy command
uses it too); re-exported here for the tests."""
from rtrigid.reference import fitted_order, rigid_body_reference

__all__ = ["fitted_order", "rigid_body_reference"]
