import pytest
from hypothesis import HealthCheck, given, settings
from tests.fusion_cases import problems
from tests.test_fusion_cpsat import search, optimum, as_variants, greedy, total, MODES

@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(raw=problems(max_ops=4))
def test_many(raw, mode):
    ctx, found = search(raw, mode)
    assert found.optimal
    assert total(found.schedule) == optimum(ctx, extra=as_variants(ctx, greedy(ctx)))
