# Report stage: the comparison table across descriptors and keypoint sets.


rule report:
    input:
        pairs=[p for e in report_entries() for p in e["pairs"]],
        timings=[p for e in report_entries() for p in e["timings"]],
    output:
        report_outputs(),
    params:
        entries=as_json(report_entries()),
        scoring=as_json(CFG["scoring"]),
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
        "python -m descbench report --entries {params.entries:q} --scoring {params.scoring:q} "
        "--provenance {params.provenance:q} --out-dir {params.out_dir} > {log} 2>&1"
