"""`flopwatch store import/export`: a SQLite history moved into PostgreSQL and back keeps every
row; copying again copies only what is new."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pipeline import cli
from pipeline.history.regressions import Regression, RegressionStore
from pipeline.store import Store
from pipeline.store import tables as t
from workers.core.records import BuildResult, Result


def _result(variant: str, shape: str, median: float, **extra) -> Result:
    return Result(variant=variant, op="gemm", backend="cpp", shape=shape, dtype="fp32", device="cpu:x86", status="ok",
                  median_s=median, samples_s=(median, median * 1.02), flops=2e9, build_hash=f"{variant}-h",
                  counters={"l1_hit_pct": 40.0}, resources={"kernels": {"k": {"vgprs": 64}}}, **extra)


def _history(path) -> None:
    with Store(path) as store:
        for i, sha in enumerate(("c1", "c2")):
            store.record_commit(sha, f"change {i} <b>", "Ada <ada@x>", f"2026-01-0{i + 1}T00:00:00+00:00", [])
            run = store.start_run(sha, False, "nightly", "/repo", "node-a", "nightly")
            store.record_build(BuildResult(variant="v", build_hash="v-h", ok=True, toolchain="g++", seconds=1.5))
            store.record_result(run, sha, False, _result("v", "M=1", 1e-3 * (1 + i), phases={"timing_s": 1.0}))
            store.record_result(run, sha, False, _result("w", "M=1", 2e-3))
            store.finish_run(run, {"devices": [{"slot": "cpu/0", "busy_s": 3.0}]})
        RegressionStore(store).record(Regression("v", "M=1", "fp32", "cpu:x86", "c1", "c2", change=-0.5,
                                                 rate_before=2e12, rate_after=1e12, p_value=0.001))
        (stored,) = RegressionStore(store).all()
        RegressionStore(store).set_culprit(stored.id, "c2", {"message": "adjacent commits"})


def _content(url) -> dict:
    """Every row of every table but the meta, without the ids a copy renumbers (a result's run
    is named by its start time instead)."""
    with Store(url) as store, store.reading() as conn:
        started = dict(conn.execute(sa.select(t.runs.c.id, t.runs.c.started_at)).all())

        def rows(table, drop=("id",), order=None):
            names = [c for c in table.c if c.name not in drop]
            query = sa.select(*names).order_by(*(order or [table.c[k] for k in ("id",) if k in table.c] or names))
            return [tuple(r) for r in conn.execute(query)]

        results = [(started.get(r[0]), *r[1:]) for r in rows(t.results, drop=("id",))]
        return {"commits": rows(t.commits, drop=(), order=[t.commits.c.sha]),
                "builds": rows(t.builds, drop=("created_at",), order=[t.builds.c.build_hash]),
                "runs": rows(t.runs), "results": results, "regressions": rows(t.regressions)}


def test_sqlite_history_goes_into_postgresql_and_back_unchanged(tmp_path, postgresql_url, capsys):
    source = tmp_path / "results.db"
    _history(source)
    assert cli.main(["store", "import", str(source), "--store", postgresql_url]) == 0
    assert "imported 4 results, 2 runs, 2 commits, 1 builds, 1 regressions" in capsys.readouterr().out
    back = tmp_path / "back.db"
    assert cli.main(["store", "export", str(back), "--store", postgresql_url]) == 0
    assert "exported 4 results, 2 runs, 2 commits, 1 builds, 1 regressions" in capsys.readouterr().out
    original = _content(source)
    assert len(original["results"]) == 4 and original["results"][0][0] is not None
    assert _content(postgresql_url) == original
    assert _content(back) == original
    with Store(postgresql_url) as moved:
        (regression,) = RegressionStore(moved).all()
        assert regression.culprit_sha == "c2" and regression.bisect == {"message": "adjacent commits"}
        assert moved.run_summary("c2") == {"devices": [{"slot": "cpu/0", "busy_s": 3.0}]}


def test_copying_again_copies_only_what_is_new(tmp_path, postgresql_url, capsys):
    source = tmp_path / "results.db"
    _history(source)
    with Store(source) as store:  # a run still in progress when the history is first copied
        open_run = store.start_run("c2", False, "bisect", "/repo", "node-b", "bisect")
        store.record_result(open_run, "c2", False, _result("x", "M=2", 5e-3))
    assert cli.main(["store", "import", str(source), "--store", postgresql_url]) == 0
    with Store(source) as store:
        store.record_result(open_run, "c2", False, _result("x", "M=3", 6e-3))
        store.finish_run(open_run, {"devices": []})
        store.record_commit("c3", "third", "Ada", "2026-01-03T00:00:00+00:00", ["c2"])
        run = store.start_run("c3", False, "nightly", "/repo", "node-a", "nightly")
        store.record_result(run, "c3", False, _result("v", "M=1", 1e-3))
        store.finish_run(run)
    capsys.readouterr()
    assert cli.main(["store", "import", str(source), "--store", postgresql_url]) == 0
    assert "imported 2 results, 1 runs, 1 commits, 0 builds, 0 regressions" in capsys.readouterr().out
    assert cli.main(["store", "import", str(source), "--store", postgresql_url]) == 0
    assert "imported 0 results, 0 runs, 0 commits" in capsys.readouterr().out
    assert _content(postgresql_url) == _content(source)


def test_a_store_is_not_copied_into_itself(tmp_path, capsys):
    source = tmp_path / "results.db"
    _history(source)
    assert cli.main(["store", "import", str(source), "--db", str(source)]) == 2
    assert "is the same store as" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["store", "import", "mysql://x/y"], ["store", "export", "sqlite://"]])
def test_unusable_urls_are_usage_errors(tmp_path, argv, capsys):
    assert cli.main([*argv, "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flopwatch: error: ") and ("not supported" in err or "in-memory" in err)
