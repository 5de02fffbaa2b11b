from solver.layout.dram import assign  # noqa
