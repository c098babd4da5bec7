# descbench: evaluation of local image feature descriptors.
#   snakemake --cores 2                      # default config.yaml: offline demo dataset
#   snakemake --cores 16 --config dataset=hpatches
#   snakemake --cores 2 --config 'scoring={tau_px: 5}'   # a key inside a section (not scoring.tau_px=5)
#   Ctrl-C once stops every running job; rerun the same command to go on (README).
# All logic lives in the descbench package (workflow/descbench); rules only call it.

# Snakemake's own message for a YAML syntax error in config.yaml names neither the file nor the
# line: read it first, so that the error says where (descbench.config.check_yaml_file).
import os as _os
from descbench.config import check_yaml_file as _check_yaml_file
from descbench.errors import ConfigError as _ConfigError

if _os.path.exists("config.yaml"):
    try:
        _check_yaml_file("config.yaml")
    except _ConfigError as _exc:
        raise WorkflowError(f"descbench config error: {_exc}") from None


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
