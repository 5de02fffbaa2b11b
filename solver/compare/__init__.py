"""Batch comparison: every graph of either family through every solver, checked and reported.

``discover`` finds the graphs, ``task`` runs one (graph, solver) pair in isolation,
``backends`` runs pairs in parallel (local processes or Ray), ``summary`` computes the
ratios and the gate, ``report`` and ``plots`` write what a user reads, ``batch`` ties
them together with the on-disk cache.
"""
