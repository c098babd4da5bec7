# Report stage: the comparison table across descriptors and keypoint sets.


rule report:
    input:
        report_inputs(),
        # its settings (spec files, rewritten only when they change: common.smk)
        combos=lambda wc: spec_file("report", "combos", COMBOS),
        scenes=lambda wc: spec_file("report", "scenes", SCENES),
        config=lambda wc: spec_file("report", "config", CFG_REPORT),
        # + the Snakemake that ran it and which descbench.smktuning adjustments it applied (common.smk)
        provenance=lambda wc: spec_file("report", "provenance", {"experiment": experiment_name(CFG), "dataset": dataset_tag(CFG),
                                                                 "scenes": SCENES, "config": CFG_REPORT, "snakemake": SMK_TUNING}),
    output:
        report_outputs(),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        root=results_root(1),  # <root>/report/comparison.csv
        out_dir=lambda wc, output: str(Path(output[0]).parent),
    log:
        str(RES / "logs" / "report.log"),
    threads: 1
    resources:
        # per-scene tables and the bootstrap, seconds
        mem_mb=2000,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} report --results-root {params.root} --combos @{input.combos:q} "
        "--scenes @{input.scenes:q} --config @{input.config:q} --provenance @{input.provenance:q} "
        "--out-dir {params.out_dir} > {log} 2>&1"


# Keypoint statistics of every set (counts, sizes, coverage, repeatability at
# matching.repeatability_px, provenance), next to the comparison table.
rule keypoint_stats:
    input:
        keypoints=[PATHS.keypoints_dir(ks, b) for ks in CFG["keypoint_sets"] for b in BATCHES],
        batches_spec=lambda wc: all_batches_spec(),
        kpsets=lambda wc: spec_file("report", "keypoint_sets", [[name, spec] for name, spec in CFG["keypoint_sets"].items()]),  # rows in config order
        pairs_spec=lambda wc: pairs_spec(),
    output:
        [_in_report(f) for f in KEYPOINT_STATS_FILES],
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        root=results_root(1),  # <root>/report/keypoint_stats.csv
        scene_root=lambda wc: str(DATA),
        repeatability_px=CFG["matching"]["repeatability_px"],
        pairs=PAIRS_MODE,  # the pairs whose repeatability is reported (descbench.datasets.layout)
        out_dir=lambda wc, output: str(Path(output[0]).parent),
    log:
        str(RES / "logs" / "keypoint_stats.log"),
    threads: 1
    resources:
        # every set's keypoint files, one pass
        mem_mb=2000,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} keypoint-stats --results-root {params.root} --scene-root {params.scene_root} "
        "--batches @{input.batches_spec:q} --keypoint-sets @{input.kpsets:q} --repeatability-px {params.repeatability_px} "
        "--pairs {params.pairs} --out-dir {params.out_dir} > {log} 2>&1"


# The run's figures (descbench/report/plots.py), PNG + SVG; captions state each metric's definition.
rule plots:
    input:
        report_inputs(),
        report_outputs(),
        [PATHS.report(f) for f in KEYPOINT_STATS_FILES],
        combos=lambda wc: spec_file("report", "combos", COMBOS),
        scenes=lambda wc: spec_file("report", "scenes", SCENES),
        config=lambda wc: spec_file("report", "config", CFG_REPORT),
    output:
        [report(PATHS.report(f"plots/{name}.png"), caption=str(CAPTIONS_DIR / f"{name}.rst"), category="Plots")
         for name in PLOTS],
        [PATHS.report(f"plots/{name}.svg") for name in PLOTS],
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        root=lambda wc, output: str(Path(output[0]).parents[2]),  # <root>/report/plots/x.png
        report_dir=lambda wc, output: str(Path(output[0]).parents[1]),
        out_dir=lambda wc, output: str(Path(output[0]).parent),
    log:
        str(RES / "logs" / "plots.log"),
    threads: 1
    resources:
        # matplotlib figures from the report's tables
        mem_mb=2000,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} plots --results-root {params.root} --combos @{input.combos:q} --scenes @{input.scenes:q} "
        "--config @{input.config:q} --report-dir {params.report_dir} --out-dir {params.out_dir} > {log} 2>&1"


# The inspector page (descbench/report/inspect.py, config `inspector`): one or two descriptors'
# matches on their worst or most different pairs, in `snakemake --report` under "Inspector".
if INSPECTOR:

    rule inspector:
        input:
            keypoints=[PATHS.keypoints_dir(INSPECTOR.keypoint_set, b) for b in BATCHES],
            descriptors=[PATHS.descriptors_dir(INSPECTOR.keypoint_set, d, b) for d in INSPECTOR.descriptors for b in BATCHES],
            matching=[PATHS.task_dir("matching", INSPECTOR.keypoint_set, d, b) for d in INSPECTOR.descriptors for b in BATCHES],
            # the run's settings as the report jobs read them (descbench.jobs.inspect.run_settings)
            combos=lambda wc: spec_file("report", "combos", COMBOS),
            scenes=lambda wc: spec_file("report", "scenes", SCENES),
            config=lambda wc: spec_file("report", "config", CFG_REPORT),
        output:
            report(PATHS.report("inspector.html"), caption=str(CAPTIONS_DIR / "inspector.rst"), category="Inspector"),
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            results=lambda wc, output: str(Path(output[0]).parents[1]),  # <results>/report/inspector.html
            choice=" ".join([f"--keypoint-set {shlex.quote(INSPECTOR.keypoint_set)} --descriptor {shlex.quote(INSPECTOR.descriptors[0])}",
                             *(f"--vs {shlex.quote(d)}" for d in INSPECTOR.descriptors[1:]),
                             f"--metric {shlex.quote(INSPECTOR.metric)} --max-pairs {CFG['inspector']['max_pairs']}"]),
        log:
            str(RES / "logs" / "inspector.log"),
        threads: 1
        resources:
            # the pairs files, then the drawn pairs' images and features
            mem_mb=2000,
            runtime=15,
        conda:
            ENV
        shell:
            "{params.descbench} inspect --results {params.results:q} {params.choice} --out {output} > {log} 2>&1"


# The SQLite results database (descbench/report/database.py), rebuilt from the report files.
rule results_db:
    input:
        report_outputs(),
        [PATHS.report(f) for f in KEYPOINT_STATS_FILES],
        config=lambda wc: spec_file("report", "config", CFG_REPORT),
        # the workbench's patch_benchmark_results rows (patches.workbench.enabled; else none)
        patch_benchmark=workbench_patch_table(),
    output:
        str(RES / "results.sqlite"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        report_dir=lambda wc, input: str(Path(input[0]).parent),
        patch_benchmark=" ".join(f"--patch-benchmark {shlex.quote(f)}" for f in workbench_patch_table()),
        name=experiment_name(CFG),
        n_scenes=len(SCENES),
        workflow_dir=workflow.basedir,
    log:
        str(RES / "logs" / "results_db.log"),
    threads: 1
    resources:
        # SQLite from the report files
        mem_mb=1000,
        runtime=10,
    conda:
        ENV
    shell:
        "{params.descbench} database --report-dir {params.report_dir} --name {params.name} --config @{input.config:q} "
        "--n-scenes {params.n_scenes} --workflow-dir {params.workflow_dir:q} {params.patch_benchmark} --out {output} > {log} 2>&1"


# A run that starts jobs takes the results folder's lock (not -n, --lint, --report, --unlock);
# the end of the run releases it (workflow/rules/common.smk, descbench.runguard).
onstart:
    check_until()
    take_results_lock()


# End of a successful run: the headline table, what is not a plain result, and where everything is.
onsuccess:
    smktuning.cancel_pending_timers()
    release_results_lock()
    print_run_summary()


onerror:
    smktuning.cancel_pending_timers()
    release_results_lock()
    print_run_stopped()  # a failed job or an interrupt (workflow/rules/common.smk)
