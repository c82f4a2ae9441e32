rule compare:
    input:
        data=f"{DATA}/{{bench}}/manifest.json",
        # every model of the grid on this benchmark (an n/a cell's file says so, and its pairs say why)
        predictions=get_comparison_predictions,
    output:
        f"{RESULTS}/comparisons/{{bench}}.json",
    params:
        bootstrap=GRID.bootstrap,
        models=GRID.models,
        reference_model=GRID.report.get("reference_model"),
    resources:
        **cluster_resources("compare"),
    log:
        f"{LOGS}/compare/{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/compare/{{bench}}.tsv"
    shell:
        "vlmgrid compare {wildcards.bench:q} --config {CONFIG_FILE:q} > {log:q} 2>&1"
