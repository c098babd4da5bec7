# Scoring stage: one job per (keypoint set, descriptor, scene batch) runs every enabled task of
# descbench.tasks.SCORING_TASKS -- keypoint retrieval (scores/), keypoint verification +
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
        # every batch: the distractor draw depends on the whole scene list
        batches_spec=lambda wc: all_batches_spec(),
        # the descriptor's effective settings (its overrides: a sweep over scoring parameters):
        # scoring and every enabled task's section, one spec file
        sections=lambda wc: spec_file("score", wc.descriptor, score_job_sections(CFG, wc.descriptor)),
        pairs_spec=lambda wc: pairs_spec(),
    output:
        [directory(PATHS.task_dir(t, "{kpset}", "{descriptor}", "{batch}")) for t in SCORE_TASKS_ON],
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(3),  # <root>/scores/<kpset>/<descriptor>/<batch>
        features=features_arg,
        pairs=PAIRS_MODE,  # each scene's pairs without a pairs.txt (descbench.datasets.layout)
        numba_cache=NUMBA_CACHE,
    log:
        str(RES / "logs" / "score" / "{kpset}" / "{descriptor}" / "{batch}.log"),
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
        "--batches @{input.batches_spec:q} --batch {wildcards.batch} --keypoint-set {wildcards.kpset} "
        "--descriptor {wildcards.descriptor} --sections @{input.sections:q} {params.features} --pairs {params.pairs} --threads {threads} > {log} 2>&1"


# Every scene's distractor keypoints of one (keypoint set, descriptor), drawn once: the scoring
# jobs read this one file instead of ~20 other scenes' files each (a smaller DAG, fewer reads).
rule distractors:
    input:
        keypoints=[PATHS.keypoints_dir("{kpset}", b) for b in BATCHES],
        descriptors=lambda wc: [PATHS.descriptors_dir(wc.kpset, features_of(wc.descriptor), b) for b in BATCHES],
        batches_spec=lambda wc: all_batches_spec(),
        draw=lambda wc: spec_file("distractors", wc.descriptor, {k: effective_config(CFG, wc.descriptor)["verification"][k]
                                                                 for k in ("seed", "distractor_scenes", "distractors_per_scene")}),
    output:
        PATHS.distractor_bank("{kpset}", "{descriptor}"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        results_root=results_root(2),  # <root>/distractors/<kpset>/<descriptor>.parquet
        features=features_arg,
    log:
        str(RES / "logs" / "distractors" / "{kpset}" / "{descriptor}.log"),
    threads: 1
    resources:
        # a few hundred keypoints per scene, drawn once
        mem_mb=1500,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} distractors --results-root {params.results_root} --batches @{input.batches_spec:q} "
        "--keypoint-set {wildcards.kpset} --descriptor {wildcards.descriptor} --verification @{input.draw:q} "
        "{params.features} --out {output} > {log} 2>&1"
