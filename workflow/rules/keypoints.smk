# Keypoint stage, one job per (keypoint set, scene batch) writing one file per scene into the
# batch folder: detection + border filter + response cap (detector sets), or filters /
# intersection of other sets of the same batch (derived sets; descbench.keypoints.filters).


rule keypoints:
    input:
        scene=batch_scene_inputs,
        features=precomputed_inputs,
        sources=keypoint_source_inputs,
        models=keypoint_model_files,
    output:
        directory(PATHS.keypoints_dir("{kpset}", "{batch}")),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(2),  # <root>/keypoints/<kpset>/<batch>
        batches=batch_json,
        spec=lambda wc: as_json(CFG["keypoint_sets"][wc.kpset]),
        cutoff=keypoint_cutoff_arg,
    log:
        str(RES / "logs" / "keypoints" / "{kpset}" / "{batch}.log"),
    benchmark:
        str(RES / "benchmarks" / "keypoints" / "{kpset}" / "{batch}.tsv")
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
        "--batches {params.batches:q} --batch {wildcards.batch} --name {wildcards.kpset} --spec {params.spec:q} "
        "{params.cutoff} --threads {threads} > {log} 2>&1"


# The dataset-wide cutoff of a set's global_top_n_by_size filter: reads the source set's keypoints
# of every scene, writes one small JSON; the set's batch jobs then filter their scenes alone.
rule keypoint_cutoff:
    input:
        lambda wc: [PATHS.keypoints_dir(CFG["keypoint_sets"][wc.kpset]["source"], b) for b in BATCHES],
    output:
        PATHS.keypoint_cutoff("{kpset}"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        results_root=results_root(1),  # <root>/keypoint_cutoffs/<kpset>.json
        batches=as_json(BATCHES),
        spec=lambda wc: as_json(CFG["keypoint_sets"][wc.kpset]),
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
        "{params.descbench} keypoint-cutoff --results-root {params.results_root} --batches {params.batches:q} "
        "--name {wildcards.kpset} --spec {params.spec:q} --out {output} > {log} 2>&1"


# On request only (not part of `all`): `snakemake <results>/<tag>/exports/keypoints/<set>.csv`
# (or .parquet) writes a set's keypoints of every scene in the locked-keypoint format, which a
# `detector: locked` set imports bit-exactly (descbench/keypoints/locked.py).
rule export_keypoints:
    input:
        lambda wc: [PATHS.keypoints_dir(wc.kpset, b) for b in BATCHES],
    output:
        PATHS.keypoint_export("{kpset}", "{fmt}"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        results_root=results_root(2),  # <root>/exports/keypoints/<kpset>.<fmt>
        batches=as_json(BATCHES),
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
        "{params.descbench} export-keypoints --results-root {params.results_root} --batches {params.batches:q} "
        "--name {wildcards.kpset} --out {output} > {log} 2>&1"
