"""Independent reference implementations used to check rtrigid: the same models built in MuJoCo
(:mod:`.mujoco_ref`), the contact scenes in PyBullet (:mod:`.pybullet_ref`) and the rigid-body
ODE integrated by scipy (:mod:`.scipy_ref`).

None of them calls rtrigid's kernels.  Their libraries are optional (the ``dev`` extra): each
module imports its library only inside the functions that need it, and ``available()`` says
whether MuJoCo or PyBullet is installed.  The tests and the benchmarks of
:mod:`rtrigid.tools` compare against them.
"""
