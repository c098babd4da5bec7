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
