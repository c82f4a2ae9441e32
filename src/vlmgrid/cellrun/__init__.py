"""The running of one cell: its identity and plan, its job's fingerprint and parts, its lock, its shards, its run.
Imported by vlmgrid.stages alone of production code; it imports the domain packages (benchmarks, models,
protocols) and the floors below them.

    cell        Shard, Cell (a model on a benchmark and where its files go), CellPlan (decided by the plan)
    requests    the units of work a protocol sends, and each record's requests: what parts are cut by
    job         the job's identity (fingerprint, part bounds) and the predictions file it writes
    parts       the parts of an unfinished job, kept as they are done
    lock        one run at a time per cell (an flock beside its parts)
    run         CellRun: the owner of a running job, from its first part to its file
    invariance  the batch check: the same answers one request at a time
    execute     run_cell: the lock, the GPUs, the server, the model, then the CellRun
    shards      a sharded cell's files merged into its predictions file
"""
