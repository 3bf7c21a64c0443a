"""SBML semantics of OdeSystem.from_sbml: states, parameters, y0(p), rules, reactions,
stoichiometry, outputs (closed forms and exact expressions; few solves)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from pymc_odesens import OdeSystem, solve
from pymc_odesens.model.sbml import SbmlConsistencyError, SbmlError
from tests.model.sbml.sbml_text import GROWING_COMPARTMENT, build_sbml


def symbols(system, *names):
    table = dict(zip(system.states, system.state_symbols))
    table.update(zip(system.params, system.param_symbols))
    return [table[n] for n in names]


def test_concentrations_in_a_constant_compartment():
    """d[A]/dt = -(k [A] V) / V with V = 2: states are concentrations, the file's values."""
    system = OdeSystem.from_sbml(
        build_sbml(
            compartments={"cell": 2.0},
            species=[{"id": "A", "amount": 3.0}, {"id": "B", "concentration": 0.25}],
            parameters={"k": 0.5},
            reactions={"R": dict(reactants=[("A", 1)], products=[("B", 2)], rate="k * A * cell")},
        )
    )
    A, B, k = symbols(system, "A", "B", "k")
    assert system.states == ["A", "B"] and system.params == ["k"]
    assert system.x0.tolist() == [1.5, 0.25]  # amount 3 in volume 2
    assert system.p_nominal.tolist() == [0.5]
    assert sp.simplify(system.rhs_expressions[0] + k * A) == 0
    assert sp.simplify(system.rhs_expressions[1] - 2 * k * A) == 0
    assert system.sbml.state_units == {"A": "concentration", "B": "concentration"}
    assert system.reaction_ids == ["R"]
    assert system.stoichiometry == sp.Matrix([[-sp.Rational(1, 2)], [1]])
    assert system.conservation_laws.describe() == ["A + 1/2*B = const"]
    rates = sp.Matrix([system.outputs["R"]])
    f = sp.Matrix(system.stoichiometry) * rates - sp.Matrix(system.rhs_expressions)
    assert sp.simplify(f) == sp.zeros(2, 1)
    assert system.sbml.amounts["A"] == 2 * A
    assert system.sbml.concentrations["B"] == B
    assert system.outputs["cell"] == 2


def test_species_with_only_substance_units_are_amounts():
    system = OdeSystem.from_sbml(
        build_sbml(
            compartments={"cell": 4.0},
            species=[{"id": "A", "concentration": 0.5, "only_substance": True}],
            parameters={"k": 0.5},
            reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
        )
    )
    (A,) = symbols(system, "A")
    assert system.x0.tolist() == [2.0]
    assert system.sbml.state_units == {"A": "amount"}
    assert system.sbml.concentrations["A"] == A / 4
    assert system.stoichiometry == sp.Matrix([[-1]])


def test_a_species_in_a_growing_compartment_keeps_its_amount():
    """dV/dt = r: the amount n0 stays, the concentration is n0 / (V0 + r t)."""
    system = OdeSystem.from_sbml(GROWING_COMPARTMENT)
    assert system.states == ["A", "cell"]
    assert system.sbml.state_units == {"A": "amount", "cell": "value"}
    assert system.x0.tolist() == [6.0, 2.0]
    assert system.stoichiometry is None  # a rate rule drives a state
    times = np.linspace(0, 4, 5)
    solution = solve(system, None, times, system.p_nominal, method="bdf")
    np.testing.assert_allclose(solution["A"], 6.0 / (2.0 + 0.5 * times), rtol=1e-9)
    np.testing.assert_allclose(solution.concentration("A"), solution["A"], rtol=1e-15)
    np.testing.assert_allclose(solution.amount("A"), 6.0, rtol=1e-9)
    np.testing.assert_allclose(solution["cell"], 2.0 + 0.5 * times, rtol=1e-9)


def test_rate_rule_of_a_concentration_in_a_growing_compartment():
    """d[A]/dt = 1 with dV/dt = 1: the amount state follows d(c V)/dt = V + c."""
    system = OdeSystem.from_sbml(
        build_sbml(
            compartments={"cell": (1.0, False)},
            species=[{"id": "A", "concentration": 0.0, "boundary": True}],
            rate_rules={"cell": "1", "A": "1"},
        )
    )
    times = np.linspace(0, 2, 3)
    solution = solve(system, None, times, system.p_nominal, method="bdf")
    np.testing.assert_allclose(solution["A"], times, atol=1e-9)
    np.testing.assert_allclose(solution.amount("A"), times * (1 + times), atol=1e-9)


def test_initial_assignments_make_y0_a_function_of_the_parameters():
    system = OdeSystem.from_sbml(
        build_sbml(
            species=[{"id": "A", "concentration": 1.0}],
            parameters={"k1": 2.0, "k2": 1.0, "scale": 3.0},
            initial_assignments={"A": "scale * k2", "k2": "k1 / 4"},
            reactions={"R": dict(reactants=[("A", 1)], rate="k2 * A")},
        )
    )
    A, k1, scale = symbols(system, "A", "k1", "scale")
    assert system.params == ["k1", "scale"]  # k2 is set by its initial assignment
    assert system.x0.tolist() == [1.5]
    assert system.initial_state_expressions == (scale * k1 / 4,)
    assert system.initial_state_jacobian == sp.Matrix([[scale / 4], [k1 / 4]])
    assert sp.simplify(system.rhs_expressions[0] + k1 * A / 4) == 0
    assert system.sbml.roles["k2"] == "constant"


def test_assignment_rules_are_substituted_and_readable():
    system = OdeSystem.from_sbml(
        build_sbml(
            species=[{"id": "A", "concentration": 1.0}],
            parameters={"k": 0.5, "rate": (None, False), "double_A": (None, False)},
            assignment_rules={"rate": "k * (1 + time)", "double_A": "2 * A"},
            reactions={"R": dict(reactants=[("A", 1)], rate="rate * A")},
        )
    )
    A, k = symbols(system, "A", "k")
    assert system.states == ["A"] and system.params == ["k"]
    assert sp.simplify(system.rhs_expressions[0] + k * (1 + system.t) * A) == 0
    assert system.outputs["double_A"] == 2 * A
    times = np.array([0.0, 1.0])
    solution = solve(system, None, times, system.p_nominal, method="bdf")
    expected = np.exp(-0.5 * (times + times**2 / 2))
    np.testing.assert_allclose(solution["double_A"], 2 * expected, rtol=1e-8)
    np.testing.assert_allclose(solution["rate"], 0.5 * (1 + times), rtol=1e-15)


def test_local_parameters_shadow_global_ids():
    system = OdeSystem.from_sbml(
        build_sbml(
            species=[{"id": "A", "concentration": 1.0}],
            parameters={"k": 100.0},
            reactions={"R": dict(reactants=[("A", 1)], rate="k * A", local={"k": 0.25})},
        )
    )
    (A,) = symbols(system, "A")
    assert sp.simplify(system.rhs_expressions[0] + A / 4) == 0


def test_conversion_factors_and_variable_stoichiometry():
    system = OdeSystem.from_sbml(
        build_sbml(
            species=[
                {"id": "A", "concentration": 1.0, "conversion_factor": "cf"},
                {"id": "B", "concentration": 0.0},
            ],
            # the stoichiometry of B is the species reference 'n', 2 at first (a parameter
            # of that id as well would make the document invalid)
            parameters={"cf": 3.0},
            rate_rules={"n": "1"},
            reactions={
                "R": dict(
                    reactants=[("A", 1)],
                    products=[("B", 2.0)],
                    rate="A",
                    reference_ids={"B": "n"},
                )
            },
        )
    )
    A, B, n, cf = symbols(system, "A", "B", "n", "cf")
    assert system.states == ["A", "B", "n"]
    assert system.rhs_expressions == (-cf * A, n * A, 1)
    assert system.stoichiometry is None


def test_rate_of_and_reactions_in_math():
    system = OdeSystem.from_sbml(
        build_sbml(
            species=[{"id": "A", "concentration": 2.0}],
            parameters={"k": 0.5, "speed": (None, False), "flux": (None, False)},
            reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
            assignment_rules={"speed": "rateOf(A)", "flux": "2 * R"},
        )
    )
    A, k = symbols(system, "A", "k")
    assert system.outputs["speed"] == -k * A
    assert system.outputs["flux"] == 2 * k * A
    assert system.outputs["R"] == k * A


def test_zero_dimensional_compartments_hold_amounts():
    system = OdeSystem.from_sbml(
        build_sbml(
            compartments={"point": (None, True, 0)},
            species=[{"id": "A", "amount": 2.0}],
            parameters={"k": 0.5},
            reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
        )
    )
    (A,) = symbols(system, "A")
    assert system.sbml.state_units == {"A": "amount"}
    assert system.sbml.amounts == {"A": A}
    assert system.sbml.concentrations == {}
    assert "point" not in system.outputs  # its size is undefined
    solution = solve(system, None, [0.0, 1.0], system.p_nominal, method="bdf")
    with pytest.raises(ValueError, match="0-dimensional compartment"):
        solution.concentration("A")
    with pytest.raises(KeyError, match="no species 'B'"):
        solution.amount("B")


def test_a_model_of_rules_only_has_no_states():
    system = OdeSystem.from_sbml(
        build_sbml(
            compartments={},
            parameters={"p": (None, False), "q": 2.0},
            assignment_rules={"p": "q * time"},
        )
    )
    assert system.n_states == 0
    solution = solve(system, None, [0.0, 1.5], system.p_nominal)
    np.testing.assert_allclose(solution["p"], [0.0, 3.0])


def test_undefined_values_are_errors_where_used():
    text = build_sbml(
        species=[{"id": "A"}],
        parameters={"k": 1.0},
        reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
    )
    with pytest.raises(SbmlError, match="'A' has no value"):
        OdeSystem.from_sbml(text)
    with pytest.raises(SbmlError, match="parameter 'k' has no value"):
        OdeSystem.from_sbml(
            build_sbml(
                species=[{"id": "A", "concentration": 1.0}],
                parameters={"k": None},
                reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
            )
        )
    # libsbml's consistency check finds the cycle (the importer's own guard,
    # "circular definition", stays for what libsbml does not check)
    with pytest.raises(
        SbmlConsistencyError,
        match=r"Circular dependencies involving rules and reactions are not permitted: The "
        r"<assignmentRule> with variable 'a' creates a cycle with the <assignmentRule> with "
        r"variable 'b'",
    ):
        OdeSystem.from_sbml(
            build_sbml(
                parameters={"a": (None, False), "b": (None, False)},
                assignment_rules={"a": "b + 1", "b": "a * 2"},
            )
        )


DECAY = dict(
    species=[{"id": "A", "concentration": 2.0}],
    parameters={"k": 0.5},
    reactions={"R": dict(reactants=[("A", 1)], rate="k * A")},
)


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        # NaN in a kinetic law was reported as a piecewise without otherwise
        (
            dict(reactions={"R": dict(reactants=[("A", 1)], rate="k * A * notanumber")}),
            r"kinetic law of reaction 'R' is NaN \(its math holds notanumber or infinity",
        ),
        # a parameter of value INF: the error showed -oo*A and lost the name k
        (
            dict(parameters={"k": float("inf")}),
            r"kinetic law of reaction 'R' uses the parameter 'k', whose value is inf",
        ),
        (
            dict(
                reactions={
                    "R": dict(reactants=[("A", 1)], rate="kl * A", local={"kl": float("-inf")})
                }
            ),
            r"kinetic law of reaction 'R' uses its local parameter 'kl' = -inf",
        ),
        # a compartment of size 0: the error showed zoo*A*k
        (
            dict(compartments={"c": 0.0}),
            r"the compartment 'c' of 'A' has size 0.0, and 'A' is a concentration \(amount / "
            r"size\) that the stoichiometry of 'A' in reaction 'R' changes",
        ),
        # a stoichiometry of 1e308 over a size of 0.1 is beyond the doubles: the code
        # generator failed inside
        (
            dict(
                compartments={"c": 0.1},
                reactions={"R": dict(reactants=[("A", 1e308)], rate="k * A")},
            ),
            r"the stoichiometry of 'A' in reaction 'R' \(times its conversion factor, over its "
            r"compartment's size\) is -1.00000e\+309",
        ),
        (
            dict(
                parameters={"k": 0.5, "kk": float("inf"), "x": (0.0, False)},
                rate_rules={"x": "-kk"},
            ),
            r"rate rule for 'x' uses the parameter 'kk', whose value is inf",
        ),
    ],
)
def test_a_rate_of_change_without_a_finite_value_names_its_source(changes, names):
    with pytest.raises(SbmlError) as info:
        OdeSystem.from_sbml(build_sbml(**{**DECAY, **changes}))
    assert type(info.value) is SbmlError
    info.match(r"<string>: " + names)
    info.match(r"the rate of change of '(A|x)' is not finite$")


def test_non_finite_values_outside_the_rates_of_change_are_outputs():
    # NaN and INF are values SBML allows; only a rate of change must be finite
    system = OdeSystem.from_sbml(
        build_sbml(
            **{**DECAY, "parameters": {"k": 0.5, "big": float("inf"), "y": (0.0, False)}},
            assignment_rules={"y": "big * A"},
        )
    )
    assert system.states == ["A"]
    assert system.outputs["y"].has(sp.oo)
