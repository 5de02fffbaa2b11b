"""The LP relaxation of a CP-SAT model (``solver/relaxation.py``) on hand-computed models."""

from __future__ import annotations

import itertools

import pytest
from ortools.sat.python import cp_model

from solver.relaxation import relax


def test_the_bound_is_the_lp_optimum_below_the_integer_one():
    """min a + b + c with a + b >= 1.5 (as 2a + 2b >= 3) and c >= a (a two-literal row,
    which CP-SAT keeps out of its LP): the LP takes a = 0.5, b = 1, c = 0.5 for 2, while
    every integer solution costs at least 3 (a = b = 1, so c = 1)."""
    m = cp_model.CpModel()
    a, b, c = (m.new_bool_var(n) for n in "abc")
    m.add(2 * a + 2 * b >= 3)
    m.add(c >= a)
    m.minimize(a + b + c)
    relaxed = relax(m, 5)
    assert relaxed is not None and relaxed.objective == pytest.approx(2.0)
    solver = cp_model.CpSolver()
    assert solver.solve(m) == cp_model.OPTIMAL and solver.objective_value == 3


def test_exactly_one_lin_max_and_negated_literals_are_relaxed_validly():
    """min 4x + 3y + 5t with exactly one of (x, y, not z) and t = max(x, z): taking not z
    (z = 0) with x = y = t = 0 costs 0, in the LP as in integers. A wrong sign on the
    negated literal or on the max would leave the LP above 0 or with z > 0."""
    m = cp_model.CpModel()
    x, y, z, t = (m.new_bool_var(n) for n in "xyzt")
    m.add_exactly_one([x, y, z.Not()])
    m.add_max_equality(t, [x, z])
    m.minimize(4 * x + 3 * y + 5 * t)
    relaxed = relax(m, 5)
    assert relaxed is not None and relaxed.objective == pytest.approx(0.0)
    assert relaxed.values[z.index] == pytest.approx(0.0)


def test_reduced_cost_fixing_fixes_only_what_no_cheaper_solution_moves():
    """min 5x + y + z with y + z >= 1: the LP optimum is 1 and x has reduced cost 5. Against
    an incumbent of 2, any solution with x = 1 costs at least 6, so x is fixed to 0 and the
    cheaper solutions (cost 1) all survive; against an incumbent of 10 nothing is fixed."""
    def model() -> tuple[cp_model.CpModel, list[cp_model.IntVar]]:
        m = cp_model.CpModel()
        xs = [m.new_bool_var(n) for n in "xyz"]
        m.add(xs[1] + xs[2] >= 1)
        m.minimize(5 * xs[0] + xs[1] + xs[2])
        return m, xs

    m, xs = model()
    relaxed = relax(m, 5)
    assert relaxed is not None and relaxed.objective == pytest.approx(1.0)
    assert relaxed.fix_by_reduced_cost(m, incumbent=10) == 0
    assert relaxed.fix_by_reduced_cost(m, incumbent=2) >= 1
    survivors = []
    for values in itertools.product((0, 1), repeat=3):
        probe = m.clone()
        for var, value in zip(xs, values, strict=True):
            probe.add(probe.get_int_var_from_proto_index(var.index) == value)
        if cp_model.CpSolver().solve(probe) == cp_model.OPTIMAL:
            survivors.append(values)
    cheaper = [v for v in itertools.product((0, 1), repeat=3)
               if v[1] + v[2] >= 1 and 5 * v[0] + v[1] + v[2] < 2]
    assert cheaper and set(cheaper) <= set(survivors)
    assert all(v[0] == 0 for v in survivors)


def test_a_maximization_is_refused():
    m = cp_model.CpModel()
    a = m.new_bool_var("a")
    m.maximize(a)
    with pytest.raises(ValueError, match="minimization"):
        relax(m, 1)


def test_a_max_of_expressions_that_can_be_negative_keeps_only_its_valid_rows():
    """t = max(a - 1, b - 1) over 0/1 a, b is -1 at a = b = 0. ``t <= sum`` would force
    t <= -2 there, a row no solution satisfies; min t must stay -1, not drop below or fail."""
    m = cp_model.CpModel()
    a, b = m.new_bool_var("a"), m.new_bool_var("b")
    t = m.new_int_var(-5, 5, "t")
    m.add_max_equality(t, [a - 1, b - 1])
    m.minimize(t)
    relaxed = relax(m, 5)
    assert relaxed is not None and relaxed.objective == pytest.approx(-1.0)
