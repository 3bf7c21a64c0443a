"""The blocks of a marginal likelihood: which measurements and parameters they hold, their
closed form, the normal-inverse-gamma prior precision, and what is refused (named)."""

import math

import numpy as np
import pytest
from scipy.special import digamma

from pymc_odesens.ops import MarginalColumn, MarginalNoise, MarginalNormalStructure
from pymc_odesens.ops.marginal_structure import (
    KNOWN_NOISE,
    MARGINAL_NOISE,
    NORMAL_INVERSE_GAMMA,
)


def test_blocks_kinds_and_priors():
    # rows 0-2: scaling a with given noise; rows 3-5: scaling b and noise v (NIG), rows
    # 6-7: noise v too (same block); rows 8-9: noise w alone; row 10: offset c, given noise
    columns = [
        MarginalColumn("a", 1.0, 2.0),
        MarginalColumn("b", 0.0, 0.5),
        MarginalColumn("c", 3.0, 4.0),
    ]
    noises = [MarginalNoise("v", 2.0, 0.3), MarginalNoise("w", 1.5, 0.1)]
    structure = MarginalNormalStructure.build(
        11,
        [0, 1, 2, 3, 4, 5, 10],
        [0, 0, 0, 1, 1, 1, 2],
        columns,
        [-1, -1, -1, 0, 0, 0, 0, 0, 1, 1, -1],
        noises,
    )
    assert structure.n_blocks == 4
    assert structure.block_kind.tolist() == [
        KNOWN_NOISE,
        NORMAL_INVERSE_GAMMA,
        MARGINAL_NOISE,
        KNOWN_NOISE,
    ]
    assert structure.block_noise.tolist() == [-1, 0, 1, -1]
    rows = [
        structure.block_rows[
            structure.block_rows_start[b] : structure.block_rows_start[b + 1]
        ].tolist()
        for b in range(4)
    ]
    assert rows == [[0, 1, 2], [3, 4, 5, 6, 7], [8, 9], [10]]
    # the NIG column's precision is relative to the noise variance: sigma_ref^2 / sd^2
    reference = 0.3 * math.exp(-digamma(2.0))
    np.testing.assert_allclose(structure.prior_precision, [1 / 4.0, reference / 0.25, 1 / 16.0])
    assert noises[0].reference_variance == pytest.approx(reference)
    assert structure.max_columns == 1
    assert "normal-inverse-gamma" in structure.block_description(1)
    assert "b" in structure.block_description(1) and "v" in structure.block_description(1)


def test_columns_sharing_rows_form_one_block():
    columns = [
        MarginalColumn("s", 1.0, 1.0),
        MarginalColumn("o", 0.0, 1.0),
        MarginalColumn("t", 0.0, 1.0),
    ]
    # s on rows 0-3, o on rows 2-5, t on rows 6-7: s and o share rows 2-3
    structure = MarginalNormalStructure.build(
        8,
        [0, 1, 2, 3, 2, 3, 4, 5, 6, 7],
        [0, 0, 0, 0, 1, 1, 1, 1, 2, 2],
        columns,
        [-1] * 8,
    )
    assert structure.n_blocks == 2
    assert structure.max_columns == 2
    assert structure.block_columns[: structure.block_columns_start[1]].tolist() == [0, 1]


@pytest.mark.parametrize(
    "row_noise, match",
    [
        ([0, 0, 1, 1], r"link measurements of the noise variance\(s\) v, w"),
        ([0, 0, -1, -1], "given noise and the noise variance"),
    ],
)
def test_columns_linking_different_noise_are_refused(row_noise, match):
    with pytest.raises(ValueError, match=match) as error:
        MarginalNormalStructure.build(
            4,
            [0, 1, 2, 3],
            [0, 0, 0, 0],
            [MarginalColumn("scale", 1.0, 1.0)],
            row_noise,
            [MarginalNoise("v", 1.0, 1.0), MarginalNoise("w", 1.0, 1.0)][: max(row_noise) + 1],
        )
    assert "scale" in str(error.value)


@pytest.mark.parametrize(
    "arguments, match",
    [
        (dict(entry_row=[0, 5], entry_column=[0, 0]), r"entry_row must lie in \[0, 3\)"),
        (dict(entry_row=[0, 1], entry_column=[0, 1]), r"entry_column must lie in \[0, 1\)"),
        (dict(entry_row=[0, 1], entry_column=[0]), "entry_column must have 2 entries"),
        (dict(entry_row=[0, 1], entry_column=[0, 0], row_noise=[-1, -1]), "row_noise must have 3"),
        (dict(entry_row=[0, 1], entry_column=[0, 0], row_noise=[-1, -1, -1]), "row 2 has no"),
        (dict(entry_row=[[0, 1]], entry_column=[0, 0]), "1-d integer array"),
    ],
)
def test_bad_structures_are_refused(arguments, match):
    values = dict(row_noise=[-1, -1, 0], noises=[MarginalNoise("v", 1.0, 1.0)])
    values.update(arguments)
    with pytest.raises(ValueError, match=match):
        MarginalNormalStructure.build(3, columns=[MarginalColumn("s", 0.0, 1.0)], **values)


def test_unused_parameters_are_refused():
    with pytest.raises(ValueError, match="the column t is used by no row"):
        MarginalNormalStructure.build(
            2,
            [0, 1],
            [0, 0],
            [MarginalColumn("s", 0.0, 1.0), MarginalColumn("t", 0.0, 1.0)],
            [-1, -1],
        )


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: MarginalColumn("s", 0.0, -1.0), "standard deviation of 's'"),
        (lambda: MarginalColumn("s", math.nan, 1.0), "prior mean of 's' must be finite"),
        (lambda: MarginalColumn("s", 0.0, 1.0, variable="ln"), "variable of 's'"),
        (lambda: MarginalNoise("v", 0.0, 1.0), "alpha of 'v'"),
        (lambda: MarginalNoise("v", 1.0, 1.0, report="sqrt"), "report of 'v'"),
    ],
)
def test_bad_parameters_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()
