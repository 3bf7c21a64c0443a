"""What happens at one event instant: which events fire, in which order, and their jumps.

An *instant* is a time at which the hybrid driver stops the integration: ``t0``, a root
atom's located crossing (:mod:`pymc_odesens.solvers.event_location`), or scheduled
times (explicit events' times and time atoms'). At an instant:

1. Every atom gets three *sides* (-1, 0, +1): just before the instant, at it and just
   after it. The crossing atom goes from ``-d`` through 0 to ``d`` (``d`` its
   direction), a time atom due now from -1 to +1; the others keep the sign of their
   value (a root atom within the margin of a crossing it just had keeps its side). A
   root atom whose sign differs from its side at the start of the integrator run
   crossed unreported at this very time (two atoms crossing together): it counts as
   crossing too (unless the runs stop at its crossings in one direction only: the other
   ones pass unreported).
2. Trigger events whose trigger goes from false to true (before -> at or at -> after;
   at ``t0``, from ``initial_value``) become *pending*, as do implicit events whose atom
   crossed in their direction and explicit events due now.
3. Pending events execute one at a time: the highest priority first (priorities are
   evaluated at the current state before each choice), events without priority after
   those with one, ties in declaration order (or drawn at random between events with
   ``random_order``, SBML's semantics). An event assigns from the state at its
   trigger time (``use_values_from_trigger_time``) or from the current state. After each
   execution the root atoms are re-evaluated: triggers switching to true set off new
   events (cascades), non-persistent pending events whose trigger became false are
   cancelled.
4. When nothing is pending, atoms left at zero (or within their margin) take the side
   towards which they leave it (the sign of ``dg/dt``): the next integrator run starts
   with that side (a bouncing ball's condition is then known to be positive just after
   the bounce, so that the next bounce is found however small), and triggers that this
   makes true fire now too. An atom *resting* on its switching surface keeps its side
   instead: its value is within the solver's tolerance of zero (how far it moves while
   the state moves by ``rtol |y| + atol``, one component at a time) and its rate is
   rounding noise, as when an event leaves the state at an equilibrium that lies on the
   surface. Its margin becomes that tolerance, and the next run gives it the same band
   (:mod:`pymc_odesens.solvers.event_location`): the drift of a value at rest neither
   crosses zero nor sets its events off again.

Sensitivity columns (``B > 0``) are converted to total derivatives at the first
execution (``T = S + f dtau``, ``dtau`` from the instant's *cause*) and back at the end
(:mod:`pymc_odesens.codegen.event_source`). The log gets one row per executed event
(its index, how many executions back its assignment values were taken, and the
vector before it) and one row closing the instant (``INSTANT_END``, the cause, the
vector after it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pymc_odesens.codegen.event_tables import (
    COL_ATOM,
    COL_DIRECTION,
    COL_HAS_PRIORITY,
    COL_INITIAL_VALUE,
    COL_KIND,
    COL_PERSISTENT,
    COL_RANDOM_ORDER,
    COL_TERMINAL,
    COL_TRIGGER_TIME_VALUES,
    KIND_CROSSING,
    KIND_SCHEDULED,
    KIND_TRIGGER,
)
from pymc_odesens.solvers import status as st
from pymc_odesens.solvers.error_norm import first_non_finite
from pymc_odesens.solvers.event_location import FORCE_NEGATIVE, FORCE_POSITIVE, side_of

__all__ = [
    "ACCUMULATION_ULPS",
    "CROSSING_MARGIN",
    "INSTANT_END",
    "INSTANT_END_TERMINAL",
    "MAX_EXECUTIONS_PER_INSTANT",
    "NOT_DIFFERENTIABLE",
    "REST_RATE_ULPS",
    "new_workspace",
    "process_instant",
]

INSTANT_END = -1
"""Event index of the log row that closes an instant (its vector: the state after it)."""
INSTANT_END_TERMINAL = -2
"""The same, for an instant that executed a terminal event (the state is frozen after it)."""
NOT_DIFFERENTIABLE = -2
"""Cause code of an instant whose events were set off by causes that move differently with
the parameters (see :mod:`pymc_odesens.model.event_atoms`)."""
MAX_EXECUTIONS_PER_INSTANT = 1000
"""Executions at one instant beyond which a cascade counts as not ending."""
CROSSING_MARGIN = 10.0
"""After its crossing a root atom counts as at zero (its side kept) while its value is within
this many times its resolution at the located root."""
REST_RATE_ULPS = 16.0
"""A root atom at zero whose rate is within this many times its rounding noise (the rate's
change when each state component moves by one unit in the last place) rests there."""
ACCUMULATION_ULPS = 16.0
"""A root atom that crosses zero again within this many units in the last place of ``t``
of its previous crossing (that set off events) means the events accumulate."""


@njit(cache=True)
def new_workspace(n, n_roots, n_atoms, n_events):
    """Work arrays of the instants of one integration (allocated once per solve)."""
    r = max(n_roots, 1)
    a = max(n_atoms, 1)
    e = max(n_events, 1)
    return (
        np.zeros(r),  # g: the root atoms' values
        np.zeros(r),  # rates: their time derivatives
        np.zeros(r),  # margin: within it of zero a root atom keeps its side
        np.zeros(r, dtype=np.int64),  # run_side: each root atom's side at the run's start
        np.full(r, -np.inf),  # last_cross: its last crossing that set off events
        np.zeros(a, dtype=np.int64),  # sides: every atom's side as the triggers see it
        np.zeros(a),  # v_before: sides just before the instant
        np.zeros(a),  # v_at: at it
        np.zeros(a),  # v_after: just after it
        np.zeros(e),  # trig: the trigger values
        np.zeros(e),  # t_before: trigger values before the instant
        np.zeros(e),  # t_at: at it
        np.zeros(e),  # t_after: after it (and after each execution)
        np.zeros(e, dtype=np.int64),  # pending: executions due of each event
        np.zeros(e, dtype=np.int64),  # trig_pos: the execution its trigger switched at
        np.zeros((e, n)),  # trig_state: the vector then (use_values_from_trigger_time)
        np.zeros(e),  # prio: the priorities
        np.zeros(n),  # z_first: the vector before the instant's first execution
        np.zeros(n),  # work: a jump's output
        np.zeros(n),  # f: the right-hand side
        (  # bands: the scales of _rest_scales and their scratch
            np.zeros(r),  # g_band: how far each root atom moves within the solver's tolerance
            np.zeros(r),  # rate_noise: how far rounding the state moves its rate
            np.zeros(r),  # g_moved: scratch for the atoms' values
            np.zeros(r),  # rate_moved: and their rates
            np.zeros(n),  # z_moved: a state moved by its tolerance in one component
        ),
    )


@njit(cache=True)
def _log(t, index, slot, z, ev_t, ev_index, ev_slot, ev_z, ev_count):
    k = ev_count[0]
    if k >= ev_t.size:
        return False
    ev_t[k] = t
    ev_index[k] = index
    ev_slot[k] = slot
    for i in range(ev_z.shape[1]):
        ev_z[k, i] = z[i]
    ev_count[0] = k + 1
    return True


@njit(cache=True)
def _refresh_root_sides(g, g_old, margin, sides, n_roots):
    """Root atoms' sides from their values ``g`` after an assignment (``g_old`` before it):
    kept when the value did not change (an execution that leaves an atom as it was cannot
    move it off the side it was given, even exactly at zero) or stays within the margin."""
    for k in range(n_roots):
        if g[k] == g_old[k] or (margin[k] > 0.0 and abs(g[k]) <= margin[k]):
            continue
        margin[k] = 0.0
        sides[k] = side_of(g[k])


@njit(cache=True)
def _switch_triggers(
    triggers, t, z, p, sides, values, new, table, trig, pending, trig_pos, trig_state, chain
):
    """Evaluate the triggers on the atoms' ``sides`` after a change at execution ``chain``:
    events whose trigger became true are pending (their trigger time: now), non-persistent
    pending events whose trigger became false are cancelled.

    Returns ``(an event triggered again while pending or -1, whether any event is
    pending)``."""
    for a in range(sides.size):
        values[a] = float(sides[a])
    triggers(t, z.ctypes, p.ctypes, values.ctypes, new.ctypes)
    again = -1
    any_pending = False
    for e in range(table.shape[0]):
        if table[e, COL_KIND] == KIND_TRIGGER:
            if trig[e] < 0.5 and new[e] > 0.5:
                if pending[e] > 0:
                    again = e
                pending[e] = 1
                trig_pos[e] = chain
                if table[e, COL_TRIGGER_TIME_VALUES] != 0:
                    for i in range(z.size):
                        trig_state[e, i] = z[i]
            elif new[e] < 0.5 and pending[e] > 0 and table[e, COL_PERSISTENT] == 0:
                pending[e] = 0
            trig[e] = new[e]
        if pending[e] > 0:
            any_pending = True
    return again, any_pending


@njit(cache=True)
def _rest_scales(t, z, p, n_state, rtol, atol, conditions, rates, g, rate, bands):
    """The scales that say whether a root atom rests on its switching surface:
    ``g_band[k] = sum_i |g_k(z + w_i e_i) - g_k(z)|`` with ``w_i = rtol_i |z_i| +
    atol_i`` (how far the atom can move while the state moves within the solver's
    tolerance) and ``rate_noise[k] = sum_i |r_k(z + u_i e_i) - r_k(z)|`` with ``u_i`` the
    spacing of the floating-point numbers at ``z_i`` (how much rounding the state moves
    its rate ``r_k = dg_k/dt``), over the state's components."""
    g_band, rate_noise, g_moved, rate_moved, z_moved = bands
    unused = np.zeros(1)
    g_band[:] = 0.0
    rate_noise[:] = 0.0
    z_moved[:] = z
    for i in range(n_state):
        z_moved[i] = z[i] + (rtol[i] * abs(z[i]) + atol[i])
        conditions(t, z_moved.ctypes, p.ctypes, unused.ctypes, g_moved.ctypes)
        z_moved[i] = np.nextafter(z[i], np.inf)
        rates(t, z_moved.ctypes, p.ctypes, unused.ctypes, rate_moved.ctypes)
        z_moved[i] = z[i]
        for k in range(g_band.size):
            g_band[k] += abs(g_moved[k] - g[k])
            rate_noise[k] += abs(rate_moved[k] - rate[k])


@njit(cache=True)
def _leave_zero(
    t, z, p, n_state, rtol, atol, conditions, rates, g, rate, margin, sides, run_side, g_zero, bands
):
    """Root atoms at zero (or within their margin) take the side the sign of ``dg/dt``
    leads to, for the triggers and for the next run's start (``g_zero`` codes); the others
    the sign of their value. An atom with a side that rests on its surface keeps its side:
    its value is within the solver's tolerance of zero and its rate within
    ``REST_RATE_ULPS`` times its rounding noise (:func:`_rest_scales`), which an event that
    leaves the state at an equilibrium on the surface does, and a bouncing ball (whose
    rate after the bounce is small but not rounding) does not. The tolerance becomes its
    margin and its band in the next run. Returns whether a trigger-visible side changed."""
    unused = np.zeros(1)
    conditions(t, z.ctypes, p.ctypes, unused.ctypes, g.ctypes)
    rates(t, z.ctypes, p.ctypes, unused.ctypes, rate.ctypes)
    n_roots = g_zero.size // 2
    if n_roots > 0:
        _rest_scales(t, z, p, n_state, rtol, atol, conditions, rates, g, rate, bands)
    g_band, rate_noise = bands[0], bands[1]
    changed = False
    for k in range(n_roots):
        g_zero[n_roots + k] = 0.0
        if (
            sides[k] != 0
            and abs(g[k]) <= max(margin[k], g_band[k])
            and abs(rate[k]) <= REST_RATE_ULPS * rate_noise[k]
        ):
            margin[k] = max(margin[k], g_band[k])
            run_side[k] = sides[k]
            g_zero[k] = FORCE_POSITIVE if sides[k] > 0 else FORCE_NEGATIVE
            g_zero[n_roots + k] = margin[k]
        elif abs(g[k]) <= margin[k]:
            r = side_of(rate[k])
            run_side[k] = r
            if r == 0:
                g_zero[k] = margin[k]
            else:
                g_zero[k] = FORCE_POSITIVE if r > 0 else FORCE_NEGATIVE
                if sides[k] != r:
                    sides[k] = r
                    changed = True
        else:
            margin[k] = 0.0
            g_zero[k] = 0.0
            run_side[k] = side_of(g[k])
            sides[k] = run_side[k]
    return changed


@njit(cache=True)
def _seed_numba_generator(seed):
    np.random.seed(seed)


def seed_event_order(seed: int) -> None:
    """Seed the generator that draws the order of tied events with ``random_order``.

    Parameters
    ----------
    seed : int
        A seed in ``[0, 2**32)`` for numba's generator in this thread (each thread and
        each process has its own, seeded from the operating system's entropy at start;
        NumPy's ``np.random.seed`` does not reach it).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    _seed_numba_generator(int(seed))


@njit(cache=True)
def _next_event(table, pending, prio):
    """The pending event to execute next (-1: none): highest priority, then declaration
    order; events without priority after those with one. A tie between two events that
    both have ``random_order`` is drawn uniformly (reservoir sampling over the tied
    events with ``random_order``, in declaration order)."""
    best = -1
    tied = 0
    for e in range(table.shape[0]):
        if pending[e] <= 0:
            continue
        if best < 0:
            best = e
            tied = 1
            continue
        has = table[e, COL_HAS_PRIORITY] != 0
        best_has = table[best, COL_HAS_PRIORITY] != 0
        if has and (not best_has or prio[e] > prio[best]):
            best = e
            tied = 1
        elif (
            has == best_has
            and (not has or prio[e] == prio[best])
            and table[e, COL_RANDOM_ORDER] != 0
            and table[best, COL_RANDOM_ORDER] != 0
        ):
            tied += 1
            if np.random.random() * tied < 1.0:
                best = e
    return best


@njit(cache=True)
def process_instant(
    t,
    z,
    p,
    is_initial,
    j_cross,
    resolution,
    rtol,
    atol,
    k_from,
    k_to,
    n_state,
    rhs,
    conditions,
    rates_kernel,
    triggers,
    priorities,
    jump,
    time_sensitivity,
    directions,
    table,
    cause_table,
    stop_owner,
    stop_slot,
    atom_time,
    g_zero,
    workspace,
    ev_t,
    ev_index,
    ev_slot,
    ev_z,
    ev_count,
    info,
):
    """Execute the events of the instant at ``t``; ``z`` (the vector before it) becomes the
    vector after it, ``g_zero`` the start codes of the next integrator run.

    ``j_cross``: the root atom whose crossing stopped the run (-1 for none);
    ``resolution``: how well its value is resolved there;
    ``rtol``, ``atol``: the solver's tolerances per component;
    ``[k_from, k_to)``: the schedule slots due at ``t``.

    Returns ``(status, executions, terminal)``; ``status`` SUCCESS, RECORD_FULL (event
    log too short), NON_FINITE_JUMP (an assignment gave NaN or inf), EVENT_ACCUMULATION or
    EVENT_NOT_DIFFERENTIABLE (with sensitivity columns), with ``info`` filled.
    """
    (
        g,
        rates,
        margin,
        run_side,
        last_cross,
        sides,
        v_before,
        v_at,
        v_after,
        trig,
        t_before,
        t_at,
        t_after,
        pending,
        trig_pos,
        trig_state,
        prio,
        z_first,
        work,
        f,
        bands,
    ) = workspace
    n = z.size
    n_roots = g_zero.size // 2
    if table.shape[0] == 0:
        return st.SUCCESS, 0, False  # without events the kernels are placeholders
    n_cols = n // n_state - 1
    unused = np.zeros(1)
    v_jump = np.zeros(1 + n_cols)  # [event, dtau of each column]
    cause, smooth = _instant_cause(
        is_initial, j_cross, k_from, k_to, n_roots, stop_slot, cause_table
    )
    if j_cross >= 0:
        # the crossing atom crossed again at once after it set off events: accumulation
        ulp = np.nextafter(abs(t), np.inf) - abs(t)
        if t - last_cross[j_cross] <= ACCUMULATION_ULPS * ulp:
            info[0], info[1] = t, t - last_cross[j_cross]
            info[2], info[3] = cause_table[j_cross + 1, 1], st.ACCUMULATION_RECROSSING
            return st.EVENT_ACCUMULATION, 0, False
        margin[j_cross] = CROSSING_MARGIN * resolution

    # 1. sides of the atoms before, at and after the instant
    conditions(t, z.ctypes, p.ctypes, unused.ctypes, g.ctypes)
    d_cross = 0
    if j_cross >= 0:
        # the direction of the crossing: the only one that stops runs, else away from the
        # side the run started with, else the sign the atom has now, else that of its rate
        d_cross = directions[j_cross]
        if d_cross == 0:
            d_cross = -run_side[j_cross]
        if d_cross == 0:
            d_cross = side_of(g[j_cross])
        if d_cross == 0:
            rates_kernel(t, z.ctypes, p.ctypes, unused.ctypes, rates.ctypes)
            d_cross = side_of(rates[j_cross])
    _atom_phases(
        t,
        n_roots,
        is_initial,
        j_cross,
        d_cross,
        k_from,
        k_to,
        g,
        margin,
        run_side,
        directions,
        stop_owner,
        atom_time,
        sides,
        v_before,
        v_at,
        v_after,
    )
    # 2. the events it sets off
    triggers(t, z.ctypes, p.ctypes, v_before.ctypes, t_before.ctypes)
    triggers(t, z.ctypes, p.ctypes, v_at.ctypes, t_at.ctypes)
    triggers(t, z.ctypes, p.ctypes, v_after.ctypes, t_after.ctypes)
    any_pending = _set_off(
        is_initial,
        k_from,
        k_to,
        table,
        stop_owner,
        v_before,
        v_after,
        t_before,
        t_at,
        t_after,
        trig,
        pending,
        trig_pos,
    )

    # 3. and 4. executions one at a time, cascades, and the sides atoms at zero leave towards
    begun = False
    executions = 0
    terminal = False
    while True:
        if any_pending and not begun:
            begun = True
            if n_cols > 0:
                reason = _to_total_derivatives(
                    t, z, p, n_state, cause, smooth, rhs, time_sensitivity, v_jump, z_first, f
                )
                if reason != 0:
                    info[0], info[1], info[2] = t, 0.0, _next_event(table, pending, prio)
                    info[3] = reason
                    return st.EVENT_NOT_DIFFERENTIABLE, executions, terminal
            for e in range(table.shape[0]):
                if pending[e] > 0 and table[e, COL_TRIGGER_TIME_VALUES] != 0:
                    trig_state[e, :] = z
        if any_pending:
            # execute the next event; its assignment may switch triggers (cascades)
            priorities(t, z.ctypes, p.ctypes, unused.ctypes, prio.ctypes)
            e = _next_event(table, pending, prio)
            offset = 0
            source = z
            if table[e, COL_KIND] == KIND_TRIGGER and table[e, COL_TRIGGER_TIME_VALUES] != 0:
                offset = executions - trig_pos[e]
                source = trig_state[e]
            logged = z_first if (executions == 0 and n_cols > 0) else z
            if not _log(t, e, offset, logged, ev_t, ev_index, ev_slot, ev_z, ev_count):
                info[0], info[1], info[2], info[3] = t, 0.0, -1, ev_t.size
                return st.RECORD_FULL, executions, terminal
            work[:] = z
            v_jump[0] = e
            jump(t, source.ctypes, p.ctypes, v_jump.ctypes, work.ctypes)
            bad = first_non_finite(work, n)
            if bad >= 0:
                info[0], info[1], info[2], info[3] = t, 0.0, bad, e
                return st.NON_FINITE_JUMP, executions, terminal
            z[:] = work
            pending[e] -= 1
            executions += 1
            terminal = terminal or table[e, COL_TERMINAL] != 0
            if executions > MAX_EXECUTIONS_PER_INSTANT:
                info[0], info[1], info[2] = t, 0.0, e
                info[3] = st.ACCUMULATION_CASCADE
                return st.EVENT_ACCUMULATION, executions, terminal
            rates[:] = g  # scratch: the values before the execution (rates are recomputed)
            conditions(t, z.ctypes, p.ctypes, unused.ctypes, g.ctypes)
            _refresh_root_sides(g, rates, margin, sides, n_roots)
        elif not _leave_zero(
            t,
            z,
            p,
            n_state,
            rtol,
            atol,
            conditions,
            rates_kernel,
            g,
            rates,
            margin,
            sides,
            run_side,
            g_zero,
            bands,
        ):
            break
        again, any_pending = _switch_triggers(
            triggers,
            t,
            z,
            p,
            sides,
            v_after,
            t_after,
            table,
            trig,
            pending,
            trig_pos,
            trig_state,
            executions,
        )
        if again >= 0:
            info[0], info[1], info[2] = t, 0.0, again
            info[3] = st.ACCUMULATION_RETRIGGERED
            return st.EVENT_ACCUMULATION, executions, terminal

    if executions == 0:
        return st.SUCCESS, executions, terminal
    if n_cols > 0 and not terminal:
        # back from total derivatives: S = T - f(after) dtau (f = 0 once terminal)
        rhs(t, z.ctypes, p.ctypes, unused.ctypes, f.ctypes)
        _add_rate_times_dtau(z, f, v_jump, n_state, -1.0)
    if j_cross >= 0:
        last_cross[j_cross] = t
    end = INSTANT_END_TERMINAL if terminal else INSTANT_END
    code = cause if smooth else NOT_DIFFERENTIABLE
    if not _log(t, end, code, z, ev_t, ev_index, ev_slot, ev_z, ev_count):
        info[0], info[1], info[2], info[3] = t, 0.0, -1, ev_t.size
        return st.RECORD_FULL, executions, terminal
    return st.SUCCESS, executions, terminal


@njit(cache=True)
def _instant_cause(is_initial, j_cross, k_from, k_to, n_roots, stop_slot, cause_table):
    """The instant's cause code (``t0``, the crossing atom, else the first slot due), and
    whether every cause present at the instant moves with the parameters like it."""
    if is_initial:
        cause = -1
    elif j_cross >= 0:
        cause = j_cross
    else:
        cause = n_roots + stop_slot[k_from]
    smooth = True
    if j_cross >= 0 and cause_table[j_cross + 1, 0] != cause_table[cause + 1, 0]:
        smooth = False
    for k in range(k_from, k_to):
        if cause_table[n_roots + stop_slot[k] + 1, 0] != cause_table[cause + 1, 0]:
            smooth = False
    return cause, smooth


@njit(cache=True)
def _atom_phases(
    t,
    n_roots,
    is_initial,
    j_cross,
    d_cross,
    k_from,
    k_to,
    g,
    margin,
    run_side,
    directions,
    stop_owner,
    atom_time,
    sides,
    v_before,
    v_at,
    v_after,
):
    """Sides of every atom before, at and after the instant (``g``: the root atoms' values);
    ``sides`` becomes the sides after it."""
    for k in range(n_roots):
        if is_initial:
            s = side_of(g[k])
            v_before[k], v_at[k], v_after[k] = s, s, s
        elif k == j_cross and d_cross != 0:
            v_before[k], v_at[k], v_after[k] = -d_cross, 0.0, d_cross
        else:
            if margin[k] > 0.0 and abs(g[k]) <= margin[k]:
                s = sides[k]
            else:
                margin[k] = 0.0
                s = side_of(g[k])
            if run_side[k] != 0 and s != run_side[k] and directions[k] == 0:
                # it crossed at this very time too, unreported (two atoms together), or
                # reached zero exactly with the crossing atom (it then leaves zero later)
                v_before[k], v_at[k], v_after[k] = run_side[k], 0.0, s
            else:
                v_before[k], v_at[k], v_after[k] = s, s, s
    for m in range(atom_time.size):
        s = side_of(t - atom_time[m])
        v_before[n_roots + m], v_at[n_roots + m], v_after[n_roots + m] = s, s, s
    for k in range(k_from, k_to):
        if stop_owner[k] < 0:
            a = n_roots - 1 - stop_owner[k]
            v_before[a], v_at[a], v_after[a] = -1.0, 0.0, 1.0
    for a in range(n_roots + atom_time.size):
        sides[a] = int(v_after[a])


@njit(cache=True)
def _set_off(
    is_initial,
    k_from,
    k_to,
    table,
    stop_owner,
    v_before,
    v_after,
    t_before,
    t_at,
    t_after,
    trig,
    pending,
    trig_pos,
):
    """Pending events of the instant from the trigger values before, at and after it (at
    ``t0`` the value before is ``initial_value``), the atoms' crossings and the slots due;
    ``trig`` becomes the trigger values after it. Returns whether any event is pending."""
    any_pending = False
    for e in range(table.shape[0]):
        pending[e] = 0
        trig_pos[e] = 0
        kind = table[e, COL_KIND]
        if kind == KIND_TRIGGER:
            before = float(table[e, COL_INITIAL_VALUE]) if is_initial else t_before[e]
            if (before < 0.5 and t_at[e] > 0.5) or (t_at[e] < 0.5 and t_after[e] > 0.5):
                pending[e] = 1
            trig[e] = t_after[e]
        elif kind == KIND_CROSSING and not is_initial:
            a = table[e, COL_ATOM]
            if v_before[a] != v_after[a] and v_after[a] != 0.0:
                direction = table[e, COL_DIRECTION]
                if direction == 0 or direction == side_of(v_after[a] - v_before[a]):
                    pending[e] = 1
        elif kind == KIND_SCHEDULED:
            for k in range(k_from, k_to):
                if stop_owner[k] == e:
                    pending[e] += 1
        if pending[e] > 0:
            any_pending = True
    return any_pending


@njit(cache=True)
def _add_rate_times_dtau(z, f, v_jump, n_state, sign):
    """``S_b += sign f dtau_b`` for every sensitivity column ``b`` (``dtau_b = v_jump[1 +
    b]``)."""
    for b in range(v_jump.size - 1):
        base = n_state * (1 + b)
        for i in range(n_state):
            z[base + i] += sign * f[i] * v_jump[1 + b]


@njit(cache=True)
def _to_total_derivatives(
    t, z, p, n_state, cause, smooth, rhs, time_sensitivity, v_jump, z_first, f
):
    """Before the first execution: ``dtau`` of each column from the cause (into
    ``v_jump[1:]``), the vector kept in ``z_first``, and the columns made total derivatives
    ``T = S + f dtau``. Returns 0, or the NOT_SMOOTH_* reason the sensitivity is refused."""
    if not smooth:
        return st.NOT_SMOOTH_CAUSES
    unused = np.zeros(1)
    v_cause = np.zeros(1)
    dtau = np.zeros(v_jump.size - 1)
    v_cause[0] = cause
    time_sensitivity(t, z.ctypes, p.ctypes, v_cause.ctypes, dtau.ctypes)
    for b in range(dtau.size):
        if not np.isfinite(dtau[b]):
            return st.NOT_SMOOTH_CROSSING
        v_jump[1 + b] = dtau[b]
    z_first[:] = z
    rhs(t, z.ctypes, p.ctypes, unused.ctypes, f.ctypes)
    _add_rate_times_dtau(z, f, v_jump, n_state, 1.0)
    return 0
