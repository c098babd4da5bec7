# Keypoint stage: detection, border filter and response cap, one job per (keypoint set, scene
# batch) writing one file per scene into the batch folder.


rule keypoints:
    input:
        scene=batch_scene_inputs,
        features=precomputed_inputs,
    output:
        directory(PATHS.keypoints_dir("{kpset}", "{batch}")),
    params:
        scene_root=lambda wc: str(DATA),
        results_root=results_root(2),  # <root>/keypoints/<kpset>/<batch>
        batches=batch_json,
        spec=lambda wc: as_json(CFG["keypoint_sets"][wc.kpset]),
    log:
        str(RES / "logs" / "keypoints" / "{kpset}" / "{batch}.log"),
    benchmark:
        str(RES / "benchmarks" / "keypoints" / "{kpset}" / "{batch}.tsv")
    threads: 1
    resources:
        mem_mb=1500,
    conda:
        ENV
    shell:
        "python -m descbench keypoints --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches {params.batches:q} --batch {wildcards.batch} --name {wildcards.kpset} --spec {params.spec:q} "
        "--threads {threads} > {log} 2>&1"
