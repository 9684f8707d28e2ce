"""`flopwatch nightly` end to end over a real git history: two CPU GEMM variants, one commit that
slows both (each does its work three times from then on), and nights that were not measured, so the
step lies in an unresolved range. The nightly measures the head, detects both steps in the same
range, bisects that range once, records the culprit on both regressions and publishes one
dashboard entry for the culprit commit. Everything is measured for real on a local Ray cluster."""

from __future__ import annotations

import json

import pytest
from site_text import page_text
from suite_repo import init_repo, measure_commits
from test_planted_history import KERNEL, MANIFEST

from pipeline import cli
from pipeline.fleet import cluster
from pipeline.history.regressions import RegressionStore
from pipeline.store import Store

# Every test here runs on one local Ray cluster (`ray_cluster`, tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]

CONFIG = 'kernels = ["kernels"]\n\n[shape_sets]\nsmall = [[256, 256, 256]]\n'
N_COMMITS = 14
CULPRIT = 7                                 # from this commit on both kernels do their work 3 times
MEASURED = (0, 1, 2, 3, 4, 5, 9, 10, 11, 12)  # nightlies that ran; 6..8 did not (a broken runner)
VARIANTS = ("cpp_blocked", "cpp_blocked_b")


def _kernel(i: int, entry: str) -> str:
    # 3x the time: far beyond what a loaded 2-core runner does to CPU timings.
    return KERNEL.replace("REPS", "3" if i >= CULPRIT else "1").replace("gemm_blocked(", f"{entry}(")


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = tmp_path_factory.mktemp("nightly")
    repo = init_repo(root, "Nightly Tester", "nightly@example.com")
    (root / ".gitignore").write_text(".flopwatch/\n")
    (root / "flopwatch.toml").write_text(CONFIG)
    files = [".gitignore", "flopwatch.toml", "README.md"]
    for name in VARIANTS:
        folder = root / "kernels" / "gemm" / name
        folder.mkdir(parents=True)
        (folder / "variant.toml").write_text(MANIFEST.replace('"cpp_blocked"', f'"{name}"')
                                             .replace('entry = "gemm_blocked"', f'entry = "{name}_gemm"'))
        files += [str(folder / "variant.toml"), str(folder / "gemm_blocked.cpp")]
    shas = []
    for i in range(N_COMMITS):
        for name in VARIANTS:
            (root / "kernels" / "gemm" / name / "gemm_blocked.cpp").write_text(_kernel(i, f"{name}_gemm"))
        (root / "README.md").write_text(f"# nightly history\n\nnote {i}\n")
        repo.index.add(files)
        shas.append(repo.index.commit("Repeat the product in both kernels" if i == CULPRIT else f"Notes {i}").hexsha)
    return root, shas


def test_nightly_bisects_the_range_once_and_names_the_culprit_of_both_series(history, capsys):
    root, shas = history
    # the nightlies that ran: `flopwatch run SHA --budget 0.3` of each, in one session
    measure_commits(root, [shas[i] for i in MEASURED], root / ".flopwatch" / "results.db", 0.3)
    capsys.readouterr()
    assert cli.main(["nightly", "--repo", str(root), "--budget", "0.3", "--no-peer-check"]) == 0
    out = capsys.readouterr().out
    assert "1 commit range(s) to resolve" in out, out
    assert "the same culprit recorded for the 1 other series" in out, out
    with Store(root / ".flopwatch" / "results.db") as store:
        stored = RegressionStore(store).all()
    assert sorted(r.variant for r in stored) == sorted(VARIANTS)
    assert {(r.good_sha, r.bad_sha) for r in stored} == {(shas[5], shas[9])}
    assert {r.culprit_sha for r in stored} == {shas[CULPRIT]}
    bisected = {r.bisect["bisected_on"]["variant"] for r in stored}
    assert len(bisected) == 1 and all(r.bisect["series_in_range"] == 2 for r in stored)  # one search for both
    site = root / ".flopwatch" / "site"
    index = (site / "index.html").read_text()
    assert index.count('<div class="regression">') == 1
    entry = " ".join(page_text(index.split('<div class="regression">')[1].split("</table>")[0]).split())
    assert entry.startswith(f"Commit {shas[CULPRIT][:10]} Repeat the product in both kernels"), entry
    assert "Culprit named by bisecting" in entry and "slowed 2 series" in entry
    assert all(v in entry for v in VARIANTS)
    feed = json.loads((site / "regressions.json").read_text())
    assert {r["culprit_subject"] for r in feed["regressions"]} == {"Repeat the product in both kernels"}
