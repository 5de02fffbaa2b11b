"""The retention options of an op set (``solver.fusion.variants.retention_options``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from models.fusion import parse_problem
from solver.fusion.candidates import connected_op_sets
from solver.fusion.floors import kept_by_last_step
from solver.fusion.problem import Rules
from solver.fusion.score import ScoringContext
from solver.fusion.variants import retainable_inputs, retainable_outputs, retention_options
from tests.fusion_cases import problems


def _sides(tensors: list[int]) -> set[frozenset[int]]:
    """Nothing, each one alone, or all of them."""
    return {frozenset(), frozenset(tensors)} | {frozenset({t}) for t in tensors}


@given(raw=problems(max_ops=6), data=st.data())
def test_retention_options_are_every_pair_that_fits_with_the_extras_that_apply(raw, data):
    """On each side nothing, one tensor, all of them, or an extra set that applies (one it
    consumes from outside, one it produces); exactly the pairs whose tensors alone fit,
    nothing retained first. Asked again without extras (the list made once per op set), the
    answer is the same as before the extras were asked for."""
    ctx = ScoringContext(parse_problem(raw), Rules(
        retained_output_ws=data.draw(st.sampled_from(["accumulate", "slice"]))))
    graph = ctx.graph
    for ops in connected_op_sets(graph, range(ctx.problem.num_ops), 40).sets:
        shape = ctx.shape(ops)
        extra_in = frozenset(data.draw(st.sets(st.sampled_from(range(len(raw["widths"]))))))
        extra_out = frozenset(data.draw(st.sets(st.sampled_from(range(len(raw["widths"]))))))
        plain = retention_options(ctx, ops)
        found = retention_options(ctx, ops, [extra_in], [extra_out])
        ins = _sides(retainable_inputs(ctx, ops))
        outs = _sides(retainable_outputs(ctx, ops))
        if extra_in and extra_in <= set(shape.inputs):
            ins.add(extra_in)
        if extra_out and extra_out <= shape.produced:
            outs.add(extra_out)
        expected = {(r_in, r_out) for r_in in ins for r_out in outs
                    if sum(graph.size(t) for t in r_in) + kept_by_last_step(ctx, r_out)
                    <= ctx.capacity}
        assert found[0] == (frozenset(), frozenset())
        assert len(found) == len(set(found)) and set(found) == expected
        assert retention_options(ctx, ops) == plain
        assert set(plain) <= expected
