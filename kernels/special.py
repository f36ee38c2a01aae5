"""Special functions numpy lacks (erf), as numba loops over float64 arrays."""
import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def erf_f64(values):
    """Elementwise erf of a float64 array (libm erf, the function numba's math.erf calls,
    so generated kernels calling math.erf give the same bits)."""
    flat = values.reshape(-1)
    out = np.empty(flat.size, np.float64)
    for index in range(flat.size):
        out[index] = math.erf(flat[index])
    return out.reshape(values.shape)
