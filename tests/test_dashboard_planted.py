"""The dashboard on a synthetic nightly history (benchmarks/synthetic_history.py, smaller than
the benchmark's year so that it runs in seconds): `flopwatch detect` then `flopwatch report`
through the CLI, and the site read back as a reader sees it.

Done when: the two planted regressions are the first two entries on the dashboard, each with
its commit range; their trend pages mark the step at the right commit; no other series is
flagged; no page or figure shows a float with more than 4 significant digits."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from site_text import figures, page_text, site_problems

from pipeline import cli

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("synthetic_history", ROOT / "benchmarks" / "synthetic_history.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    planted = _generator().write_history(out, commits=120, variants=12, shapes=3, seed=3)
    repo = planted["repo"]
    assert cli.main(["detect", "--repo", repo, "--threshold", "3%", "--json", "--no-report"]) == 0
    assert cli.main(["report", "--repo", repo, "--branch", "main"]) == 0
    return Path(repo) / ".flopwatch" / "site", planted


def _entries(index: str) -> list[str]:
    return re.findall(r'<div class="regression">(.*?)</div>\s*</div>', index, re.DOTALL)


def test_planted_regressions_lead_the_dashboard_with_their_commit_range(site):
    path, planted = site
    index = (path / "index.html").read_text()
    entries = _entries(index)
    assert len(entries) == 2, [page_text(e)[:200] for e in entries]
    # Larger slowdown first: the 8% one, then the 4% one.
    for entry, plant in zip(entries, sorted(planted["plants"], key=lambda p: p["change"])):
        text = " ".join(page_text(entry).split())
        shown = float(re.search(r"([+-]\d+\.\d)%", text).group(1))
        assert text.startswith(plant["variant"]) and abs(shown - 100 * plant["change"]) < 1.0, text
        assert plant["good_sha"][:10] in text and plant["bad_sha"][:10] in text, text
        assert "1 commit in the range" in text
    # Regressions come before failing variants and the matrix.
    assert index.index("Open regressions") < index.index("Failing variants") < index.index("Latest throughput")


def test_no_other_series_is_flagged(site):
    path, planted = site
    feed = json.loads((path / "regressions.json").read_text())
    got = sorted((r["variant"], r["shape"], r["good_sha"], r["bad_sha"]) for r in feed["regressions"])
    want = sorted((p["variant"], p["shape"], p["good_sha"], p["bad_sha"]) for p in planted["plants"])
    assert got == want


def test_trend_pages_mark_the_step_at_the_planted_commit(site):
    path, planted = site
    table = json.loads((path / "assets" / "commits.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    position = {row[0]: i for i, row in enumerate(table)}
    assert [row[0] for row in table] == planted["shas"]  # the x axis is the first-parent line
    for plant in planted["plants"]:
        index = (path / "index.html").read_text()
        link = re.search(rf'<a href="(trend-{re.escape(plant["variant"])}-[^"]+)">', index).group(1)
        page = (path / link).read_text()
        assert plant["shape"].split(",")[0].replace("=", "_") in link
        [fig] = figures(page)
        marks = [s["x0"] for s in fig["layout"]["shapes"]]
        assert marks == [position[plant["bad_sha"]] - 0.5]
        [label] = [a["text"] for a in fig["layout"]["annotations"]]
        assert label.endswith(f"% at {plant['bad_sha'][:8]}") and label.startswith("-"), label
        assert "fwPlot(" in page and "assets/commits.js" in page


def test_quiet_series_have_no_marks(site):
    path, planted = site
    planted_pages = {p["variant"] for p in planted["plants"]}
    pages = [p for p in path.glob("trend-*.html") if not any(p.name.startswith(f"trend-{v}-") for v in planted_pages)]
    assert len(pages) >= 20
    for page in pages:
        for fig in figures(page.read_text()):
            assert fig["layout"]["shapes"] == [], page.name


def test_no_float_longer_than_four_significant_digits_anywhere(site):
    path, _ = site
    assert len(list(path.glob("*.html"))) > 30
    assert site_problems(path) == {}


def test_numbers_read_as_kernel_developers_name_them(site):
    path, _ = site
    commit_pages = sorted(path.glob("commit-*.html"), key=lambda p: -len(p.read_text()))
    text = " ".join(page_text(commit_pages[0].read_text()).split())
    for shown in ("vL1D hit", "coalescing 75%", "VGPR 128", "LDS allocated 64 KiB", "waves/CU 8.0", "MFMA "):
        assert shown in text, shown
    assert re.search(r"MFMA \d+(\.\d)? [kMG]", text), "MFMA counts with a unit prefix"
    assert "l1_hit_pct=" not in text and "lds_bytes=" not in text
    # The legend gives flopwatch's name and the formula's source.
    assert "counters.l1_hit_pct" in text and "TCP_TOTAL_CACHE_ACCESSES_sum" in text
