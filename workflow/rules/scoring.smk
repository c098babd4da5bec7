# Scoring stage: numba kernels, compiled once into the on-disk cache before parallel jobs.


rule numba_warmup:
    output:
        str(WARMUP_FLAG),
    log:
        str(Path(CFG["results_dir"]) / "logs" / "numba_warmup.log"),
    threads: 1
    resources:
        mem_mb=1000,
    conda:
        ENV
    shell:
        "python -m descbench warmup --out {output} > {log} 2>&1"


rule score_retrieval:
    input:
        scene=scene_inputs,
        keypoints=keypoints_path("{kpset}", "{scene}"),
        descriptors=descriptors_path("{kpset}", "{descriptor}", "{scene}"),
        warmup=str(WARMUP_FLAG),
    output:
        queries=score_path("{kpset}", "{descriptor}", "{scene}", "queries.parquet"),
        pairs=score_path("{kpset}", "{descriptor}", "{scene}", "pairs.parquet"),
        timing=score_path("{kpset}", "{descriptor}", "{scene}", "timing.json"),
    params:
        scene_dir=scene_dir,
        scoring=as_json({k: v for k, v in CFG["scoring"].items() if k != "threads"}),
    log:
        str(RES / "logs" / "score" / "{kpset}" / "{descriptor}" / "{scene}.log"),
    benchmark:
        str(RES / "benchmarks" / "score" / "{kpset}" / "{descriptor}" / "{scene}.tsv")
    threads: CFG["scoring"]["threads"]
    resources:
        # chunk_mb bounds the screen block; the rest is descriptors, keypoints and the runtime
        mem_mb=lambda wc, threads: int(1000 + 2 * CFG["scoring"]["chunk_mb"]),
    conda:
        ENV
    shell:
        "python -m descbench score --scene-dir {params.scene_dir} --keypoints {input.keypoints} "
        "--descriptors {input.descriptors} --scoring {params.scoring:q} --out-queries {output.queries} "
        "--out-pairs {output.pairs} --out-timing {output.timing} --threads {threads} > {log} 2>&1"


rule score_verification:
    input:
        unpack(distractor_inputs),
        scene=scene_inputs,
        keypoints=keypoints_path("{kpset}", "{scene}"),
        descriptors=descriptors_path("{kpset}", "{descriptor}", "{scene}"),
        warmup=str(WARMUP_FLAG),
    output:
        vlist=verification_path("{kpset}", "{descriptor}", "{scene}", "list.parquet"),
        queries=verification_path("{kpset}", "{descriptor}", "{scene}", "queries.parquet"),
        scene_stats=verification_path("{kpset}", "{descriptor}", "{scene}", "scene.parquet"),
        timing=verification_path("{kpset}", "{descriptor}", "{scene}", "timing.json"),
    params:
        scene_dir=scene_dir,
        distractors=distractor_arg,
        scenes=as_json(SCENES),
        scoring=as_json({k: v for k, v in CFG["scoring"].items() if k != "threads"}),
        verification=as_json({k: v for k, v in CFG["verification"].items() if k != "enabled"}),
    log:
        str(RES / "logs" / "verification" / "{kpset}" / "{descriptor}" / "{scene}.log"),
    benchmark:
        str(RES / "benchmarks" / "verification" / "{kpset}" / "{descriptor}" / "{scene}.tsv")
    threads: CFG["scoring"]["threads"]
    resources:
        mem_mb=lambda wc, threads: int(1500 + 2 * CFG["scoring"]["chunk_mb"]),
    conda:
        ENV
    shell:
        "python -m descbench verification --scene-dir {params.scene_dir} --keypoints {input.keypoints} "
        "--descriptors {input.descriptors} --distractors {params.distractors:q} --scenes {params.scenes:q} "
        "--scoring {params.scoring:q} --verification {params.verification:q} --out-list {output.vlist} "
        "--out-queries {output.queries} --out-scene {output.scene_stats} --out-timing {output.timing} "
        "--threads {threads} > {log} 2>&1"


rule score_matching:
    input:
        scene=scene_inputs,
        keypoints=keypoints_path("{kpset}", "{scene}"),
        descriptors=descriptors_path("{kpset}", "{descriptor}", "{scene}"),
        warmup=str(WARMUP_FLAG),
    output:
        pairs=matching_path("{kpset}", "{descriptor}", "{scene}", "pairs.parquet"),
        classifier=matching_path("{kpset}", "{descriptor}", "{scene}", "classifier.parquet"),
        roc=matching_path("{kpset}", "{descriptor}", "{scene}", "roc.parquet"),
        timing=matching_path("{kpset}", "{descriptor}", "{scene}", "timing.json"),
    params:
        scene_dir=scene_dir,
        scoring=as_json({k: v for k, v in CFG["scoring"].items() if k != "threads"}),
        matching=as_json({k: v for k, v in CFG["matching"].items() if k != "enabled"}),
    log:
        str(RES / "logs" / "matching" / "{kpset}" / "{descriptor}" / "{scene}.log"),
    benchmark:
        str(RES / "benchmarks" / "matching" / "{kpset}" / "{descriptor}" / "{scene}.tsv")
    threads: CFG["scoring"]["threads"]
    resources:
        mem_mb=lambda wc, threads: int(1500 + 2 * CFG["scoring"]["chunk_mb"]),
    conda:
        ENV
    shell:
        "python -m descbench matching --scene-dir {params.scene_dir} --keypoints {input.keypoints} "
        "--descriptors {input.descriptors} --scoring {params.scoring:q} --matching {params.matching:q} "
        "--out-pairs {output.pairs} --out-classifier {output.classifier} --out-roc {output.roc} "
        "--out-timing {output.timing} --threads {threads} > {log} 2>&1"
