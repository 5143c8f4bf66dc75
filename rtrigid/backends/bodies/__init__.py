"""The bodies backend: free bodies and bodies attached to the world, each stepped on its own.

The fastest kernels: a body's state stays in registers for the n steps of a call.  One module
per scheme, each with ``work_size(nb)`` and the kernel(s) named in :mod:`rtrigid.integrators`;
:mod:`.layout` is the frozen model, :mod:`.common` the state layout and the per-body
bookkeeping, :mod:`.forces` the loads, :mod:`.implicit` the implicit step loop.
"""
