"""The stages of the workflow, one module each; the `vlmgrid` command parses its arguments and calls one.
Imported by vlmgrid.cli alone; they import every floor below, and alone of production code vlmgrid.fixtures.

    plan      the grid's cells, which of them a model cannot run (not applicable), each cell's CellPlan
    cost      what the grid will cost (`vlmgrid plan`): cost_work counts, cost estimates, cost_text prints
    prepare   download or generate a benchmark, normalise it, hash it; source stamps; verify
    fetch     put a model's weights on disk and hash them
    infer     run one model on one benchmark (or one shard of it) as its plan says, through vlmgrid.cellrun
    score     records + predictions -> the score file
    report    score files -> tables and figures
"""
