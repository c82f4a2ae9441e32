# vlmgrid: models x benchmarks -> predictions -> scores -> tables and figures.
# Run: snakemake --cores all [--resources gpu=4] [--configfile config/<paper>.yaml]
# All logic lives in the `vlmgrid` package; the rules only wire its commands to paths.

configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/infer.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        get_report_outputs(),
    default_target: True
