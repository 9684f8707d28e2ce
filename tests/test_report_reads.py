"""The report after a run reads one row per series of the commit's page and counts samples
without decoding them: the same answers as reading and decoding every re-run's rows; and `run`
prepares the report while its jobs run."""

from __future__ import annotations

import random
import shutil
import threading

import pytest
from suite_repo import commit_blocked_gemm, init_repo

from pipeline import cli
from pipeline.commands import publish
from pipeline.history import series
from pipeline.store import Store
from pipeline.store import tables as t
from workers.core.records import Result

SHA, OTHER = "a" * 40, "b" * 40


def _result(variant: str, shape: str, device: str, rng: random.Random, status: str = "ok") -> Result:
    n = rng.randint(1, 40)
    samples = tuple(1e-3 * (1 + 0.01 * rng.random()) for _ in range(n)) if status == "ok" else ()
    return Result(variant=variant, op="gemm", backend="cuda", shape=shape, dtype="fp32", device=device,
                  status=status, median_s=1e-3 if samples else None, ci_low_s=0.9e-3 if samples else None,
                  ci_high_s=1.1e-3 if samples else None, samples_s=samples, flops=2e9,
                  diagnostic="" if samples else "broke", correctness={"tiles": [[rng.random()] * 4] * 4})


def _store(tmp_path) -> Store:
    """Three runs of one commit (series in a different order each time, one series only in the
    second run, one failing in the last) and one run of another commit."""
    rng = random.Random(5)
    store = Store(tmp_path / "r.db")
    for sha in (SHA, OTHER):
        store.record_commit(sha, "s", "a <a@b>", "2026-01-01T00:00:00+00:00", [])
    keys = [(v, s, d) for v in ("x", "y") for s in ("M=1", "M=2") for d in ("cuda:A", "cuda:B")]
    for run in range(3):
        run_id = store.start_run(SHA, False, "run", "/r", "h", "run")
        rng.shuffle(keys)
        for v, s, d in keys + ([("z", "M=1", "cuda:A")] if run == 1 else []):
            store.record_result(run_id, SHA, False, _result(v, s, d, rng, "crashed" if run == 2 and v == "y" else "ok"))
        store.finish_run(run_id, {})
    run_id = store.start_run(OTHER, False, "run", "/r", "h", "run")
    store.record_result(run_id, OTHER, False, _result("x", "M=1", "cuda:A", rng))
    return store


def _latest_by_reading_every_row(store: Store, sha: str) -> list[dict]:
    latest: dict[tuple, dict] = {}
    for row in store.results(commit_sha=sha):
        latest[tuple(row[k] for k in t.SERIES_KEY)] = row
    return list(latest.values())


def test_latest_results_are_the_newest_row_per_series_in_first_appearance_order(tmp_path):
    store = _store(tmp_path)
    got = store.latest_results(SHA)
    assert got == _latest_by_reading_every_row(store, SHA)
    assert len(got) == 9 and {r["variant"] for r in got} == {"x", "y", "z"}
    assert all(r["status"] == ("crashed" if r["variant"] == "y" else "ok") for r in got)  # the newest run's
    assert [r["commit_sha"] for r in store.latest_results(OTHER)] == [OTHER]
    assert store.latest_results("c" * 40) == []


def test_sample_counts_equal_the_decoded_samples(tmp_path):
    store = _store(tmp_path)
    counts = store.sample_counts(SHA)
    decoded = {r["id"]: len(r["samples"]) for r in store.results(("id", "samples"), commit_sha=SHA)}
    assert counts == decoded and len(counts) == 8 * 3 + 1
    assert 0 in counts.values() and max(counts.values()) > 1  # failing rows have none


def test_history_of_reruns_pools_their_samples_and_counts_them(tmp_path):
    store = _store(tmp_path)
    hist = series.scan(store)
    x = next(s for s in hist.series if s.key == ("x", "M=1", "fp32", "cuda:A"))
    [point] = [p for p in x.points if p.sha == SHA]
    ok_rows = [r for r in store.results(("variant", "shape", "device", "samples"), commit_sha=SHA)
               if (r["variant"], r["shape"], r["device"]) == ("x", "M=1", "cuda:A")]
    assert point.n_samples == sum(len(r["samples"]) for r in ok_rows)


def test_prepare_compiles_every_template_of_the_site():
    from reports.templates_env import ENV

    publish.prepare()
    names = ENV.list_templates()
    cached = {key[1] for key in ENV.cache}
    assert names and set(names) <= cached


@pytest.mark.slow
@pytest.mark.parametrize("report", [True, False])
def test_run_prepares_its_report_in_another_thread_while_its_jobs_run(ray_cluster, tmp_path, monkeypatch, capsys,
                                                                     report):
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the kernel")
    root = tmp_path / "kernels-repo"
    repo = init_repo(root)
    sha = commit_blocked_gemm(root, repo)
    events = []
    prepare, write_site = publish.prepare, publish.write_site

    def prepared():
        # The jobs are handed out by then and their results not all in.
        events.append(("prepare", threading.current_thread() is threading.main_thread()))
        prepare()

    def written(store, site, *a, **kw):
        events.append(("write", len(store.results(("id",)))))
        return write_site(store, site, *a, **kw)

    monkeypatch.setattr(publish, "prepare", prepared)
    monkeypatch.setattr(publish, "write_site", written)
    args = ["run", sha, "--repo", str(root), "--cache", str(tmp_path / "cache"), "--budget", "0.3", "--json",
            "--variant", "cpp_blocked", "--store", f"sqlite:///{tmp_path / 'r.db'}",
            "--site", str(tmp_path / "site"), *([] if report else ["--no-report"])]
    assert cli.main(args) == 0
    capsys.readouterr()
    if report:
        assert events[0] == ("prepare", False) and events[1][0] == "write" and events[1][1] > 0
        assert len(events) == 2 and (tmp_path / "site" / "index.html").exists()
    else:
        assert events == []
