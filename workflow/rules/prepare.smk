# Both rules are checkpoints: once one of their jobs has run, Snakemake judges the jobs after it again by what it
# wrote, not by its having run. A job that runs again with nothing changed (a failed prepare or fetch fixed back:
# Snakemake removed its outputs and recorded the failed job's params) writes the same manifest, and Snakemake,
# which keeps a checksum of each small input, runs no cell again; a manifest that changed reruns its cells.
checkpoint prepare:
    output:
        manifest=f"{DATA}/{{bench}}/manifest.json",
        records=f"{DATA}/{{bench}}/records.parquet",
    params:
        # the settings, and for a local source its files' sizes and hashes: an edit there prepares it again
        settings=lambda wildcards: get_benchmark_settings(wildcards.bench),
    resources:
        **cluster_resources("prepare"),
    log:
        f"{LOGS}/prepare/{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/prepare/{{bench}}.tsv"
    shell:
        "vlmgrid prepare {wildcards.bench:q} --config {CONFIG_FILE:q} > {log:q} 2>&1"


checkpoint fetch_model:
    output:
        f"{DATA}/models/{{model}}/model.json",
    params:
        source=lambda wildcards: get_model_source(wildcards.model),
    resources:
        **cluster_resources("fetch_model"),
    log:
        f"{LOGS}/fetch_model/{{model}}.log",
    benchmark:
        f"{LOGS}/benchmarks/fetch_model/{{model}}.tsv"
    shell:
        "vlmgrid fetch-model {wildcards.model:q} --config {CONFIG_FILE:q} > {log:q} 2>&1"
