# Keypoint stage, one job per (keypoint set, scene batch) writing one file per scene into the
# batch folder: detection + border filter + response cap (detector sets), or filters /
# intersection of other sets of the same batch (derived sets; descbench.keypoints.filters).


rule keypoints:
    input:
        scene=batch_scene_inputs,
        features=precomputed_inputs,
        sources=keypoint_source_inputs,
        models=keypoint_model_files,
        # its settings (spec files, rewritten only when they change: common.smk)
        batches_spec=lambda wc: batch_spec(wc.batch),
        spec=lambda wc: spec_file("keypoint_sets", wc.kpset, CFG["keypoint_sets"][wc.kpset]),
    output:
        directory(PATHS.keypoints_dir("{kpset}", "{batch}")),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(2),  # <root>/keypoints/<kpset>/<batch>
        cutoff=keypoint_cutoff_arg,
    log:
        str(RES / "logs" / "keypoints" / "{kpset}" / "{batch}.log"),
    # a learned detector (keynet): its params.threads and a GPU for device: cuda
    threads: lambda wc: keypoint_resources(wc)["threads"]
    resources:
        # descbench.jobresources.keypoint_job: the batch's image sizes and the set's modelled keypoint count
        mem_mb=lambda wc, attempt: keypoint_job(wc)["mem_mb"] * attempt,
        runtime=lambda wc, attempt: keypoint_job(wc)["runtime"] * attempt,
        gpu=lambda wc: keypoint_resources(wc)["gpu"],
    conda:
        keypoint_env
    shell:
        "{params.descbench} keypoints --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches @{input.batches_spec:q} --batch {wildcards.batch} --name {wildcards.kpset} --spec @{input.spec:q} "
        "{params.cutoff} --threads {threads} > {log} 2>&1"


# The dataset-wide cutoff of a set's global_top_n_by_size filter: reads the source set's keypoints
# of every scene, writes one small JSON; the set's batch jobs then filter their scenes alone.
rule keypoint_cutoff:
    input:
        sources=lambda wc: [PATHS.keypoints_dir(CFG["keypoint_sets"][wc.kpset]["source"], b) for b in BATCHES],
        batches_spec=lambda wc: all_batches_spec(),
        spec=lambda wc: spec_file("keypoint_sets", wc.kpset, CFG["keypoint_sets"][wc.kpset]),
    output:
        PATHS.keypoint_cutoff("{kpset}"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        results_root=results_root(1),  # <root>/keypoint_cutoffs/<kpset>.json
    log:
        str(RES / "logs" / "keypoint_cutoff" / "{kpset}.log"),
    threads: 1
    resources:
        # reads one column of every scene's keypoint file
        mem_mb=1500,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} keypoint-cutoff --results-root {params.results_root} --batches @{input.batches_spec:q} "
        "--name {wildcards.kpset} --spec @{input.spec:q} --out {output} > {log} 2>&1"


# On request only (not part of `all`): `snakemake <results>/<tag>/exports/keypoints/<set>.csv`
# (or .parquet) writes a set's keypoints of every scene in the locked-keypoint format, which a
# `detector: locked` set imports bit-exactly (descbench/keypoints/locked.py).
rule export_keypoints:
    input:
        keypoints=lambda wc: [PATHS.keypoints_dir(wc.kpset, b) for b in BATCHES],
        batches_spec=lambda wc: all_batches_spec(),
    output:
        PATHS.keypoint_export("{kpset}", "{fmt}"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        results_root=results_root(2),  # <root>/exports/keypoints/<kpset>.<fmt>
    wildcard_constraints:
        fmt=r"parquet|csv|csv\.gz",
    log:
        str(RES / "logs" / "export_keypoints" / "{kpset}.{fmt}.log"),
    threads: 1
    resources:
        # every scene's keypoints of one set, one file
        mem_mb=1500,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} export-keypoints --results-root {params.results_root} --batches @{input.batches_spec:q} "
        "--name {wildcards.kpset} --out {output} > {log} 2>&1"
