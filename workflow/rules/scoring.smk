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
