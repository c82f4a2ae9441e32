"""The stages of the workflow, one module each; the `vlmgrid` command parses its arguments and calls one.
Imported by vlmgrid.cli alone; they import every floor below, and alone of production code vlmgrid.fixtures.

    plan      the grid's cells, their names and paths, and which cells a model cannot run (not applicable)
    cost      what the grid will cost (`vlmgrid plan`): cost_work counts, cost estimates, cost_text prints
    prepare   download or generate a benchmark, normalise it, hash it; source stamps; verify
    fetch     put a model's weights on disk and hash them
    jobs      what infer and shards share: a job's identity, its part store, the predictions file's metadata
    infer     run one model on one benchmark (or one shard of it), resumably
    shards    join a cell's shard files into its predictions file
    score     records + predictions -> the score file
    report    score files -> tables and figures
"""
