"""Random op chains, run in tinyattn and in PyTorch side by side (see ``torch_differential``):
values, dtypes, shapes, errors-vs-no-errors and gradients must agree, except where the README
lists a deliberate deviation. Skipped without torch."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from torch_differential import Choices, run_program  # noqa: E402


@settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.data_too_large])
@given(data=st.data())
def test_random_programs_behave_as_in_pytorch(data):
    outcome = run_program(Choices(data))
    assert outcome.deviation is None, f"{' > '.join(outcome.steps)}: {outcome.deviation}"


def test_the_readmes_deviation_counts_are_those_of_the_seeded_runs():
    """README.md quotes ``python tests/torch_differential.py N`` for several ``N``: how many of
    the programs with seeds ``0 .. N − 1`` deviate. Counted again here, once over the longest
    run (each shorter run is a prefix of it)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    quoted = {int(count): (int(deviated), percent) for count, deviated, percent in re.findall(
        r"`(?:python tests/torch_differential\.py|…) (\d+)`: (\d+) of [\d,]+(?:, ([\d.]+)%)?",
        readme.replace("\n  ", " "))}
    assert set(quoted) == {2000, 5000, 10000}, quoted
    deviated = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(max(quoted)):
            deviated.append(run_program(Choices(np.random.default_rng(seed))).deviation
                            is not None)
    for count, (claimed, percent) in quoted.items():
        assert sum(deviated[:count]) == claimed, (count, sum(deviated[:count]), claimed)
        if percent:
            assert f"{100 * claimed / count:.2f}" == percent, (count, percent)
