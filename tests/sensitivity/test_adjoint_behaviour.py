"""Adjoint gradients: the two phases, checkpoints and memory, output times at t0 and
repeated, and the step limit of the re-integration."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import OdeSystem, adjoint_forward, adjoint_gradient, solve, solve_sensitivity
from tests.sensitivity.adjoint_reference import (
    BOUNDS_1E8,
    FORWARD_ATOL_FACTOR,
    adjoint_controls,
    component_error,
    reference_case,
    relative_error,
)


def _forward(ref: dict, tol: float = 1e-8, **extra):
    system = ref["system"]
    return adjoint_forward(
        system,
        ref["y0"],
        ref["t"],
        system.p_nominal,
        t0=system.t0,
        **adjoint_controls(ref["name"], tol, **extra),
    )


@pytest.mark.parametrize("name", ("lotka_volterra", "pka"))
def test_two_phase_equals_separate_calls(name):
    """One forward pass, backward with two cotangents (and the first again): identical to
    two adjoint_gradient calls, bit for bit."""
    ref = reference_case(name)
    system = ref["system"]
    c1 = ref["cot"]
    c2 = np.random.default_rng(7).standard_normal(c1.shape)
    checkpoints = _forward(ref)
    a1 = checkpoints.backward(c1)
    a2 = checkpoints.backward(c2)
    a1_again = checkpoints.backward(c1)
    separate = [
        adjoint_gradient(
            system,
            ref["y0"],
            ref["t"],
            system.p_nominal,
            c,
            t0=system.t0,
            **adjoint_controls(name, 1e-8),
        )
        for c in (c1, c2)
    ]
    for two_phase, single in ((a1, separate[0]), (a2, separate[1]), (a1_again, separate[0])):
        np.testing.assert_array_equal(two_phase.params, single.params)
        np.testing.assert_array_equal(two_phase.y0, single.y0)
        np.testing.assert_array_equal(two_phase.y, single.y)
        assert two_phase.stats == single.stats
    assert not np.allclose(a1.params, a2.params)  # the cotangent does matter
    # and both are right
    forward = solve_sensitivity(
        system,
        ref["y0"],
        ref["t"],
        system.p_nominal,
        t0=system.t0,
        relative_tolerance=1e-10,
        absolute_tolerance=1e-10 * FORWARD_ATOL_FACTOR[name],
    )
    assert relative_error(a2.params, np.einsum("ti,tik->k", c2, forward.S)) < BOUNDS_1E8[name][0]


@pytest.mark.parametrize("steps_between", (5, 20, 10**6))
@pytest.mark.parametrize("name", ("lotka_volterra", "pka", "robertson"))
def test_checkpoints(name, steps_between):
    """num_steps_between_checkpoints = K: one checkpoint at t0 and one every K forward
    steps, so memory is C = 1 + steps // K states plus one re-integrated stretch; the
    gradient stays within the rtol-1e-8 bounds however small K is.

    Measured (dL/dp against the truth, relative / per component) for K = 5, 20, 150, 1e6:
    lotka_volterra 2.9e-6 / 2.6e-7 ... 3.6e-6 / 3.2e-7, pka 1.2e-9 ... 3.5e-9 / 3.8e-9 ...
    1.2e-8, robertson 1.5e-7 ... 3.2e-7 / 7.5e-8 ... 1.4e-7.
    """
    ref = reference_case(name)
    system = ref["system"]
    checkpoints = _forward(ref, num_steps_between_checkpoints=steps_between)
    n_steps = checkpoints.stats["n_steps"]
    n_checkpoints = checkpoints.checkpoint_times.size
    assert n_checkpoints == 1 + n_steps // steps_between
    assert checkpoints.checkpoint_states.shape == (n_checkpoints, system.n_states)
    assert checkpoints.checkpoint_times[0] == system.t0
    np.testing.assert_array_equal(checkpoints.checkpoint_states[0], ref["y0"])
    assert np.all(np.diff(checkpoints.checkpoint_times) > 0)
    assert checkpoints.checkpoint_times[-1] <= ref["t"][-1]
    # the forward pass is the plain solve with the same controls: its output bit for bit,
    # and the checkpoints are its states at the checkpoint times (up to the rounding of
    # the last step, which solve() shortens to end at the last checkpoint)
    kw = dict(
        t0=system.t0,
        method="bdf",
        relative_tolerance=1e-8,
        absolute_tolerance=1e-8 * FORWARD_ATOL_FACTOR[name],
    )
    plain = solve(system, ref["y0"], ref["t"], system.p_nominal, **kw)
    np.testing.assert_array_equal(checkpoints.y, plain.y)
    assert checkpoints.stats == plain.stats
    if n_checkpoints > 1:
        at_checkpoints = solve(
            system, ref["y0"], checkpoints.checkpoint_times[1:], system.p_nominal, **kw
        )
        np.testing.assert_allclose(
            checkpoints.checkpoint_states[1:],
            at_checkpoints.y,
            rtol=1e-12,
            atol=1e-14 * np.abs(ref["y"]).max(),
        )

    g = checkpoints.backward(ref["cot"])
    assert g.stats["n_checkpoints"] == n_checkpoints
    # every stretch is re-integrated once: at least the forward steps, more when the
    # stretches are short (each restarts at order 1)
    assert g.stats["reintegration"]["n_steps"] >= n_steps
    # the re-integration record holds one stretch: about K steps, not the whole run
    assert checkpoints._buffer_capacity <= 2 * min(steps_between, n_steps) + 64
    p_rel, p_comp = BOUNDS_1E8[name][:2]
    assert relative_error(g.params, ref["g_truth"]) < p_rel
    assert component_error(g.params, ref["g_truth"], ref["scale_truth"]) < p_comp


def test_fewer_steps_between_checkpoints_means_more_checkpoints():
    ref = reference_case("pka")
    counts = [
        _forward(ref, num_steps_between_checkpoints=k).checkpoint_times.size
        for k in (1000, 150, 20, 5)
    ]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] > 100, counts


# ---------------------------------------------------------------------------------------
# Output times


def test_cotangent_at_t0_goes_into_dL_dy0():
    """``times[0] == t0``: the cotangent there is added to lambda(t0) after the backward
    solve, so it enters dL/dy0 exactly and dL/dp not at all (y0 given)."""
    ref = reference_case("lotka_volterra")
    system = ref["system"]
    cot = ref["cot"].copy()
    assert ref["t"][0] == system.t0

    def run(c):
        return adjoint_gradient(
            system,
            ref["y0"],
            ref["t"],
            system.p_nominal,
            c,
            t0=system.t0,
            **adjoint_controls("lotka_volterra", 1e-8),
        )

    only_t0 = np.zeros_like(cot)
    only_t0[0] = cot[0]
    g = run(only_t0)
    np.testing.assert_array_equal(g.y0, cot[0])
    np.testing.assert_array_equal(g.params, np.zeros(system.n_params))

    without_t0 = cot.copy()
    without_t0[0] = 0.0
    g_with, g_without = run(cot), run(without_t0)
    np.testing.assert_array_equal(g_with.params, g_without.params)
    np.testing.assert_array_equal(g_with.y0, g_without.y0 + cot[0])


def test_cotangent_at_t0_with_initial_state_from_params():
    """y0(p) = (a^2, 1/a), output only at t0: dL/dp = (dy0/dp)^T c exactly."""
    system = OdeSystem(
        lambda t, y, p: [-p.a * y[0] + p.b * y[1], -p.b * y[1]],
        states=["u", "v"],
        params=["a", "b"],
        initial_state=lambda p: [p.a**2, 1 / p.a],
    )
    a, b = 0.8, 0.3
    c = np.array([[3.0, -4.0]])
    g = adjoint_gradient(system, None, [0.0], [a, b], c)
    np.testing.assert_array_equal(g.y0, c[0])
    np.testing.assert_allclose(g.params, [2 * a * 3.0 + 4.0 / a**2, 0.0], rtol=1e-15)
    np.testing.assert_allclose(g.y, [[a**2, 1 / a]], rtol=1e-15)


def _merged(times, cot):
    """The same loss on the distinct times: cotangent rows of equal times summed."""
    unique, index = np.unique(times, return_inverse=True)
    merged = np.zeros((unique.size, cot.shape[1]))
    np.add.at(merged, index, cot)
    return unique, merged


@pytest.mark.parametrize(
    "times",
    [
        [0.0, 1.0, 1.0, 2.5, 2.5, 2.5, 4.0],
        [0.0, 0.0, 3.0, 3.0],
        # distinct but a few roundings apart (0.3 and 0.1 * 3): too close for one step
        [0.3, 0.1 * 3, 1.0, 2.0, 2.0 + 4.5e-16],
    ],
    ids=["repeated", "repeated-t0-and-end", "one-rounding-apart"],
)
def test_repeated_output_times(times):
    """Equal (or all but equal) output times: their cotangents add up, as on the distinct
    times with the rows summed, and agree with forward sensitivities."""
    ref = reference_case("lotka_volterra")
    system, p = ref["system"], ref["system"].p_nominal
    times = np.array(times)
    cot = np.random.default_rng(11).standard_normal((times.size, 2))
    controls = adjoint_controls("lotka_volterra", 1e-10)
    g = adjoint_gradient(system, ref["y0"], times, p, cot, **controls)
    unique, merged = _merged(times, cot)
    g_merged = adjoint_gradient(system, ref["y0"], unique, p, merged, **controls)
    # lambda + (c1 + c2) and (lambda + c1) + c2 round differently, and the adaptive
    # backward solve may then choose other steps: equal to well within its tolerance
    # (measured at rtol 1e-10: up to 1.4e-12 for dL/dp, 2.8e-11 for dL/dy0)
    assert relative_error(g.params, g_merged.params) < 3e-10
    assert relative_error(g.y0, g_merged.y0) < 3e-10
    exact = times[:, None] == times[None, :]
    for i, j in zip(*np.nonzero(exact)):
        np.testing.assert_array_equal(g.y[i], g.y[j])
    forward = solve_sensitivity(
        system, ref["y0"], times, p, wrt="both", relative_tolerance=1e-11, absolute_tolerance=1e-13
    )
    # measured 7e-10 .. 1.3e-8
    assert relative_error(g.params, np.einsum("ti,tik->k", cot, forward.S)) < 1e-7
    assert relative_error(g.y0, np.einsum("ti,tij->j", cot, forward.S_y0)) < 1e-7


def test_max_num_steps_counts_between_output_times_when_reintegrating():
    """One stretch for the whole run (K = 1e6): the re-integration counts max_num_steps
    between output times, as the forward pass does, not over the stretch. linear2 takes
    37 forward steps over 60 output intervals and at most 15 backward steps in one."""
    ref = reference_case("linear2")
    system = ref["system"]

    def run(**extra):
        return adjoint_gradient(
            system,
            ref["y0"],
            ref["t"],
            system.p_nominal,
            ref["cot"],
            t0=system.t0,
            num_steps_between_checkpoints=10**6,
            **extra,
        )

    limited, unlimited = run(max_num_steps=20), run()
    assert unlimited.stats["n_checkpoints"] == 1
    assert unlimited.stats["reintegration"]["n_steps"] > 20
    np.testing.assert_array_equal(limited.params, unlimited.params)
    np.testing.assert_array_equal(limited.y0, unlimited.y0)


def test_system_without_states_is_refused_by_name():
    system = OdeSystem.from_expressions(
        [],
        sp.Symbol("t"),
        [],
        [sp.Symbol("k"), sp.Symbol("q")],
        name="rules_only",
        allow_no_states=True,
    )
    with pytest.raises(ValueError, match="adjoint_forward: system 'rules_only' has no states"):
        adjoint_gradient(system, [], [0.0, 1.0], [1.0, 2.0], np.zeros((2, 0)))
