# descbench: evaluation of local image feature descriptors.
#   snakemake --cores 2                      # default config.yaml: offline demo dataset
#   snakemake --cores 16 --config dataset=hpatches
# All logic lives in the descbench package (workflow/descbench); rules only call it.

configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/dataset.smk"
include: "workflow/rules/keypoints.smk"
include: "workflow/rules/descriptors.smk"
include: "workflow/rules/scoring.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/patches.smk"


rule all:
    input:
        report_outputs(),
        [PATHS.report(f) for f in KEYPOINT_STATS_FILES],
        str(RES / "results.sqlite"),
        [PATHS.report(f"plots/{name}.png") for name in PLOTS],
        patch_outputs(),
    default_target: True
