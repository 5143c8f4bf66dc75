"""A kernel called by its address (rtrigid._jit.call_step), as the Batch's driver and the contact
step call a scheme's step: the same result as a direct call, an exception raised by the kernel
reaches the caller, and arrays of other types than the contract's are refused when compiling."""
import numba
import numpy as np
import pytest

from rtrigid._jit import call_step, step_address


@numba.njit
def _kernel(n, dt, F, I):
    for _ in range(n):
        F[0] += dt * F[1]
        F[1] -= dt * F[0]
        I[0] += 1
    return 7 if F[0] > 1.0 else 0


@numba.njit
def _refusing(n, dt, F, I):
    if n > 3:
        raise ValueError("n: more than 3 steps")
    F[0] += n
    return 0


@numba.njit
def _twice(address, n, dt, F, I):
    return call_step(address, n, dt, F, I) | call_step(address, n, dt, F, I)


def test_a_kernel_called_by_its_address_steps_as_a_direct_call():
    F, I = np.array([0.3, 2.0]), np.zeros(2, np.int64)
    F2, I2 = F.copy(), I.copy()
    status = _twice(step_address(_kernel), 50, 0.01, F, I)
    expected = _kernel(50, 0.01, F2, I2) | _kernel(50, 0.01, F2, I2)
    assert status == expected
    assert np.array_equal(F, F2) and np.array_equal(I, I2) and I[0] == 100


def test_an_exception_in_the_kernel_reaches_the_caller():
    F, I = np.zeros(1), np.zeros(1, np.int64)
    address = step_address(_refusing)
    assert _twice(address, 2, 0.1, F, I) == 0 and F[0] == 4.0
    with pytest.raises(ValueError, match="more than 3 steps"):
        _twice(address, 5, 0.1, F, I)


def test_arrays_of_other_types_are_refused():
    with pytest.raises(numba.core.errors.TypingError, match="call_step"):
        _twice(step_address(_kernel), 1, 0.1, np.zeros(2, np.float32), np.zeros(2, np.int64))
