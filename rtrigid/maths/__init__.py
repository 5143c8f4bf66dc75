"""Mathematics for the kernels: quaternions (:mod:`.quat`) and small dense linear algebra
(:mod:`.linalg`), all compiled, allocation-free where the step loops call them."""
