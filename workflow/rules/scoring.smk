# Scoring stage: one job per (keypoint set, descriptor, scene batch) runs every enabled task of
# descbench.paths.SCORE_TASK_REGISTRY -- keypoint retrieval (scores/), keypoint verification +
# retrieval with distractors (verification/), matching + binary classifier (matching/), ... -- in
# one process, so each scene's features are read once and the fixed start-up (imports, numba
# cache) is paid once per batch.
# Numba kernels are compiled once into the on-disk cache (numba_warmup) before parallel jobs.


rule numba_warmup:
    output:
        str(WARMUP_FLAG),
    log:
        str(Path(CFG["results_dir"]) / "logs" / "numba_warmup.log"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        numba_cache=NUMBA_CACHE,
    threads: 1
    resources:
        # compiles the kernels once (about a minute)
        mem_mb=1000,
        runtime=10,
    conda:
        ENV
    shell:
        "export NUMBA_NUM_THREADS={threads} {params.numba_cache}; {params.descbench} warmup --out {output} > {log} 2>&1"


rule score:
    input:
        # keypoints, descriptors, distractor bank; the homographies are the keypoint job's inputs
        unpack(score_feature_inputs),
        warmup=str(WARMUP_FLAG),
    output:
        [directory(PATHS.task_dir(t, "{kpset}", "{descriptor}", "{batch}")) for t in SCORE_TASKS_ON],
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(3),  # <root>/scores/<kpset>/<descriptor>/<batch>
        # every batch: the distractor draw depends on the whole scene list
        batches=as_json(BATCHES),
        # the descriptor's effective settings (its overrides: a sweep over scoring parameters):
        # scoring and every enabled task's section, one JSON
        sections=lambda wc: sections_json(wc.descriptor),
        features=features_arg,
        pairs=PAIRS_MODE,  # each scene's pairs without a pairs.txt (descbench.datasets.layout)
        numba_cache=NUMBA_CACHE,
    log:
        str(RES / "logs" / "score" / "{kpset}" / "{descriptor}" / "{batch}.log"),
    benchmark:
        str(RES / "benchmarks" / "score" / "{kpset}" / "{descriptor}" / "{batch}.tsv")
    threads: CFG["scoring"]["threads"]
    resources:
        # descbench.jobresources.score_job: chunk_mb bounds the screen block; the distractor bank, one
        # scene's features (keypoints x the descriptor's width) and the runtime
        mem_mb=lambda wc, attempt: score_job(wc)["mem_mb"] * attempt,
        runtime=lambda wc, attempt: score_job(wc)["runtime"] * attempt,
    conda:
        ENV
    shell:
        "export NUMBA_NUM_THREADS={threads} {params.numba_cache}; {params.descbench} score --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches {params.batches:q} --batch {wildcards.batch} --keypoint-set {wildcards.kpset} "
        "--descriptor {wildcards.descriptor} --sections {params.sections:q} {params.features} --pairs {params.pairs} --threads {threads} > {log} 2>&1"


# Every scene's distractor keypoints of one (keypoint set, descriptor), drawn once: the scoring
# jobs read this one file instead of ~20 other scenes' files each (a smaller DAG, fewer reads).
rule distractors:
    input:
        keypoints=[PATHS.keypoints_dir("{kpset}", b) for b in BATCHES],
        descriptors=lambda wc: [PATHS.descriptors_dir(wc.kpset, features_of(wc.descriptor), b) for b in BATCHES],
    output:
        PATHS.distractor_bank("{kpset}", "{descriptor}"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        results_root=results_root(2),  # <root>/distractors/<kpset>/<descriptor>.parquet
        batches=as_json(BATCHES),
        draw=lambda wc: as_json({k: effective_config(CFG, wc.descriptor)["verification"][k]
                                 for k in ("seed", "distractor_scenes", "distractors_per_scene")}),
        features=features_arg,
    log:
        str(RES / "logs" / "distractors" / "{kpset}" / "{descriptor}.log"),
    benchmark:
        str(RES / "benchmarks" / "distractors" / "{kpset}" / "{descriptor}.tsv")
    threads: 1
    resources:
        # a few hundred keypoints per scene, drawn once
        mem_mb=1500,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} distractors --results-root {params.results_root} --batches {params.batches:q} "
        "--keypoint-set {wildcards.kpset} --descriptor {wildcards.descriptor} --verification {params.draw:q} "
        "{params.features} --out {output} > {log} 2>&1"
