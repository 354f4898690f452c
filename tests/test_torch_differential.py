"""Random op chains, run in tinyattn and in PyTorch side by side (see ``torch_differential``):
values, dtypes, shapes, errors-vs-no-errors and gradients must agree, except where the README
lists a deliberate deviation. Skipped without torch."""

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
