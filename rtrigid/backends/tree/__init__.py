"""The tree backend: bodies joined by lower pairs into trees, in generalized coordinates.

:mod:`.kinematics` holds the tree (joint coordinates, the articulated-body recursion, the
impulse response); :mod:`.nullspace_rk4` and :mod:`.energy_momentum` are its kernels.
"""
