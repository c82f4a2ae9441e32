# A benchmark with `shards: N` (N > 1) runs each of its cells as N `infer_shard` jobs, each with a GPU of its own,
# and `merge_shards` joins their files into the cell's predictions file; every other cell is one `infer` job.
rule infer:
    input:
        data=f"{DATA}/{{bench}}/manifest.json",
        model=f"{DATA}/models/{{model}}/model.json",
    output:
        f"{RESULTS}/predictions/{{model}}/{{bench}}.parquet",
    wildcard_constraints:
        bench=get_bench_pattern(sharded=False),
    params:
        settings=lambda wildcards: get_model_settings(wildcards.model, wildcards.bench),
        prompts=get_prompt_hashes(),
        # the batch check's sample size: its result is in the predictions file
        invariance_items=GRID.infer["invariance_items"],
    threads: GRID.infer["threads"]
    resources:
        gpu=lambda wildcards: get_gpus(wildcards.model),
        **infer_resources(),
    log:
        f"{LOGS}/infer/{{model}}/{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/infer/{{model}}/{{bench}}.tsv"
    shell:
        "vlmgrid infer {wildcards.model:q} {wildcards.bench:q} --config {CONFIG_FILE:q} --threads {threads}"
        " > {log:q} 2>&1"


rule infer_shard:
    input:
        data=f"{DATA}/{{bench}}/manifest.json",
        model=f"{DATA}/models/{{model}}/model.json",
    output:
        # Merged into the predictions file, then removed: it holds nothing the predictions file lacks.
        temp(f"{RESULTS}/shards/{{model}}/{{bench}}/{{shard}}-of-{{shards}}.parquet"),
    wildcard_constraints:
        bench=get_bench_pattern(sharded=True),
        shard="[0-9]+",
        shards="[0-9]+",
    params:
        settings=lambda wildcards: get_model_settings(wildcards.model, wildcards.bench),
        prompts=get_prompt_hashes(),
        # the batch check's sample size: its result is in the predictions file
        invariance_items=GRID.infer["invariance_items"],
    threads: GRID.infer["threads"]
    resources:
        gpu=lambda wildcards: get_gpus(wildcards.model),
        **infer_resources(),
    log:
        f"{LOGS}/infer/{{model}}/{{bench}}/{{shard}}-of-{{shards}}.log",
    benchmark:
        f"{LOGS}/benchmarks/infer/{{model}}/{{bench}}/{{shard}}-of-{{shards}}.tsv"
    shell:
        "vlmgrid infer {wildcards.model:q} {wildcards.bench:q} --shard {wildcards.shard}/{wildcards.shards}"
        " --config {CONFIG_FILE:q} --threads {threads} > {log:q} 2>&1"


rule merge_shards:
    input:
        data=f"{DATA}/{{bench}}/manifest.json",
        shards=get_shard_files,
    output:
        f"{RESULTS}/predictions/{{model}}/{{bench}}.parquet",
    wildcard_constraints:
        bench=get_bench_pattern(sharded=True),
    params:
        # a cell that cannot run has no shards: its file records the settings that say why
        settings=lambda wildcards: get_model_settings(wildcards.model, wildcards.bench),
    resources:
        **cluster_resources("merge_shards"),
    log:
        f"{LOGS}/merge_shards/{{model}}/{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/merge_shards/{{model}}/{{bench}}.tsv"
    shell:
        "vlmgrid merge-shards {wildcards.model:q} {wildcards.bench:q} --config {CONFIG_FILE:q} > {log:q} 2>&1"
