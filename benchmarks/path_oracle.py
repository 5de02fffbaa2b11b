"""How far a solve's schedule is from the best its decision space holds, on generated
suite problems (``fusion_generate.py``): every connected op set up to the budget is
scored with every retention option (``variants.retention_options``), as a solve never
can in its time, and the shortest path over them (``solver/fusion/sequence.py``) gives the
best schedule of those variants that runs none of them twice (greedy's own subgraphs among
them, so never worse than greedy; a schedule recomputing a subgraph for each reader may be
better). A suite gap (schedule against cover bound) that this path closes is the search's;
one it does not is at least partly the bound's, or recomputation's.

    .venv/bin/python benchmarks/path_oracle.py [--only gen-forkjoin-04 ...]
        [--modes per_native_k per_op] [--budget 30000] [--deadline 600] [--guided] [--lazy]
        [--semantics default|teamkorea]

Prints one JSON line per (problem, mode): op sets and variants scored, whether every op
set of the graph was, seconds, and the path's total as the evaluator recomputes it. With
``--guided``, each op set's plain variant is scored, then only the retention variants a
shortest path over their estimates takes (``solver/fusion/guided.py``, as the solver
orders them): ``retention_scored`` of ``retention_keys``, and the path over those. With
``--lazy``, what the solver's whole-graph path before its windows scores
(``cpsat._levels``, ``guided.scored_lazily``): the op sets a shortest path over their
floors takes (``scored`` counts those that fit), then the retention variants of those a
path over estimates takes (``retention_found``); ``complete`` is then null.

With ``--semantics teamkorea`` (``per_op`` only) the variants are scored under the TeamKorea
reading. The path does not know that reading's rule across subgraphs (``recompute.py``), so
``accepted`` says whether the evaluator accepts it; when it does not, ``path`` is what the
variants give without that rule, not a schedule of that reading. Either way the path runs
no variant twice (``sequence.py``), so a solve that recomputes a subgraph per reader may
end below it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.arguments import at_least, positive  # noqa: E402
from benchmarks.fusion_generate import suite  # noqa: E402
from benchmarks.suite_args import add_problem_arguments, chosen, reading_modes  # noqa: E402
from models.fusion import Semantics, parse_problem  # noqa: E402
from solver.deadline import now  # noqa: E402
from solver.fusion.bound.roles import never_together  # noqa: E402
from solver.fusion.candidates import connected_op_sets  # noqa: E402
from solver.fusion.cpsat import _whole_graph, as_planned, as_variants, total  # noqa: E402
from solver.fusion.evaluate import evaluate  # noqa: E402
from solver.fusion.greedy import greedy  # noqa: E402
from solver.fusion.guided import Key, score_along_paths, scored_lazily  # noqa: E402
from solver.fusion.schedule import to_solution  # noqa: E402
from solver.fusion.score import ScoringContext  # noqa: E402
from solver.fusion.sequence import shortest_sequence  # noqa: E402
from solver.fusion.solvers import reading_rules  # noqa: E402
from solver.fusion.variants import Variant, make_variant, retention_options  # noqa: E402

MOST_STATES = 2_000_000
"""States the path may reach here (the solver's own limit is ten times lower)."""


def scored(ctx: ScoringContext, sets: list[tuple[int, ...]], deadline: float,
           plain_only: bool = False) -> tuple[list[Variant], int]:
    """Every variant of ``sets``, smallest first, until ``deadline``: each op set with
    nothing retained, then, if that fits and not ``plain_only``, each retention option.
    Also how many op sets."""
    out: list[Variant] = []
    for done, ops in enumerate(sets):
        if now() > deadline:
            return out, done
        plain = make_variant(ctx, ops, frozenset(), frozenset())
        if plain is None:
            continue  # retention only adds to the working set
        out.append(plain)
        if not plain_only:
            out += [v for r_in, r_out in retention_options(ctx, ops) if r_in or r_out
                    if (v := make_variant(ctx, ops, r_in, r_out)) is not None]
    return out, len(sets)


def guided(ctx: ScoringContext, variants: list[Variant], deadline: float) -> tuple[int, int]:
    """Score into ``variants`` (plain ones) the retention variants of their op sets that a
    shortest path over estimates takes, until it takes none; how many were scored, of how
    many."""
    keys = [(v.ops, r_in, r_out) for v in variants if not v.retained_in and not v.retained_out
            for r_in, r_out in retention_options(ctx, v.ops) if r_in or r_out]

    def score(key: Key) -> None:
        found = make_variant(ctx, *key)
        if found is not None:
            variants.append(found)

    picked = score_along_paths(ctx, _whole_graph(ctx), variants, keys,
                               {v.ops for v in variants}, score, deadline)
    return len(picked), len(keys)


def measure(name: str, raw: dict, mode: str, budget: int, seconds: float,
            guide: bool = False, lazy: bool = False, semantics: Semantics = "default") -> dict:
    started = time.perf_counter()
    ctx = ScoringContext(parse_problem(raw), reading_rules(mode, semantics), every_tile=True,
                         semantics=semantics)
    n = ctx.problem.num_ops
    # as the solver: S6.4 binds op sets under SEMANTICS.md only
    apart = never_together(ctx) if semantics == "default" else frozenset()
    enumeration = connected_op_sets(ctx.graph, range(n), budget, apart)
    # in a topological order, as the solver lists a subgraph's ops
    rank = {q: i for i, q in enumerate(ctx.graph.topological_order)}
    sets = [tuple(sorted(ops, key=rank.__getitem__)) for ops in enumeration.sets]
    ends = now() + seconds
    extra = {}
    if lazy:
        start = as_variants(ctx, greedy(ctx))
        variants = scored_lazily(ctx, _whole_graph(ctx), start, sets, ends)
        retained = sum(bool(v.retained_in or v.retained_out) for v in variants[len(start):])
        extra["retention_found"] = retained
        done = len(variants) - len(start) - retained
    else:
        variants, done = scored(ctx, sets, ends, plain_only=guide)
        variants += as_variants(ctx, greedy(ctx))
    if guide:
        extra["retention_scored"], extra["retention_keys"] = guided(ctx, variants, ends)
    path = shortest_sequence(ctx, _whole_graph(ctx), variants, float("inf"), MOST_STATES)
    row = {"benchmark": name, "mode": mode, "ops": n, "op_sets": len(sets), "scored": done,
           "variants": len(variants),
           "complete": None if lazy else enumeration.complete and done == len(sets),
           **extra, "path": None}
    if path is not None:
        verdict = evaluate(ctx.problem, to_solution(ctx, as_planned(path)), ctx.rules,
                           semantics=semantics)
        if not verdict.valid and semantics == "default":
            raise AssertionError(f"{name} {mode}: the path is invalid: {verdict.error}")
        row["path"] = float(total(path))
        row["accepted"] = verdict.valid
        assert not verdict.valid or verdict.total == total(path)
        row["subgraphs"] = len(path)
        row["largest"] = max(len(v.ops) for v in path)
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_problem_arguments(parser, "gen-forkjoin-04")
    parser.add_argument("--budget", type=at_least(1), default=30000,
                        help="connected op sets enumerated at most (whole sizes; default 30000)")
    parser.add_argument("--deadline", type=positive, default=600.0,
                        help="seconds of scoring per problem and mode (default 600)")
    parser.add_argument("--guided", action="store_true",
                        help="score only the retention variants a path over estimates takes")
    parser.add_argument("--semantics", choices=("default", "teamkorea"), default="default",
                        help="the reading variants are scored under (teamkorea: per_op only)")
    parser.add_argument("--lazy", action="store_true",
                        help="score only the op sets a path over their floors takes, then "
                             "the retention variants of those a path over estimates takes")
    args = parser.parse_args(argv)
    if args.lazy and args.guided:
        parser.error("--lazy already scores retention variants by estimates: drop --guided")
    modes = reading_modes(parser, args.modes, args.semantics)
    problems = chosen(parser, args.only, dict(suite()))
    for name in problems:
        for mode in modes:
            print(json.dumps(measure(name, problems[name], mode, args.budget, args.deadline,
                                     args.guided, args.lazy, args.semantics)),
                  flush=True)


if __name__ == "__main__":
    main()
