"""A swept variant over a real git history, measured for real on a local Ray cluster: every
point is a series of its own. A point that crashes or fails to build costs only itself; a
commit that slows one point's code path is reported on that point alone by compare, and
bisect on that point names the commit; `--points best` times one point per variant."""

from __future__ import annotations

import json

import pytest
from suite_repo import init_repo

from pipeline import cli
from pipeline.store import Store

# Every test here runs on one local Ray cluster (`ray_cluster`, tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_cluster")]

# BS is the row block; MODE picks a code path. MODE=2 is broken on purpose: at BS=16 it writes
# through a null pointer when run, at BS=32 it does not compile. SLOW_PATH is planted later.
KERNEL = """// C[M,N] = A[M,K] · B[N,K]^T, fp32, rows in blocks of BS.
#if MODE == 2 && BS == 32
#error "MODE 2 needs BS <= 16"
#endif
extern "C" void gemm_swept(const float* A, const float* B, float* C, int M, int N, int K) {
    int reps = 1;
#if SLOW_PATH
    if (BS == 32 && MODE == 1) reps = 4;
#endif
#if MODE == 2
    C = nullptr;
#endif
    for (int rep = 0; rep < reps; ++rep)
    for (int i0 = 0; i0 < M; i0 += BS)
        for (int j = 0; j < N; ++j)
            for (int i = i0; i < i0 + BS && i < M; ++i) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
                C[(long)i * N + j] = MODE == 1 ? acc * 1.0f : acc;
            }
}
"""

MANIFEST = """name = "swept"
op = "gemm"
backend = "cpp"
sources = ["gemm_swept.cpp"]
dtypes = ["fp32"]
shapes = [[192, 192, 192]]

[binding]
kind = "c"
entry = "gemm_swept"

[build]
flags = ["-O2"]

[params]
BS = [16, 32]
MODE = [0, 1, 2]
"""

BUDGET = "0.3"
PLANTED = 2  # from this commit on, the BS=32, MODE=1 path does its work four times


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = tmp_path_factory.mktemp("swept")
    repo = init_repo(root)
    (root / ".gitignore").write_text(".flopwatch/\n")
    (root / "flopwatch.toml").write_text('kernels = ["kernels"]\n')
    folder = root / "kernels" / "gemm" / "swept"
    folder.mkdir(parents=True)
    (folder / "variant.toml").write_text(MANIFEST)
    shas = []
    for i in range(4):
        (folder / "gemm_swept.cpp").write_text(KERNEL.replace("SLOW_PATH", "1" if i >= PLANTED else "0"))
        (root / "NOTES.md").write_text(f"note {i}\n")
        repo.index.add([".gitignore", "flopwatch.toml", "NOTES.md", str(folder / "variant.toml"),
                        str(folder / "gemm_swept.cpp")])
        shas.append(repo.index.commit("Repeat the BS=32 MODE=1 path" if i == PLANTED else f"Notes {i}").hexsha)
    return root, shas


def _cli(capsys, *argv) -> tuple[int, dict]:
    code = cli.main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def _statuses(rows: list[dict]) -> dict[str, str]:
    return {r["variant"]: r["status"] for r in rows if not r.get("peer")}


def test_every_point_is_a_series_and_fails_alone(history, capsys, tmp_path):
    root, shas = history
    code, out = _cli(capsys, "run", shas[0], "--repo", str(root), "--db", str(tmp_path / "r.db"),
                     "--budget", BUDGET, "--no-report", "--json")
    statuses = _statuses(out["results"])
    assert statuses == {"swept[BS=16,MODE=0]": "ok", "swept[BS=16,MODE=1]": "ok", "swept[BS=16,MODE=2]": "crashed",
                        "swept[BS=32,MODE=0]": "ok", "swept[BS=32,MODE=1]": "ok",
                        "swept[BS=32,MODE=2]": "build_failed"}, statuses
    failed = next(r for r in out["results"] if r["variant"] == "swept[BS=32,MODE=2]")
    assert "MODE 2 needs BS <= 16" in failed["diagnostic"]


def test_compare_reports_the_one_slowed_point(history, capsys, tmp_path):
    root, shas = history
    code, out = _cli(capsys, "compare", shas[1], shas[PLANTED], "--repo", str(root),
                     "--db", str(tmp_path / "c.db"), "--budget", BUDGET, "--no-report", "--json")
    verdicts = {r["variant"]: r["kind"] for r in out["rows"] if r["variant"].startswith("swept[")}
    print(verdicts)
    slower = sorted(v for v, verdict in verdicts.items() if verdict == "slower")
    assert slower == ["swept[BS=32,MODE=1]"], verdicts
    assert code == 1


def test_bisect_one_point_names_the_commit(history, capsys, tmp_path):
    root, shas = history
    code, report = _cli(capsys, "bisect", "--good", shas[0], "--bad", shas[-1], "--variant", "swept[MODE=1,BS=32]",
                        "--repo", str(root), "--db", str(tmp_path / "b.db"), "--budget", BUDGET, "--no-report",
                        "--json")
    assert report["outcome"]["first_bad"] == shas[PLANTED], report["outcome"]["message"]
    assert report["culprit"]["subject"] == "Repeat the BS=32 MODE=1 path"
    assert code == 1


def test_points_best_times_one_point_of_a_measured_variant(history, capsys, tmp_path):
    root, shas = history
    db = str(tmp_path / "p.db")
    _cli(capsys, "run", shas[0], "--repo", str(root), "--db", db, "--budget", BUDGET, "--no-report", "--json")
    code, out = _cli(capsys, "run", shas[1], "--repo", str(root), "--db", db, "--budget", BUDGET, "--no-report",
                     "--json", "--points", "best")
    timed = sorted(_statuses(out["results"]))
    assert len(timed) == 1 and timed[0] in {"swept[BS=16,MODE=0]", "swept[BS=16,MODE=1]", "swept[BS=32,MODE=0]",
                                            "swept[BS=32,MODE=1]"}, timed


def test_bisect_refuses_a_selector_of_several_points_before_timing(history, capsys, tmp_path):
    root, shas = history
    code = cli.main(["bisect", "--good", shas[0], "--bad", shas[-1], "--variant", "swept[BS=32]", "--repo", str(root),
                     "--db", str(tmp_path / "b.db"), "--no-report", "--json"])
    err = capsys.readouterr().err
    assert code == 2 and "selects 3 points" in err and "--variant 'swept[BS=32,MODE=0]'" in err, err


def test_a_selector_that_selects_nothing_is_an_error_naming_near_names_and_stores_no_run(history, capsys, tmp_path):
    root, shas = history
    db = tmp_path / "r.db"
    for selector, near in (("swept[MODE=7]", "swept"), ("swepd", "swept")):
        code = cli.main(["run", shas[0], "--repo", str(root), "--db", str(db), "--no-report", "--json",
                         "--variant", selector])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"--variant {selector!r} selects no variant" in err and f"near names: {near}" in err, err
    # A --shape none of the selected variants has: the same error, with the shapes they have.
    code = cli.main(["run", shas[0], "--repo", str(root), "--db", str(db), "--no-report", "--json",
                     "--variant", "swept", "--shape", "7x7x7"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--shape '7×7×7' selects no job at {shas[0][:10]}; shapes of the selected variants: " in err, err
    if db.exists():
        with Store(db) as store:
            assert store.runs() == [], "a run that selected nothing was stored"
