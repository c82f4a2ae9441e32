# One page per benchmark: its items beside every grid model's answers, judged by the benchmark's rule, with
# filters (wrong answers, format errors, disagreements). Self-contained HTML, shown in the Snakemake report.
rule inspect:
    input:
        data=f"{DATA}/{{bench}}/manifest.json",
        predictions=get_inspect_predictions,
    output:
        page=get_inspect_page_output(),
    resources:
        # as light as the report job: records, predictions and thumbnails of at most 500 items
        **cluster_resources("inspect"),
    log:
        f"{LOGS}/inspect/{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/inspect/{{bench}}.tsv"
    shell:
        "vlmgrid inspect {wildcards.bench:q} --config {CONFIG_FILE:q} > {log:q} 2>&1"
