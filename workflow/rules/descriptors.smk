# Descriptor stage: one job per (keypoint set, descriptor, scene). The descriptor's own
# parameters are rule params, so editing one descriptor reruns only its jobs.


rule descriptors:
    input:
        scene=scene_inputs,
        features=precomputed_inputs,
        keypoints=keypoints_path("{kpset}", "{scene}"),
    output:
        descriptors_path("{kpset}", "{descriptor}", "{scene}"),
    params:
        scene_dir=scene_dir,
        spec=lambda wc: as_json(CFG["descriptors"][wc.descriptor]),
        kpset_spec=lambda wc: as_json(CFG["keypoint_sets"][wc.kpset]),
    log:
        str(RES / "logs" / "descriptors" / "{kpset}" / "{descriptor}" / "{scene}.log"),
    benchmark:
        str(RES / "benchmarks" / "descriptors" / "{kpset}" / "{descriptor}" / "{scene}.tsv")
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        ENV
    shell:
        "python -m descbench descriptors --scene-dir {params.scene_dir} --keypoints {input.keypoints} "
        "--name {wildcards.descriptor} --spec {params.spec:q} --keypoint-set-spec {params.kpset_spec:q} "
        "--out {output} --threads {threads} > {log} 2>&1"
