rule infer:
    input:
        data=f"{DATA}/{{bench}}/manifest.json",
        model=f"{DATA}/models/{{model}}/model.json",
    output:
        f"{RESULTS}/predictions/{{model}}/{{bench}}.parquet",
    params:
        settings=lambda wildcards: get_model_settings(wildcards.model),
        prompts=get_prompt_hashes(),
    threads: GRID.infer["threads"]
    resources:
        gpu=lambda wildcards: get_gpus(wildcards.model),
    log:
        "logs/infer/{model}/{bench}.log",
    benchmark:
        "logs/benchmarks/infer/{model}/{bench}.tsv"
    shell:
        "vlmgrid infer {wildcards.model:q} {wildcards.bench:q} --config {CONFIG_FILE:q} --threads {threads}"
        " > {log:q} 2>&1"
