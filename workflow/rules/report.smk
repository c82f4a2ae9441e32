rule report:
    input:
        scores=get_score_files(),
        comparisons=get_comparison_files(),
        reported=GRID.report["reported"],  # the papers' published numbers the report compares with
    output:
        # The paper tables depend on the grid's benchmark kinds (vlmgrid.report.outputs.report_files).
        get_report_files(),
    params:
        # Snakemake's report.html puts a job's params, unescaped, in JSON inside a <script>: the free-text title
        # goes there as script-safe JSON (names are held to NAME by the schema and carry no markup)
        title=report_param(GRID.title),
        models=GRID.models,
        benchmarks=GRID.benchmarks,
        kinds=get_benchmark_kinds(),
        # a changed threshold marks other cells: the report is made again
        flag_error_rate=GRID.report["flag_error_rate"],
        # the main table marks cells against it
        reference_model=GRID.report.get("reference_model"),
    resources:
        **cluster_resources("report"),
    log:
        f"{LOGS}/report.log",
    benchmark:
        f"{LOGS}/benchmarks/report.tsv"
    shell:
        "vlmgrid report --config {CONFIG_FILE:q} > {log:q} 2>&1"
