"""Layer 4: sensitivities of ODE solutions (forward, adjoint, Peano–Baker series)."""

from pymc_odesens.sensitivity.adjoint import (
    AdjointCheckpoints,
    AdjointGradient,
    adjoint_forward,
    adjoint_gradient,
)
from pymc_odesens.sensitivity.adjoint_controls import AdjointControls
from pymc_odesens.sensitivity.fisher_information import (
    FisherInformationResult,
    fisher_information,
)
from pymc_odesens.sensitivity.pbs_errors import NonFiniteSensitivityError
from pymc_odesens.sensitivity.pbs_options import PbsOptions
from pymc_odesens.sensitivity.pbs_report import PbsStepReport
from pymc_odesens.sensitivity.result import SensitivityResult
from pymc_odesens.sensitivity.solve_sensitivity import SENSITIVITY_METHODS, solve_sensitivity
from pymc_odesens.sensitivity.steady_state import (
    SteadyStateGradient,
    SteadyStateResult,
    steady_state,
)
from pymc_odesens.sensitivity.steady_state_errors import (
    SteadyStateError,
    SteadyStateNotReachedError,
    SteadyStateSingularError,
)

__all__ = [
    "SENSITIVITY_METHODS",
    "SensitivityResult",
    "NonFiniteSensitivityError",
    "PbsOptions",
    "PbsStepReport",
    "solve_sensitivity",
    "AdjointCheckpoints",
    "AdjointControls",
    "AdjointGradient",
    "adjoint_forward",
    "adjoint_gradient",
    "FisherInformationResult",
    "fisher_information",
    "steady_state",
    "SteadyStateResult",
    "SteadyStateGradient",
    "SteadyStateError",
    "SteadyStateNotReachedError",
    "SteadyStateSingularError",
]
