# Descriptor stage: one job per (keypoint set, descriptor, scene batch). The descriptor's own
# parameters are rule params, so editing one descriptor reruns only its jobs.


rule descriptors:
    input:
        # the scene files and precomputed features are the keypoint job's inputs (common.smk)
        keypoints=PATHS.keypoints_dir("{kpset}", "{batch}"),
        # a composite reads its components' keypoint and descriptor folders (descbench.descriptors.composite)
        components=composite_inputs,
        # the onnx model / torch weight files its params name, by content (digest files)
        models=descriptor_model_files,
        # its settings (spec files, rewritten only when they change: common.smk)
        batches_spec=lambda wc: batch_spec(wc.batch),
        spec=descriptor_job_spec,
        # the detector set the keypoints come from (a derived set: its root; SIFT's pyramid, files)
        kpset_spec=lambda wc: spec_file("keypoint_roots", wc.kpset, root_detector_spec(CFG["keypoint_sets"], wc.kpset)),
    output:
        directory(PATHS.descriptors_dir("{kpset}", "{descriptor}", "{batch}")),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(3),  # <root>/descriptors/<kpset>/<descriptor>/<batch>
    log:
        str(RES / "logs" / "descriptors" / "{kpset}" / "{descriptor}" / "{batch}.log"),
    # learned families: their params.threads (torch's CPU threads) and a GPU for device: cuda
    threads: lambda wc: descriptor_resources(wc)["threads"]
    resources:
        # descbench.jobresources.descriptor_job: image sizes, keypoint counts (the set's files once
        # they exist), the family's cost
        mem_mb=lambda wc, attempt: descriptor_job(wc)["mem_mb"] * attempt,
        runtime=lambda wc, attempt: descriptor_job(wc)["runtime"] * attempt,
        gpu=lambda wc: descriptor_resources(wc)["gpu"],
    conda:
        descriptor_env
    shell:
        "{params.descbench} descriptors --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches @{input.batches_spec:q} --batch {wildcards.batch} --keypoint-set {wildcards.kpset} "
        "--name {wildcards.descriptor} --spec @{input.spec:q} --keypoint-set-spec @{input.kpset_spec:q} "
        "--threads {threads} > {log} 2>&1"
