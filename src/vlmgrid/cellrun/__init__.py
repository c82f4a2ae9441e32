"""The running of one cell: its identity and plan, its job's fingerprint and parts, its lock, its shards, its
run. Imported by vlmgrid.stages alone of production code; it imports only the shared modules, no domain
package.

    cell        Shard, Cell (a model on a benchmark and where its files go), CellPlan (decided by the plan)
    job         the job's identity (fingerprint, part bounds) and the predictions file it writes
    parts       the parts of an unfinished job, kept as they are done
    lock        one run at a time per cell (an flock beside its parts)
    run         CellRun: the owner of a running job, from its first part to its file
    invariance  the batch check: the same answers one request at a time
    shards      a sharded cell's files merged into its predictions file

A job is records and their model requests (vlmgrid.stages.cost_work counts them); the infer stage loads the
benchmark and the model and hands the run a way to answer a chunk of records.
"""
