rule score:
    input:
        data=f"{DATA}/{{bench}}/manifest.json",
        predictions=f"{RESULTS}/predictions/{{model}}/{{bench}}.parquet",
    output:
        f"{RESULTS}/scores/{{model}}/{{bench}}.json",
    params:
        bootstrap=GRID.bootstrap,
    resources:
        **cluster_resources("score"),
    log:
        f"{LOGS}/score/{{model}}/{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/score/{{model}}/{{bench}}.tsv"
    shell:
        "vlmgrid score {wildcards.model:q} {wildcards.bench:q} --config {CONFIG_FILE:q} > {log:q} 2>&1"
