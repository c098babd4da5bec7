"""descbench.jobs.datasets: the ``demo-scene`` and ``hpatches`` commands."""

from __future__ import annotations


from descbench import cli
from descbench.datasets.demo import generate_scene


def test_demo_scene_writes_the_scene_generate_scene_writes(tmp_path):
    assert cli.main(["demo-scene", "--scene", "v_coins", "--out-dir", str(tmp_path / "cli"), "--seed", "3"]) == 0
    generate_scene("v_coins", tmp_path / "direct", 3)
    got = sorted(p.relative_to(tmp_path / "cli") for p in (tmp_path / "cli").rglob("*") if p.is_file())
    want = sorted(p.relative_to(tmp_path / "direct") for p in (tmp_path / "direct").rglob("*") if p.is_file())
    assert got == want and len(got) > 6
    assert all((tmp_path / "cli" / p).read_bytes() == (tmp_path / "direct" / p).read_bytes() for p in got)


def test_hpatches_passes_its_options_to_obtain(tmp_path, monkeypatch):
    import descbench.datasets.hpatches as hp

    calls = []
    monkeypatch.setattr(hp, "obtain", lambda *a: calls.append(a))
    assert cli.main(["hpatches", "--urls", "u1", "u2", "--sha256", "ab", "--data-dir", str(tmp_path), "--flag", str(tmp_path / "f")]) == 0
    assert calls == [(["u1", "u2"], "ab", tmp_path, tmp_path / "f")]
