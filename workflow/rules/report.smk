# Report stage: the comparison table across descriptors and keypoint sets.


rule report:
    input:
        report_inputs(),
    output:
        report_outputs(),
    params:
        combos=as_json(COMBOS),
        scenes=as_json(SCENES),
        root=results_root(1),  # <root>/report/comparison.csv
        config=as_json(CFG),
        provenance=as_json({"dataset": dataset_tag(CFG), "scenes": SCENES, "config": CFG}),
        out_dir=lambda wc, output: str(Path(output[0]).parent),
    log:
        str(RES / "logs" / "report.log"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        ENV
    shell:
        "python -m descbench report --results-root {params.root} --combos {params.combos:q} "
        "--scenes {params.scenes:q} --config {params.config:q} --provenance {params.provenance:q} "
        "--out-dir {params.out_dir} > {log} 2>&1"


# Keypoint statistics of every set (counts, sizes, coverage, repeatability at
# matching.repeatability_px, provenance), next to the comparison table.
rule keypoint_stats:
    input:
        [PATHS.keypoints_dir(ks, b) for ks in CFG["keypoint_sets"] for b in BATCHES],
    output:
        [PATHS.report(f) for f in KEYPOINT_STATS_FILES],
    params:
        root=results_root(1),  # <root>/report/keypoint_stats.csv
        scene_root=str(DATA),
        batches=as_json(BATCHES),
        kpsets=as_json([[name, spec] for name, spec in CFG["keypoint_sets"].items()]),  # rows in config order
        repeatability_px=CFG["matching"]["repeatability_px"],
        out_dir=lambda wc, output: str(Path(output[0]).parent),
    log:
        str(RES / "logs" / "keypoint_stats.log"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        ENV
    shell:
        "python -m descbench keypoint-stats --results-root {params.root} --scene-root {params.scene_root} "
        "--batches {params.batches:q} --keypoint-sets {params.kpsets:q} --repeatability-px {params.repeatability_px} "
        "--out-dir {params.out_dir} > {log} 2>&1"
