"""A recorded stretch of trajectory in one flat buffer, and its interpolation.

Kernels receive one ``double*`` for their parameters. Kernels that also need
the state along a recorded trajectory (the adjoint's backward right-hand side
needs ``y(t)`` of the forward solution) get a *trajectory buffer* instead:
the parameters followed by the recorded steps, so that the same C signature
serves them. Layout (float64):

==========================  =========================================
``[0:HEADER_SIZE]``         header: P, N, capacity C, count, kind, hint
``[HEADER_SIZE : +P]``      parameters
``[... : +N]``              scratch: the interpolated state
``[... : +C]``              recorded times (increasing)
``[... : +C*N]``            recorded states, one row per time
``[... : +C*N]``            recorded derivatives ``f(t, y)``, one row per time
==========================  =========================================

``kind`` selects the interpolation between recorded steps, with Stan's codes
for ``interpolation_polynomial``: 1, cubic Hermite through the states and
derivatives at the two ends of the step (CVODES' Hermite option); 2, the
cubic polynomial through the states at the four nearest recorded times
(CVODES' polynomial option uses the states only, too).
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, njit, types

__all__ = [
    "HEADER_SIZE",
    "HERMITE",
    "POLYNOMIAL",
    "new_trajectory_buffer",
    "trajectory_buffer_size",
    "recording_views",
    "set_record_count",
    "interpolate_state",
    "trajectory_state_cfunc",
]

HEADER_SIZE = 8
HERMITE = 1
POLYNOMIAL = 2
_P, _N, _CAPACITY, _COUNT, _KIND, _HINT = range(6)


@njit(cache=True)
def new_trajectory_buffer(params, n_states, capacity, kind):
    """A zeroed buffer holding ``params`` with room for ``capacity`` recorded steps."""
    p = params.size
    buf = np.zeros(HEADER_SIZE + p + n_states + capacity * (1 + 2 * n_states))
    buf[_P], buf[_N], buf[_CAPACITY], buf[_KIND] = p, n_states, capacity, kind
    buf[HEADER_SIZE : HEADER_SIZE + p] = params
    return buf


@njit(cache=True, inline="always")
def trajectory_buffer_size(header):
    """Total length of a buffer from its header (the first HEADER_SIZE entries)."""
    p = int(header[_P])
    n = int(header[_N])
    return HEADER_SIZE + p + n + int(header[_CAPACITY]) * (1 + 2 * n)


@njit(cache=True)
def recording_views(buf):
    """``(times, states, derivatives)``: writable views of the recording area."""
    p = int(buf[_P])
    n = int(buf[_N])
    cap = int(buf[_CAPACITY])
    start = HEADER_SIZE + p + n
    times = buf[start : start + cap]
    states = buf[start + cap : start + cap + cap * n].reshape((cap, n))
    derivs = buf[start + cap + cap * n : start + cap + 2 * cap * n].reshape((cap, n))
    return times, states, derivs


@njit(cache=True)
def set_record_count(buf, count):
    """Declare the first ``count`` records valid (and reset the search hint)."""
    buf[_COUNT] = count
    buf[_HINT] = 0


@njit(cache=True, inline="always")
def _find_step(rec_t, count, t, hint):
    # index k with rec_t[k] <= t <= rec_t[k+1], clamped to the recorded range
    if count < 2:
        return 0
    if hint < count - 1 and rec_t[hint] <= t <= rec_t[hint + 1]:
        return hint
    lo = 0
    hi = count - 1
    if t <= rec_t[0]:
        return 0
    if t >= rec_t[hi]:
        return hi - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if rec_t[mid] <= t:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True)
def interpolate_state(buf, t):
    """Interpolated state at ``t`` written into (and returned as) the buffer's scratch area."""
    p = int(buf[_P])
    n = int(buf[_N])
    cap = int(buf[_CAPACITY])
    count = int(buf[_COUNT])
    start = HEADER_SIZE + p + n
    y = buf[HEADER_SIZE + p : start]
    rec_t = buf[start : start + cap]
    y_base = start + cap
    f_base = y_base + cap * n
    k = _find_step(rec_t, count, t, int(buf[_HINT]))
    buf[_HINT] = k
    if count == 1:
        for i in range(n):
            y[i] = buf[y_base + i]
        return y
    if int(buf[_KIND]) == HERMITE:
        ta = rec_t[k]
        h = rec_t[k + 1] - ta
        s = (t - ta) / h
        s2 = s * s
        s3 = s2 * s
        h00 = 2.0 * s3 - 3.0 * s2 + 1.0
        h10 = s3 - 2.0 * s2 + s
        h01 = -2.0 * s3 + 3.0 * s2
        h11 = s3 - s2
        a = y_base + k * n
        b = a + n
        fa = f_base + k * n
        fb = fa + n
        for i in range(n):
            y[i] = (
                h00 * buf[a + i] + h * h10 * buf[fa + i] + h01 * buf[b + i] + h * h11 * buf[fb + i]
            )
        return y
    # cubic through the four nearest records (fewer if fewer exist)
    first = k - 1
    if first < 0:
        first = 0
    last = first + 3
    if last > count - 1:
        last = count - 1
        first = max(0, last - 3)
    for i in range(n):
        y[i] = 0.0
    for j in range(first, last + 1):
        w = 1.0
        for m in range(first, last + 1):
            if m != j:
                w *= (t - rec_t[m]) / (rec_t[j] - rec_t[m])
        row = y_base + j * n
        for i in range(n):
            y[i] += w * buf[row + i]
    return y


@cfunc(types.void(types.CPointer(types.float64), types.float64), cache=True, error_model="numpy")
def trajectory_state_cfunc(data, t):
    """C entry of :func:`interpolate_state` for generated kernels: ``buffer`` is the raw
    pointer of a trajectory buffer, the state at ``t`` lands in its scratch area
    (``HEADER_SIZE + P`` float64s in). Generated adjoint kernels call it as
    ``trajectory_state`` (:mod:`pymc_odesens.codegen.llvm_emitter`)."""
    buf = carray(data, (trajectory_buffer_size(carray(data, (HEADER_SIZE,))),))
    interpolate_state(buf, t)
