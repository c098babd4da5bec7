# HPatches patch benchmarks (patches.enabled): the patch dataset (generated from this run's
# sequences, downloaded hpatches-release, or your folder) -> one descriptor job per (descriptor,
# sequence) -> task files (HBench .benchmark/.labels, hpatches-benchmark task CSVs) once ->
# one evaluation job per descriptor -> the report's patch tables and plot.

if PATCHES_ON:

    if PATCH_CFG["source"] == "generated":

        # One job per scene: its 16 strips and patches.json (provenance), from the scene's images.
        rule patch_generate:
            input:
                # a folder dataset's files by content (the demo's come from its own rule)
                scene=lambda wc: tracked(_scene_inputs(wc.seq)) if user_files() else _scene_inputs(wc.seq),
                gen=lambda wc: spec_file("patches", "generate", PATCH_CFG["generate"]),
            output:
                [str(PATCH_ROOT / "{seq}" / f"{t}.png") for t in PATCH_TYPES] + [str(PATCH_ROOT / "{seq}" / "patches.json")],
            params:
                descbench=DESCBENCH,  # how the job starts descbench (common.smk)
                scene_dir=lambda wc: str(DATA / wc.seq),
                out_dir=lambda wc, output: str(Path(output[0]).parent),
            log:
                str(RES / "logs" / "patches" / "generate" / "{seq}.log"),
            threads: 1
            resources:
                # one scene's 6 images, 16 strips written
                mem_mb=1000,
                runtime=10,
            conda:
                ENV
            shell:
                "{params.descbench} patches generate --scene-dir {params.scene_dir} --out-dir {params.out_dir} "
                "--params @{input.gen:q} > {log} 2>&1"

    if PATCH_CFG["source"] == "hpatches_release":

        localrules:
            hpatches_patches_download,

        rule hpatches_patches_download:
            output:
                PATCH_FLAG,
            params:
                descbench=DESCBENCH,  # how the job starts descbench (common.smk)
                urls=" ".join(PATCH_CFG["urls"]),
                sha256=f"--sha256 {PATCH_CFG['sha256']}" if PATCH_CFG["sha256"] else "",
                data_dir=CFG["data_dir"],
            log:
                str(RES / "logs" / "patches" / "download.log"),
            threads: 1
            resources:
                # runs on the submit host (localrules): a 4.2 GB download
                mem_mb=1000,
                runtime=60,
            conda:
                ENV
            shell:
                "{params.descbench} patches download --urls {params.urls} {params.sha256} --data-dir {params.data_dir} "
                "--flag {output} 2>&1 | tee {log}"

    # One job per (descriptor, sequence): its 16 strips described (or read from CSV files).
    rule patch_descriptors:
        input:
            sequence=patch_sequence_inputs,
            # the onnx model / torch weight files its params name, by content (digest files)
            models=patch_model_files,
            spec=patch_describe_spec,
        output:
            str(RES / "patches" / "descriptors" / "{pdesc}" / "{seq}.parquet"),
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            patch_dir=lambda wc: str(PATCH_ROOT / wc.seq),
            how=patch_describe_args,
        log:
            str(RES / "logs" / "patches" / "descriptors" / "{pdesc}" / "{seq}.log"),
        # a learned family: its params.threads (torch's CPU threads; onnxruntime and OpenCV follow --threads)
        threads: patch_threads
        resources:
            # descbench.jobresources.patch_job: one sequence's 16 strips of patches (a learned family: its batch)
            mem_mb=lambda wc, attempt: patch_job(wc)["mem_mb"] * attempt,
            runtime=lambda wc, attempt: patch_job(wc)["runtime"] * attempt,
        conda:
            patch_env
        shell:
            "{params.descbench} patches describe --patch-dir {params.patch_dir} --out {output} --name {wildcards.pdesc} "
            "{params.how} --threads {threads} > {log} 2>&1"

    # The task files of every benchmark, once per dataset (they depend on the patch counts only,
    # and for hpatches-benchmark's retrieval on the ref patches' contrast).
    rule patch_tasks:
        input:
            sequences=lambda wc: sorted({f for s in PATCH_SEQS for f in patch_sequence_files(s)}),
            seqs=lambda wc: spec_file("patches", "sequences", PATCH_SEQS),
            cfg=lambda wc: spec_file("patches", "config", PATCH_CFG),
        output:
            directory(str(RES / "patches" / "tasks")),
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            patch_root=str(PATCH_ROOT),
        log:
            str(RES / "logs" / "patches" / "tasks.log"),
        threads: 1
        resources:
            # every sequence's patch counts, the benchmarks' task files
            mem_mb=4000,
            runtime=15,
        conda:
            ENV
        shell:
            "{params.descbench} patches tasks --patch-root {params.patch_root} --sequences @{input.seqs:q} "
            "--config @{input.cfg:q} --out-dir {output} > {log} 2>&1"

    # Every benchmark of one descriptor: HBench .results files and evaluations, hpatches-benchmark tasks.
    rule patch_evaluate:
        input:
            tasks=str(RES / "patches" / "tasks"),
            descriptors=[str(RES / "patches" / "descriptors" / "{pdesc}" / f"{s}.parquet") for s in PATCH_SEQS],
            cfg=lambda wc: spec_file("patches", "config", PATCH_CFG),
        output:
            directory(str(RES / "patches" / "eval" / "{pdesc}")),
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        log:
            str(RES / "logs" / "patches" / "eval" / "{pdesc}.log"),
        threads: 1
        resources:
            # one descriptor on every sequence: HBench and hpatches-benchmark tasks
            mem_mb=6000,
            runtime=30,
        conda:
            ENV
        shell:
            "{params.descbench} patches evaluate --tasks {input.tasks} --name {wildcards.pdesc} "
            "--config @{input.cfg:q} --out-dir {output} {input.descriptors} > {log} 2>&1"

    # One table per benchmark across descriptors, and the mAP-per-task plot.
    rule patch_report:
        input:
            evals=[str(RES / "patches" / "eval" / d) for d in PATCH_CFG["descriptors"]],
            names=lambda wc: spec_file("patches", "names", PATCH_CFG["descriptors"]),
            # each row's learned weights (descbench.config.learned_weights; '' when none)
            weights=lambda wc: spec_file("patches", "weights", [learned_weights(CFG, None, d) for d in PATCH_CFG["descriptors"]]),
        output:
            [_in_report(f"patches/{f}") for f in PATCH_REPORT_FILES],
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            out_dir=lambda wc, output: str(Path(output[0]).parent),
        log:
            str(RES / "logs" / "patches" / "report.log"),
        threads: 1
        resources:
            # the patch tables and the plot
            mem_mb=2000,
            runtime=10,
        conda:
            ENV
        shell:
            "{params.descbench} patches report --names @{input.names:q} --weights @{input.weights:q} --out-dir {params.out_dir} "
            "{input.evals} > {log} 2>&1"
