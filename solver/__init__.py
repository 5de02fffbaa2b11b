"""Problem normalization, solvers and independent evaluators. Imports ``models`` only."""
