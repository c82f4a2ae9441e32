# vlmgrid: models x benchmarks -> predictions -> scores -> tables and figures.
# Run: snakemake --cores all [--resources gpu=4] [--configfile config/<paper>.yaml]
# All logic lives in the `vlmgrid` package; the rules only wire its commands to paths.
# The grid is exactly one config file, config/config.yaml or the one --configfile names: no `configfile:`
# here, or Snakemake would merge the given file into this one and plan a grid that no job reads
# (workflow/rules/common.smk reads and checks it).


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/infer.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/inspect.smk"


# Every cell's files are targets, not only what is made of them: a deleted predictions or score file is made
# again by the plain command (Snakemake takes a missing intermediate file whose products are present for one
# that is no longer needed), and the rest of the grid is left as it is.
rule all:
    input:
        get_report_outputs(),
        get_inspect_pages(),
        get_predictions_files(),
        get_score_files(),
    default_target: True


onstart:
    check_results_dir()
    start_forkserver()


onsuccess:
    stop_forkserver()
    shutil.rmtree(paths.partial_report_dir(RESULTS), ignore_errors=True)


onerror:
    # With --keep-going the cells that could run are done: tables of them in <results_dir>/report-partial say
    # which cells are missing (their jobs failed; the logs say why). The grid's own report is made only whole.
    shell("mkdir -p {LOGS:q} && vlmgrid report --config {CONFIG_FILE:q} --allow-missing"
          " > {LOGS:q}/report-partial.log 2>&1 || true")
    stop_forkserver()
