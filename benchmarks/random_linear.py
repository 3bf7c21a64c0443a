"""The random linear system of the PBS paper (Eriksson et al., arXiv:2109.00067, Sec. 6).

``x' = A x + p**2 + u`` with ``A = -B^T B``, ``B`` (n x n) and ``p`` uniform on [0, 1]
(numpy ``default_rng(seed)``, ``B`` drawn first, then ``p``), ``u = 1``, n = N = P,
``x(0) = 0``. Closed form: ``x(t) = A^{-1} (e^{At} - I) c`` with ``c = p**2 + u`` and
``dx(t)/dp = A^{-1} (e^{At} - I) diag(2 p)``.

Every benchmark (forward sensitivities, adjoint, PBS) uses this one definition so that
their numbers are comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_SEED", "RandomLinearProblem", "random_linear_problem"]

DEFAULT_SEED = 20210901


@dataclass(frozen=True)
class RandomLinearProblem:
    """One instance of the random linear system, with its closed-form solution."""

    n: int
    seed: int
    A: np.ndarray
    p: np.ndarray

    @property
    def y0(self) -> np.ndarray:
        return np.zeros(self.n)

    def system(self):
        """The :class:`pymc_odesens.OdeSystem` (named by n and seed, so kernels cache per size)."""
        from pymc_odesens import OdeSystem

        A, n = self.A, self.n

        def rhs(t, y, q):
            return [
                sum(float(A[i, j]) * y[j] for j in range(n)) + q[i] ** 2 + 1.0 for i in range(n)
            ]

        return OdeSystem(
            rhs,
            states=[f"x{i}" for i in range(n)],
            params=[f"p{i}" for i in range(n)],
            name=f"random_linear_{n}_seed{self.seed}",
        )

    def exact_states(self, times: np.ndarray) -> np.ndarray:
        """``x(t)`` at each time, shape (T, n)."""
        from scipy.linalg import expm, solve

        c = self.p**2 + 1.0
        eye = np.eye(self.n)
        return np.array([solve(self.A, (expm(self.A * t) - eye) @ c) for t in times])

    def exact_sensitivities(self, times: np.ndarray) -> np.ndarray:
        """``dx(t)/dp`` at each time, shape (T, n, n)."""
        from scipy.linalg import expm, solve

        eye = np.eye(self.n)
        return np.array([solve(self.A, expm(self.A * t) - eye) * (2.0 * self.p) for t in times])


def random_linear_problem(n: int, seed: int = DEFAULT_SEED) -> RandomLinearProblem:
    """Draw the size-``n`` instance for ``seed`` (``B`` first, then ``p``)."""
    if n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    B = rng.uniform(size=(n, n))
    p = rng.uniform(size=n)
    return RandomLinearProblem(n=n, seed=seed, A=-B.T @ B, p=p)
