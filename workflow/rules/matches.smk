# Matcher stage: one job per (keypoint set, descriptor, matcher, scene batch) writes the matches of
# every pair (descbench.matchers), once; the match-based tasks read them. Runs only for the
# config's `matchers:` (none by default).


rule match:
    input:
        keypoints=lambda wc: PATHS.keypoints_dir(wc.kpset, wc.batch),
        descriptors=lambda wc: PATHS.descriptors_dir(wc.kpset, features_of(wc.descriptor), wc.batch),
        batch_spec=lambda wc: batch_spec(wc.batch),
        spec=lambda wc: spec_file("matchers", wc.matcher, CFG["matchers"][wc.matcher]),
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
    threads: 1
    resources:
        # one scene's features at a time; nearest-neighbour matchers: one screen block (scoring.chunk_mb)
        mem_mb=2000,
        runtime=30,
    conda:
        ENV
    shell:
        "{params.descbench} match --results-root {params.results_root} --scene-root {params.scene_root} "
        "--batches @{input.batch_spec:q} --batch {wildcards.batch} --keypoint-set {wildcards.kpset} "
        "--descriptor {wildcards.descriptor} --matcher {wildcards.matcher} --spec @{input.spec:q} {params.features} "
        "--pairs {params.pairs} > {log} 2>&1"
