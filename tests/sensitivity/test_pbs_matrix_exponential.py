"""exp(Z) and phi_1(Z) of the Exp step against scipy.linalg.expm (Van Loan's augmented matrix)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.linalg import expm

from pymc_odesens.sensitivity.matrix_exponential import (
    BLAS_MIN_MULTIPLICATIONS,
    EXPM_WORK_MATRICES,
    TAYLOR_DEGREES,
    TAYLOR_THETA,
    expm_and_phi1,
    expm_phi1,
    matmul_transposed,
)


def van_loan(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """exp(Z) and phi_1(Z) as blocks of exp([[Z, I], [0, 0]])."""
    n = z.shape[0]
    aug = np.zeros((2 * n, 2 * n))
    aug[:n, :n] = z
    aug[:n, n:] = np.eye(n)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # growing cases overflow in scipy
        big = expm(aug)
    return big[:n, :n], big[:n, n:]


def _matrix(kind: str, n: int, scale: float, rng) -> np.ndarray:
    if kind == "random":
        z = rng.standard_normal((n, n))
    elif kind == "stiff":  # symmetric negative definite, eigenvalues over three decades
        q = np.linalg.qr(rng.standard_normal((n, n)))[0]
        z = q @ np.diag(-np.logspace(-3, 0, n)) @ q.T
    elif kind == "conservation":  # columns sum to zero: a singular reaction-network Jacobian
        z = np.abs(rng.standard_normal((n, n)))
        np.fill_diagonal(z, 0.0)
        z -= np.diag(z.sum(axis=0))
    else:  # strongly non-normal
        z = 3.0 * np.triu(rng.standard_normal((n, n))) - np.eye(n)
    return z * scale / max(np.abs(z).max(), 1e-300)


@pytest.mark.parametrize("n", [1, 2, 5, 11])
@pytest.mark.parametrize("kind", ["random", "stiff", "conservation", "nonnormal"])
@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-3, 0.5, 4.0, 60.0, 3e3])
def test_matches_scipy(n, kind, scale):
    rng = np.random.default_rng(n * 1000 + int(scale * 7))
    z = _matrix(kind, n, scale, rng)
    e, phi = expm_and_phi1(z)
    e_ref, phi_ref = van_loan(z)
    if not (np.all(np.isfinite(e_ref)) and np.all(np.isfinite(phi_ref))):
        # e^(t lambda_max) beyond the double range (lambda_max ~ 1e3 here): the result must
        # say so with non-finite entries, never return finite garbage
        assert np.linalg.eigvals(z).real.max() > 700.0
        assert not np.all(np.isfinite(e)) and not np.all(np.isfinite(phi))
        return
    # exp(Z) of a growing random matrix at scale 60 has norm ~e^60: relative to its size
    tol = 1e-12 if scale <= 4.0 else 5e-11
    assert np.abs(e - e_ref).max() <= tol * np.abs(e_ref).max()
    assert np.abs(phi - phi_ref).max() <= tol * np.abs(phi_ref).max()


@pytest.mark.parametrize(
    "shape", [(3, 4, 5), (35, 11, 11), (21, 21, 21), (59, 21, 21), (7, 40, 40), (40, 40, 40)]
)
def test_products_on_both_sides_of_the_blas_threshold(shape):
    n, k, m = shape
    rng = np.random.default_rng(n + k + m)
    a, bt = rng.standard_normal((n, k)), rng.standard_normal((m, k))
    c = np.full((n, m), np.nan)
    matmul_transposed(a, bt, c)
    np.testing.assert_allclose(c, a @ bt.T, rtol=1e-13, atol=1e-13 * np.sqrt(k))
    if k**3 >= BLAS_MIN_MULTIPLICATIONS:  # expm's k x k products go to BLAS at this size
        z = _matrix("stiff", k, 50.0, rng)
        e, phi = expm_and_phi1(z)
        e_ref, phi_ref = van_loan(z)
        assert np.abs(e - e_ref).max() <= 1e-12 * np.abs(e_ref).max()
        assert np.abs(phi - phi_ref).max() <= 1e-12 * np.abs(phi_ref).max()


def test_singular_generator_keeps_its_conservation_law():
    # 1^T Z = 0  =>  1^T exp(Z) = 1^T and 1^T phi_1(Z) = 1^T, without any inverse of Z
    rng = np.random.default_rng(3)
    z = _matrix("conservation", 8, 200.0, rng)
    assert abs(np.linalg.det(z)) < 1e-6 * np.abs(z).max() ** 8
    e, phi = expm_and_phi1(z)
    np.testing.assert_allclose(e.sum(axis=0), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(phi.sum(axis=0), 1.0, rtol=0, atol=1e-12)


def test_zero_matrix_gives_identities():
    e, phi = expm_and_phi1(np.zeros((3, 3)))
    np.testing.assert_array_equal(e, np.eye(3))
    np.testing.assert_array_equal(phi, np.eye(3))


def test_scalar_case_is_the_scalar_functions():
    for x in [-700.0, -30.0, -1.0, -1e-6, 1e-6, 0.7, 20.0]:
        e, phi = expm_and_phi1(np.array([[x]]))
        assert e[0, 0] == pytest.approx(np.exp(x), rel=1e-13, abs=1e-300)
        assert phi[0, 0] == pytest.approx(np.expm1(x) / x, rel=1e-13)


def test_product_count_grows_with_the_norm_only_logarithmically():
    rng = np.random.default_rng(5)
    z = _matrix("stiff", 6, 1.0, rng)
    e, phi = np.empty((6, 6)), np.empty((6, 6))
    work = np.empty((EXPM_WORK_MATRICES, 6, 6))
    counts = [expm_phi1(z * s, e, phi, work) for s in (1.0, 1e2, 1e4)]
    assert counts[0] < counts[1] < counts[2]
    assert counts[2] - counts[1] <= 2 * int(np.ceil(np.log2(100.0))) + 1


def test_degree_table_is_consistent():
    assert np.all(np.diff(TAYLOR_DEGREES) > 0)
    assert np.all(np.diff(TAYLOR_THETA) > 0)
    # the bound that defines theta: the first neglected term is below unit roundoff there
    from math import factorial

    for m, theta in zip(TAYLOR_DEGREES, TAYLOR_THETA):
        assert theta ** (m + 1) / factorial(m + 2) <= 2.0**-53


def test_non_finite_input_gives_nan():
    e, phi = expm_and_phi1(np.array([[np.nan, 0.0], [0.0, 1.0]]))
    assert np.all(np.isnan(e)) and np.all(np.isnan(phi))


def test_rejects_non_square_matrices():
    with pytest.raises(ValueError, match=r"z must be a square matrix, got shape \(2, 3\)"):
        expm_and_phi1(np.zeros((2, 3)))
