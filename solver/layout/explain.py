"""Explain a plan against the baselines: which decisions differ from the best one and
what they saved, plus a one-line summary (latency vs each baseline, L1, copies, spills)."""

from __future__ import annotations

from models.layout import Explanation, LayoutGraph, LayoutPlan, OpDifference, TensorDifference
from solver.layout.plan import plan_summary


def _home(plan: LayoutPlan, tensor: str) -> str:
    t = plan.tensors[tensor]
    grid = "x".join(map(str, t.grid)) if t.grid and t.layout != "interleaved" else ""
    return f"{t.buffer}:{t.layout}" + (f":{grid}" if grid else "")


def _copy_time(plan: LayoutPlan) -> float:
    return sum(c.latency_us for c in (*plan.reshards, *plan.reloads, *plan.spills))


def explain(graph: LayoutGraph, plan: LayoutPlan, baselines: dict[str, LayoutPlan]) -> Explanation:
    """Differences from the fastest of ``baselines`` (ties: the first listed)."""
    name, ref = min(baselines.items(), key=lambda kv: kv[1].total_latency_us)
    ops = [OpDifference(op=op, baseline_config=ref.ops[op].config, config=mine.config,
                        baseline_inputs=ref.ops[op].inputs, inputs=mine.inputs,
                        baseline_latency_us=ref.ops[op].latency_us, latency_us=mine.latency_us)
           for op, mine in plan.ops.items()
           if mine.config != ref.ops[op].config or mine.inputs != ref.ops[op].inputs]
    tensors = [TensorDifference(tensor=t, baseline_home=_home(ref, t), home=_home(plan, t))
               for t in plan.tensors if _home(plan, t) != _home(ref, t)]
    s = plan_summary(graph, plan)
    speedup = {b: p.total_latency_us / plan.total_latency_us for b, p in baselines.items()}
    summary = (f"{plan.solver}: {plan.total_latency_us:,.2f} us ("
               + ", ".join(f"{x:.3f}x vs {b}" for b, x in speedup.items())
               + f"); activations in L1 {s['activations_in_l1']}/{s['activations']}, "
               f"reshards {s['reshards']}, reloads {s['reloads']}, spills {s['spills']}; "
               f"{len(ops)} ops and {len(tensors)} tensors placed differently from {name}")
    return Explanation(
        baseline=name, summary=summary, speedup_vs=speedup, ops=ops, tensors=tensors,
        op_time_saved_us=sum(o.latency_us for o in ref.ops.values())
        - sum(o.latency_us for o in plan.ops.values()),
        copy_and_spill_time_saved_us=_copy_time(ref) - _copy_time(plan))
