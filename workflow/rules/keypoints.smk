# Keypoint stage: detection, border filter and response cap, one job per (keypoint set, scene).


rule keypoints:
    input:
        scene=scene_inputs,
        features=precomputed_inputs,
    output:
        keypoints_path("{kpset}", "{scene}"),
    params:
        scene_dir=scene_dir,
        spec=lambda wc: as_json(CFG["keypoint_sets"][wc.kpset]),
    log:
        str(RES / "logs" / "keypoints" / "{kpset}" / "{scene}.log"),
    benchmark:
        str(RES / "benchmarks" / "keypoints" / "{kpset}" / "{scene}.tsv")
    threads: 1
    resources:
        mem_mb=1500,
    conda:
        ENV
    shell:
        "python -m descbench keypoints --scene-dir {params.scene_dir} --name {wildcards.kpset} "
        "--spec {params.spec:q} --out {output} --threads {threads} > {log} 2>&1"
