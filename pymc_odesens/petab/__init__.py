"""Layer 6: PEtab problems as log-likelihoods, gradients and PyMC models.

``PetabProblem.from_yaml(path)`` reads a PEtab v1 or v2 problem (its YAML file or its
folder) with the petab library (the tables; v2 in its v1 form) and
:meth:`OdeSystem.from_sbml <pymc_odesens.OdeSystem.from_sbml>` (the model);
``.log_likelihood(x)``, ``.log_likelihood_gradient(x)`` and ``.build_model()`` follow;
:func:`sample_posterior` runs the whole recipe to a checked posterior. See docs/petab.md.
This layer imports every other; nothing imports it.
"""

from pymc_odesens.petab.errors import PetabError, PetabUnsupportedError
from pymc_odesens.petab.likelihood_source import PetabLikelihoodSource
from pymc_odesens.petab.posterior import sample_posterior
from pymc_odesens.petab.problem import PetabProblem
from pymc_odesens.petab.solver_options import SolverOptions
from pymc_odesens.petab.tolerance_choice import GradientConvergenceError

__all__ = [
    "PetabProblem",
    "PetabError",
    "PetabUnsupportedError",
    "GradientConvergenceError",
    "SolverOptions",
    "PetabLikelihoodSource",
    "sample_posterior",
]
