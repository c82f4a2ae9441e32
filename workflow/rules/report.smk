rule report:
    input:
        get_score_files(),
    output:
        report(f"{RESULTS}/tables/main.md", caption="../report/main_table.rst", category="Tables"),
        report(f"{RESULTS}/tables/main.tex", caption="../report/main_table.rst", category="Tables"),
        report(f"{RESULTS}/tables/main.csv", caption="../report/main_table.rst", category="Tables"),
        report(f"{RESULTS}/tables/breakdown.md", caption="../report/breakdown.rst", category="Tables"),
        report(f"{RESULTS}/tables/breakdown.csv", caption="../report/breakdown.rst", category="Tables"),
        report(f"{RESULTS}/tables/variants.md", caption="../report/variants.rst", category="Tables"),
        report(f"{RESULTS}/tables/variants.csv", caption="../report/variants.rst", category="Tables"),
        report(f"{RESULTS}/figures/main.png", caption="../report/main_figure.rst", category="Figures"),
        report(f"{RESULTS}/figures/main.pdf", caption="../report/main_figure.rst", category="Figures"),
    params:
        title=GRID.title,
        models=GRID.models,
        benchmarks=GRID.benchmarks,
    log:
        "logs/report.log",
    shell:
        "vlmgrid report --config {CONFIG_FILE:q} > {log:q} 2>&1"
