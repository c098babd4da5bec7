# Dataset stage: the offline demo (generated per scene) or HPatches (downloaded once), and with
# `resize` each scene's resized copy, which every later stage reads.

if CFG["dataset"] == "demo":

    rule demo_scene:
        output:
            # an HPatches-shaped scene (descbench.datasets.hpatches)
            [str(p) for p in scene_files(SOURCE / "{scene}", check_exists=False, n_images=N_IMAGES).all_paths()],
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            out_dir=lambda wc, output: str(Path(output[0]).parent.parent),
            seed=CFG["demo"]["seed"],
        log:
            str(RES / "logs" / "demo_scene" / "{scene}.log"),
        threads: 1
        resources:
            # six 640 px images, seconds
            mem_mb=500,
            runtime=5,
        conda:
            ENV
        shell:
            "{params.descbench} demo-scene --scene {wildcards.scene} --out-dir {params.out_dir} --seed {params.seed} > {log} 2>&1"


if CFG["dataset"] == "hpatches":

    # Compute nodes of a cluster often have no internet access: download on the submit host.
    localrules:
        hpatches_download,

    # One flag output (not 1,276 files): written after all 116 scenes are validated.
    rule hpatches_download:
        output:
            HPATCHES_FLAG,
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            urls=" ".join(CFG["hpatches"]["urls"]),
            sha256=f"--sha256 {CFG['hpatches']['sha256']}" if CFG["hpatches"]["sha256"] else "",
            data_dir=CFG["data_dir"],
        log:
            str(RES / "logs" / "hpatches_download.log"),
        threads: 1
        resources:
            # runs on the submit host (localrules): a 4 GB download
            mem_mb=1000,
            runtime=60,
        conda:
            ENV
        shell:
            "{params.descbench} hpatches --urls {params.urls} {params.sha256} --data-dir {params.data_dir} "
            "--flag {output} 2>&1 | tee {log}"


if CFG.get("resize"):

    # One flag output per scene folder (resized.json, written last): the copy's file names follow
    # the source's, which a folder dataset only knows once it is listed. A posed folder evaluated in
    # parts (<folder>@000, ...) is resized once, whole.
    rule resize_scene:
        input:
            lambda wc: resize_inputs(wc.scene),
        output:
            str(DATA / "{scene}" / RESIZED_FLAG),
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            source=lambda wc: str(SOURCE / wc.scene),
            out=lambda wc: str(DATA / wc.scene),
            size=CFG["resize"]["size"],
            side=CFG["resize"]["side"],
        log:
            str(RES / "logs" / "resize_scene" / "{scene}.log"),
        threads: 1
        resources:
            # a few float32 copies of one image at a time: ~0.3 GB for HPatches' largest
            mem_mb=1000,
            runtime=5,
        conda:
            ENV
        shell:
            "{params.descbench} resize-scene --source {params.source:q} --out {params.out:q} --size {params.size} "
            "--side {params.side} > {log} 2>&1"


if CFG["dataset"] == "posed_demo":

    rule posed_demo_scene:
        output:
            # a posed scene (descbench.datasets.posed_demo: images, views.txt, pairs.txt)
            [str(p) for p in posed_demo_scene_paths(SOURCE / "{scene}")],
        params:
            descbench=DESCBENCH,  # how the job starts descbench (common.smk)
            out_dir=lambda wc: str(SOURCE),
            seed=CFG["posed_demo"]["seed"],
        log:
            str(RES / "logs" / "posed_demo_scene" / "{scene}.log"),
        threads: 1
        resources:
            # five 640 x 480 renders, seconds
            mem_mb=500,
            runtime=5,
        conda:
            ENV
        shell:
            "{params.descbench} posed-demo-scene --scene {wildcards.scene} --out-dir {params.out_dir:q} --seed {params.seed} > {log} 2>&1"
