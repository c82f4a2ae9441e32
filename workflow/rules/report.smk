rule report:
    input:
        get_score_files(),
    output:
        # The paper tables depend on the grid's benchmark kinds (vlmgrid.paths.report_files).
        get_report_files(),
    params:
        title=GRID.title,
        models=GRID.models,
        benchmarks=GRID.benchmarks,
        kinds=get_benchmark_kinds(),
    resources:
        **cluster_resources("report"),
    log:
        "logs/report.log",
    shell:
        "vlmgrid report --config {CONFIG_FILE:q} > {log:q} 2>&1"
