"""The stages of the workflow, one module each; the `vlmgrid` command parses its arguments and calls one.

    plan      the grid's cells, their names and paths, and which cells a model cannot run (not applicable)
    prepare   download or generate a benchmark, normalise it, hash it; source stamps; verify
    fetch     put a model's weights on disk and hash them
    jobs      what infer and shards share: a job's identity, its part store, the predictions file's metadata
    infer     run one model on one benchmark (or one shard of it), resumably
    shards    join a cell's shard files into its predictions file
    score     records + predictions -> the score file
    report    score files -> tables and figures

The stages sit above the domain packages (benchmarks, protocols, models, metrics, report) and are the only
production code that may import `vlmgrid.fixtures`, the offline stand-ins (fixture benchmarks, tiny models).
"""
