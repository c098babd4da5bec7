# descbench: evaluation of local image feature descriptors.
#   snakemake --cores 2                      # default config.yaml: offline demo dataset
#   snakemake --cores 16 --config dataset=hpatches
#   snakemake --cores 2 --config 'scoring={tau_px: 5}'   # a key inside a section (not scoring.tau_px=5)
#   snakemake --cores 2 --configfile my.yaml --replace-workflow-config   # my.yaml alone (else merged into config.yaml)
#   snakemake --cores 2 --configfile config/patches.yaml patch_report    # the patch benchmarks only
#   Ctrl-C once stops every running job; rerun the same command to go on (README).
# Overrides: `--config key=value` for top-level keys, `--config 'section={key: value, ...}'` for keys
# inside a section, `--configfile file.yaml` for several. Snakemake itself refuses the dotted form
# (`--config scoring.tau_px=5`: "Config entry must start with a valid identifier") with its own
# traceback while reading its command line, before this file is read: nothing here can catch it.
# All logic lives in the descbench package (workflow/descbench); rules only call it, through the
# interpreter that runs Snakemake (DESCBENCH, workflow/rules/common.smk).

# The Snakemake version descbench was tested on (pyproject.toml: snakemake>=9.27.1,<10).
from snakemake.utils import min_version

min_version("9.27.1")

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
include: "workflow/rules/matches.smk"
include: "workflow/rules/scoring.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/patches.smk"


# `snakemake patch_report`: the patch benchmarks alone (not the sequence benchmark of `all`).
if not PATCHES_ON and "patch_report" in _sys.argv[1:]:
    raise WorkflowError("descbench: the target patch_report runs the patch benchmarks, which this config leaves off: "
                        "set patches.enabled: true (e.g. --configfile config/patches.yaml patch_report)")


# A posed dataset (relative poses): the pose table and figure (rules score_pose, pose_report); an
# image-sequence dataset (homographies): the comparison report and everything beside it.
rule all:
    input:
        [] if POSED else report_outputs(),
        [] if POSED else [PATHS.report(f) for f in KEYPOINT_STATS_FILES],
        [] if POSED else str(RES / "results.sqlite"),
        [] if POSED else [PATHS.report(f"plots/{name}.png") for name in PLOTS],
        [PATHS.report("inspector.html")] if INSPECTOR else [],
        patch_outputs(),
        [PATHS.report(f"pose.{ext}") for ext in ("parquet", "csv", "md")] + [PATHS.report("plots/pose_error.png")] if POSED else
        [PATHS.report(f"pipelines.{ext}") for ext in ("parquet", "csv", "md")] if MATCH_COMBOS and CFG["pipelines"]["enabled"] else
        [PATHS.matches_dir(ks, d, m, b) for ks, d, m in MATCH_COMBOS for b in BATCHES],
    default_target: True
