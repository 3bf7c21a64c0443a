"""Locating implicit events inside an accepted step, shared by all four integrators.

An implicit event is a sign change of a condition ``g_j(t, y)`` along an accepted step.
The conditions are evaluated at the step's end and, on the integrator's dense output,
at the interior points ``t + k h / EVENT_SAMPLES``: a sign change over any of these
sub-intervals counts (CVODE looks at the step's ends only, so a condition crossing zero
and back within one long step, for instance a periodic function of ``t`` while the
state is at rest, is missed there; here only if it happens within a fraction of the
step). Each condition has a *side*, the sign it had at the last point looked at. At
the start of a run, ``g_zero[j]`` says how it is set: a margin ``>= 0`` (the side is
the sign of ``g_j``, or 0, undetermined, while ``|g_j| <= g_zero[j]``: for instance right
after its own event left the state on the switching surface), or one of
``FORCE_POSITIVE`` / ``FORCE_NEGATIVE``, a side fixed by the caller (the direction in
which the condition leaves zero after an event, from its time derivative): a value of
the other sign at the start then counts as zero, so that a crossing back within the
first sub-interval of the step (the next, tiny bounce of a ball) is still bracketed
and located. A change of side counts when its direction matches the condition's (``+1``
up, ``-1`` down, ``0`` both); the event time is then located on the dense output by the
Illinois variant of regula falsi, to a few units in the last place of ``t``, and the
earliest event of the step wins.

``g_zero`` holds two entries per condition: the start codes above, then a *band*
(``g_zero[n + j]``, 0 for none). A condition with a band counts as on its side while
``|g_j|`` stays within it: its sign there is noise, not a crossing. The band is the
solver's tolerance in ``g_j``, given to a condition left resting on its switching
surface (at zero with a rate indistinguishable from zero, as after an event whose
state is an equilibrium on that surface); without it, rounding would carry the
condition across zero every few steps and set its events off again each time. A
crossing counts once the value leaves the band on the other side, and the band is
dropped once the value leaves it on its own side.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "EVENT_OUT_SIZE",
    "EVENT_SAMPLES",
    "FORCE_NEGATIVE",
    "FORCE_POSITIVE",
    "MAX_ROOT_ITERATIONS",
    "bracket_done",
    "bracket_resolution",
    "first_point",
    "illinois_step",
    "initial_sides",
    "side_of",
    "start_bracket",
    "triggered",
    "update_sides",
]

EVENT_OUT_SIZE = 4
"""``event_out`` of an integrator run that stops at an event:
``[tau, condition index (-1 for an explicit stop time), outputs written, resolution of g
at tau (the larger |g| at the ends of the final bracket)]``."""

MAX_ROOT_ITERATIONS = 200
EVENT_SAMPLES = 4
"""Sub-intervals of a step over which sign changes are looked for (the conditions are
evaluated on the dense output at 3 interior points besides the step's end), so that a
condition crossing zero and back within one long step is still seen unless it does so
within a quarter of the step."""
_ULPS = 4.0
FORCE_POSITIVE = -1.0
"""``g_zero[j]`` code: the run starts with condition ``j`` on its positive side."""
FORCE_NEGATIVE = -2.0
"""``g_zero[j]`` code: the run starts with condition ``j`` on its negative side."""


@njit(cache=True, inline="always")
def side_of(x):
    """The side of a value: 1, -1 or 0."""
    if x > 0.0:
        return 1
    if x < 0.0:
        return -1
    return 0


@njit(cache=True)
def initial_sides(g, g_zero, sides, band):
    """Sides of the conditions at the start of a run: 0 where ``|g_j| <= g_zero[j]``, the
    forced side where ``g_zero[j]`` is ``FORCE_POSITIVE`` / ``FORCE_NEGATIVE`` (a value of
    the other sign in ``g`` is then set to 0, the start of a bracket), else the sign; and
    the bands ``band[j] = g_zero[n + j]`` (``n = g_zero.size // 2`` conditions)."""
    n = g_zero.size // 2
    for j in range(n):
        band[j] = g_zero[n + j]
    for j in range(n):
        if g_zero[j] == FORCE_POSITIVE:
            sides[j] = 1
            if g[j] < 0.0:
                g[j] = 0.0
        elif g_zero[j] == FORCE_NEGATIVE:
            sides[j] = -1
            if g[j] > 0.0:
                g[j] = 0.0
        else:
            sides[j] = 0 if abs(g[j]) <= g_zero[j] else side_of(g[j])


@njit(cache=True)
def triggered(side, g_new, band, direction):
    """Whether moving from ``side`` to the sign of ``g_new`` is an event of ``direction``
    (never while ``|g_new|`` is within the condition's ``band`` > 0).

    Returns 0 (no event; the caller updates the side) or the crossing's direction.
    """
    if band > 0.0 and abs(g_new) <= band:
        return 0
    s = side_of(g_new)
    if side == 0 or s == side:
        return 0
    crossing = 1 if side < 0 else -1
    if direction != 0 and direction != crossing:
        return 0
    return crossing


@njit(cache=True)
def update_sides(sides, g, g_previous, band, n):
    """After a sub-interval without event: the ``n`` conditions' new sides (where nonzero)
    and values. Within its band a condition keeps its side (a value of the other sign is
    kept as 0, the start of a bracket should it leave the band on that side); once outside
    it, its band is dropped."""
    for j in range(n):
        if band[j] > 0.0:
            if abs(g[j]) <= band[j]:
                g_previous[j] = g[j] if side_of(g[j]) == sides[j] else 0.0
                continue
            band[j] = 0.0
        g_previous[j] = g[j]
        s = side_of(g[j])
        if s != 0:
            sides[j] = s


@njit(cache=True, inline="always")
def start_bracket(bracket, ta, ga, tb, gb):
    """``bracket = [ta, ga, tb, gb, last]`` for :func:`illinois_step`."""
    bracket[0], bracket[1], bracket[2], bracket[3], bracket[4] = ta, ga, tb, gb, 0.0


@njit(cache=True, inline="always")
def bracket_done(bracket):
    """The root is found: ``g = 0`` at the bracket's end, or the bracket is a few ulps wide."""
    if bracket[3] == 0.0:
        return True
    scale = max(abs(bracket[0]), abs(bracket[2]))
    return bracket[2] - bracket[0] <= _ULPS * (np.nextafter(scale, np.inf) - scale)


@njit(cache=True, inline="always")
def bracket_resolution(bracket):
    """How well ``g`` is resolved at the root: 0 when ``g`` is exactly 0 at the bracket's
    end (the root is exact; the other end may lie a whole step away), else the larger
    ``|g|`` at the bracket's ends (a bracket a few ulps wide)."""
    if bracket[3] == 0.0:
        return 0.0
    return max(abs(bracket[1]), abs(bracket[3]))


@njit(cache=True, inline="always")
def first_point(ta, ga, tb, gb):
    """Regula falsi point of the bracket, kept strictly inside it."""
    if gb == ga:
        return 0.5 * (ta + tb)
    tm = tb - gb * (tb - ta) / (gb - ga)
    if not (ta < tm < tb):
        tm = 0.5 * (ta + tb)
    return tm


@njit(cache=True)
def illinois_step(bracket, tm, gm):
    """Shrink ``bracket = [ta, ga, tb, gb, last]`` with the value ``gm`` at ``tm``.

    ``ga`` has the condition's old sign, ``gb`` the new one (or is 0). ``last``
    remembers which end moved last: when the same end stays twice, the other
    end's value is halved (Illinois), which keeps convergence superlinear.
    Returns the next trial point.
    """
    ta, ga, tb, gb, last = bracket[0], bracket[1], bracket[2], bracket[3], bracket[4]
    if gm == 0.0 or side_of(gm) == side_of(gb):
        tb, gb = tm, gm
        if last > 0.0:
            ga *= 0.5
        last = 1.0
    else:
        ta, ga = tm, gm
        if last < 0.0:
            gb *= 0.5
        last = -1.0
    bracket[0], bracket[1], bracket[2], bracket[3], bracket[4] = ta, ga, tb, gb, last
    if gb == 0.0:
        return tb
    return first_point(ta, ga, tb, gb)
