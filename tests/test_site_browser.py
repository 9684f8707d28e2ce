"""The report site opened in headless Chromium: every page type loads without console errors
and its plots render. Skipped where Chromium is not installed (Debian package `chromium`)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from pipeline.history import bisect as bis
from pipeline.history import compare as cmp
from pipeline.history.regressions import Regression, RegressionStore
from pipeline.store import Store
from reports.history_pages import write_bisect_page, write_compare_page
from reports.site import write_site
from workers.records import Result

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
FLOPS = 2 * 256**3


def open_page(path, profile) -> tuple[str, str]:
    """(DOM after scripts ran, browser log) of one page."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", path.as_uri()]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=90)
    return done.stdout, done.stderr


def console_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if "Uncaught" in line or "ERROR:CONSOLE" in line
            or ("CONSOLE" in line and "Error" in line)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    shas = [f"{i:040x}" for i in range(8)]
    with Store(root / "results.db") as store:
        for i, sha in enumerate(shas):
            store.record_commit(sha, f"<b>commit</b> {i} & \"quotes\"", "A <a@x>", f"2025-02-{i + 1:02d}", [])
            run = store.start_run(sha, False, "run", "", "", "run")
            seconds = 1e-3 if i < 5 else 1.4e-3
            samples = tuple(seconds * (1 + 0.01 * np.random.default_rng(i).standard_normal(30)))
            store.record_result(run, sha, False, Result(
                variant="cpp_blocked", op="gemm", backend="cpp", shape="M=256,N=256,K=256", dtype="fp32",
                device="cpu:x", status="ok", median_s=float(np.median(samples)), ci_low_s=min(samples),
                ci_high_s=max(samples), samples_s=samples, flops=FLOPS,
                resources={"kernels": {"k": {"vgprs": 64 if i < 5 else 96, "lds_bytes": 32768}}},
                counters={"l1_hit_pct": 60.0 + i}))
            store.record_result(run, sha, False, Result(
                variant="broken</script>", op="gemm", backend="cpp", shape="M=256,N=256,K=256", dtype="fp32",
                device="cpu:x", status="build_failed" if i == 7 else "ok", diagnostic="error: expected ';'",
                median_s=1e-3, ci_low_s=1e-3, ci_high_s=1e-3, samples_s=(1e-3,) * 10, flops=FLOPS))
        table = RegressionStore(store)
        r, _ = table.record(Regression("cpp_blocked", "M=256,N=256,K=256", "fp32", "cpu:x", shas[4], shas[5],
                                       -0.29, 3.3e10, 2.4e10, 0.005))
        table.set_culprit(r.id, shas[5], {"evaluations": 0})
        write_site(store, root / "site", order=shas)
        rows = [store.latest_results(s) for s in (shas[4], shas[5])]
    compare = cmp.compare_sides(cmp.pool(rows[0]), cmp.pool(rows[1]), 0.03)
    write_compare_page(root / "site", cmp.Report(shas[4], "base <i>", shas[5], "head", 0.03, 3, tuple(compare)))
    outcome = bis.Outcome(True, shas[5], shas[4], (shas[5],),
                          (bis.Probe(shas[3], bis.GOOD, 1, 1e-3, "same as good"),
                           bis.Probe(shas[5], bis.BAD, 1, 1.4e-3, "slower"),
                           bis.Probe(shas[4], bis.SKIP, 1, None, "skipped: build_failed")), 5, 5, None, "found")
    culprit = bis.Culprit(shas[5], "slow <down>", "A <a@x>", "2025", " k.cpp | 2 +-", (cmp.Moved("vgprs", "64", "96"),))
    write_bisect_page(root / "site", bis.Report("cpp_blocked", "M=256,N=256,K=256", 0.05,
                                                tuple((s, f"c{i}") for i, s in enumerate(shas)), outcome, culprit))
    return root / "site"


PAGES = {"index.html": False, "dashboard.html": False, "regressions.html": False,
         "commit-*.html": False, "trend-cpp_blocked*.html": True, "compare-*.html": False, "bisect-*.html": True}


@pytest.mark.parametrize("pattern", list(PAGES))
def test_page_loads_without_console_errors(site, pattern, tmp_path):
    page = min(site.glob(pattern))
    dom, log = open_page(page, tmp_path / "profile")
    assert "<table" in dom or "<h1" in dom, log[-2000:]
    assert console_errors(log) == [], console_errors(log)
    if PAGES[pattern]:
        assert 'class="main-svg"' in dom, f"plotly did not draw on {page.name}"
    assert "<script>alert" not in dom and "broken</script>" not in dom.split("<body", 1)[-1].replace(
        "broken&lt;/script&gt;", "")


def test_a_broken_page_is_caught(tmp_path):
    # The check above must be able to fail: a script error has to show up in the log.
    page = tmp_path / "bad.html"
    page.write_text("<html><body><h1>x</h1><script>notAFunction();</script></body></html>")
    _, log = open_page(page, tmp_path / "profile")
    assert console_errors(log), log[-2000:]
