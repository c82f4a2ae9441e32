rule prepare:
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


rule fetch_model:
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
