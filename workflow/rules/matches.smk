# Matcher stage: one job per (keypoint set, descriptor, matcher, scene batch) writes the matches of
# every pair (descbench.matchers), once; the match-based tasks read them. Runs only for the
# config's `matchers:` (none by default).


rule match:
    input:
        keypoints=lambda wc: PATHS.keypoints_dir(wc.kpset, wc.batch),
        descriptors=lambda wc: PATHS.descriptors_dir(wc.kpset, features_of(wc.descriptor), wc.batch),
        batch_spec=lambda wc: batch_spec(wc.batch),
        spec=matcher_job_spec,
        # the weight files its params name, by content (digest files)
        models=matcher_model_files,
        pairs_spec=lambda wc: pairs_spec(),
    output:
        directory(PATHS.matches_dir("{kpset}", "{descriptor}", "{matcher}", "{batch}")),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(4),  # <root>/matches/<kpset>/<descriptor>/<matcher>/<batch>
        features=features_arg,
        pairs=PAIRS_MODE,
    log:
        str(RES / "logs" / "match" / "{kpset}" / "{descriptor}" / "{matcher}" / "{batch}.log"),
    # a torch matcher (kornia's, LightGlue): its params.threads and a GPU for device: cuda
    threads: lambda wc: matcher_resources(wc)["threads"]
    resources:
        # one scene's features at a time; nearest-neighbour matchers: one screen block (scoring.chunk_mb)
        mem_mb=2000,
        runtime=30,
        gpu=lambda wc: matcher_resources(wc)["gpu"],
    conda:
        matcher_env
    shell:
        "{params.descbench} match --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches @{input.batch_spec:q} --batch {wildcards.batch} --keypoint-set {wildcards.kpset} "
        "--descriptor {wildcards.descriptor} --matcher {wildcards.matcher} --spec @{input.spec:q} {params.features} "
        "--pairs {params.pairs} --threads {threads} > {log} 2>&1"


# The pipelines task (descbench.tasks.pipelines): each (keypoint set, descriptor, matcher)'s matches
# evaluated on every pair -- match accuracy and homography estimation, glue-factory's protocol.
rule score_pipelines:
    input:
        matches=lambda wc: PATHS.matches_dir(wc.kpset, wc.descriptor, wc.matcher, wc.batch),
        keypoints=lambda wc: PATHS.keypoints_dir(wc.kpset, wc.batch),
        descriptors=lambda wc: PATHS.descriptors_dir(wc.kpset, features_of(wc.descriptor), wc.batch),
        batch_spec=lambda wc: batch_spec(wc.batch),
        spec=lambda wc: spec_file("matchers", wc.matcher, CFG["matchers"][wc.matcher]),
        sections=lambda wc: spec_file("pipelines", wc.descriptor, pipeline_sections(wc.descriptor)),
        pairs_spec=lambda wc: pairs_spec(),
    output:
        directory(PATHS.match_task_dir("pipelines", "{kpset}", "{descriptor}", "{matcher}", "{batch}")),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(4),  # <root>/pipelines/<kpset>/<descriptor>/<matcher>/<batch>
        features=features_arg,
        pairs=PAIRS_MODE,
    log:
        str(RES / "logs" / "pipelines" / "{kpset}" / "{descriptor}" / "{matcher}" / "{batch}.log"),
    threads: 1
    resources:
        # per pair: one estimate per estimator and RANSAC threshold on a few thousand matches
        mem_mb=2000,
        runtime=30,
    conda:
        ENV
    shell:
        "{params.descbench} score-pipelines --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches @{input.batch_spec:q} --batch {wildcards.batch} --keypoint-set {wildcards.kpset} "
        "--descriptor {wildcards.descriptor} --matcher {wildcards.matcher} --spec @{input.spec:q} "
        "--sections @{input.sections:q} {params.features} --pairs {params.pairs} > {log} 2>&1"


# The pipelines table: one row per (keypoint set, descriptor, matcher).
rule pipelines_report:
    input:
        [PATHS.match_task_dir("pipelines", ks, d, m, b) for ks, d, m in MATCH_COMBOS for b in BATCHES],
        batches_spec=lambda wc: all_batches_spec(),
        combos=lambda wc: spec_file("report", "pipelines", MATCH_COMBOS),
        comparison=PATHS.report("comparison.parquet"),  # its descriptor metrics join each row
        config=lambda wc: spec_file("report", "config", CFG_REPORT),
    output:
        [PATHS.report(f"pipelines.{ext}") for ext in ("parquet", "csv", "md")],
        report(PATHS.report("plots/pipelines_corner_error.png"), caption=str(CAPTIONS_DIR / "pipelines_corner_error.rst"),
               category="Plots"),
        PATHS.report("plots/pipelines_corner_error.svg"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        root=results_root(1),  # <root>/report/pipelines.parquet
        out_dir=lambda wc, output: str(Path(output[0]).parent),
        plots_dir=lambda wc, output: str(Path(output[3]).parent),
    log:
        str(RES / "logs" / "pipelines_report.log"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} pipelines-report --results-root {params.root} --batches @{input.batches_spec:q} "
        "--combos @{input.combos:q} --config @{input.config:q} --comparison {input.comparison:q} --out-dir {params.out_dir} --plots-dir {params.plots_dir} > {log} 2>&1"


# The pose task (descbench.tasks.pose) on a posed dataset: each (keypoint set, descriptor,
# matcher)'s matches evaluated on every pair -- relative pose and epipolar precision, glue-factory's
# MegaDepth-1500 / ScanNet-1500 protocol.
rule score_pose:
    input:
        matches=lambda wc: PATHS.matches_dir(wc.kpset, wc.descriptor, wc.matcher, wc.batch),
        keypoints=lambda wc: PATHS.keypoints_dir(wc.kpset, wc.batch),
        descriptors=lambda wc: PATHS.descriptors_dir(wc.kpset, features_of(wc.descriptor), wc.batch),
        batch_spec=lambda wc: batch_spec(wc.batch),
        spec=lambda wc: spec_file("matchers", wc.matcher, CFG["matchers"][wc.matcher]),
        section=lambda wc: spec_file("pose", "section", POSE_SECTION),  # depth resolved (common.smk)
    output:
        directory(PATHS.match_task_dir("pose", "{kpset}", "{descriptor}", "{matcher}", "{batch}")),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        scene_root=lambda wc: str(DATA),
        results_root=results_root(4),  # <root>/pose/<kpset>/<descriptor>/<matcher>/<batch>
        features=features_arg,
    log:
        str(RES / "logs" / "pose" / "{kpset}" / "{descriptor}" / "{matcher}" / "{batch}.log"),
    threads: 1
    resources:
        # per pair: one estimate per estimator and RANSAC threshold on a few thousand matches
        mem_mb=2000,
        runtime=30,
    conda:
        ENV
    shell:
        "{params.descbench} score-pose --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches @{input.batch_spec:q} --batch {wildcards.batch} --keypoint-set {wildcards.kpset} "
        "--descriptor {wildcards.descriptor} --matcher {wildcards.matcher} --spec @{input.spec:q} "
        "--section @{input.section:q} {params.features} > {log} 2>&1"


# The pose table: one row per (keypoint set, descriptor, matcher), and the cumulative pose-error figure.
rule pose_report:
    input:
        [PATHS.match_task_dir("pose", ks, d, m, b) for ks, d, m in MATCH_COMBOS for b in BATCHES],
        batches_spec=lambda wc: all_batches_spec(),
        combos=lambda wc: spec_file("report", "pose", MATCH_COMBOS),
        config=lambda wc: spec_file("report", "config", CFG_REPORT),
    output:
        [PATHS.report(f"pose.{ext}") for ext in ("parquet", "csv", "md")],
        report(PATHS.report("plots/pose_error.png"), caption=str(CAPTIONS_DIR / "pose_error.rst"), category="Plots"),
        PATHS.report("plots/pose_error.svg"),
    params:
        descbench=DESCBENCH,  # how the job starts descbench (common.smk)
        root=results_root(1),  # <root>/report/pose.parquet
        out_dir=lambda wc, output: str(Path(output[0]).parent),
        plots_dir=lambda wc, output: str(Path(output[3]).parent),
    log:
        str(RES / "logs" / "pose_report.log"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    conda:
        ENV
    shell:
        "{params.descbench} pose-report --results-root {params.root} --batches @{input.batches_spec:q} "
        "--combos @{input.combos:q} --config @{input.config:q} --out-dir {params.out_dir} --plots-dir {params.plots_dir} > {log} 2>&1"
