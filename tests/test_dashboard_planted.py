"""The dashboard on a synthetic nightly history (benchmarks/synthetic_history.py, smaller than
the benchmark's year so that it runs in seconds): `flopwatch detect` then `flopwatch report`
through the CLI, and the site read back as a reader sees it.

Done when: the two planted culprit commits are the two regression entries on the dashboard, each
named as the culprit (its range holds that one commit) with the series it slowed, worst first,
each linked to its trend; those trend pages mark the step at the right commit; no other series
is flagged; no page or figure shows a float with more than 4 significant digits."""

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
    return re.findall(r'<div class="regression">(.*?)</table>\s*</div>', index, re.DOTALL)


def test_one_entry_per_culprit_commit_with_its_series_worst_first(site):
    path, planted = site
    index = (path / "index.html").read_text()
    entries = _entries(index)
    assert len(planted["plants"]) == 2 and len(planted["steps"]) == 5  # 2 culprit commits slowed 5 series
    assert len(entries) == 2, [page_text(e)[:200] for e in entries]
    assert "Open regressions (2)" in page_text(index) and "5 series slowed" in page_text(index)
    # The cause with the larger slowdown first.
    plants = sorted(planted["plants"], key=lambda p: min(s["change"] for s in p["steps"]))
    for entry, plant in zip(entries, plants):
        text = " ".join(page_text(entry).split())
        assert text.startswith(f"Commit {plant['sha'][:10]} {plant['subject']}"), text
        assert "the only commit between the last good measurement" in text and plant["good_sha"][:10] in text
        assert "Not bisected yet" not in text
        assert f"slowed {len(plant['steps'])} series" in text
        # Its series, worst first, each with its step and a link to its trend page.
        rows = re.findall(r"<tr><td>(.*?)</tr>", entry, re.DOTALL)
        worst_first = sorted(plant["steps"], key=lambda s: s["change"])
        assert len(rows) == len(worst_first)
        for row, step in zip(rows, worst_first):
            row_text = " ".join(page_text(row).split())
            link = re.search(r'<a href="(trend-[^"]+)">', row).group(1)
            assert (path / link).exists() and row_text.startswith(step["variant"]), row_text
            assert step["shape"].split(",")[-1].split("=")[1] in row_text
            shown = float(re.search(r"([+-]\d+\.\d)%", row_text).group(1))
            assert abs(shown - 100 * step["change"]) < 1.0, row_text
    # Regressions come before failing variants and the matrix.
    assert index.index("Open regressions") < index.index("Failing variants") < index.index("Latest throughput")


def test_no_other_series_is_flagged(site):
    path, planted = site
    feed = json.loads((path / "regressions.json").read_text())
    got = sorted((r["variant"], r["shape"], r["good_sha"], r["bad_sha"]) for r in feed["regressions"])
    want = sorted((p["variant"], p["shape"], p["good_sha"], p["bad_sha"]) for p in planted["steps"])
    assert got == want


def test_trend_pages_mark_the_step_at_the_planted_commit(site):
    path, planted = site
    table = json.loads((path / "assets" / "commits.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    position = {row[0]: i for i, row in enumerate(table)}
    assert [row[0] for row in table] == planted["shas"]  # the x axis is the first-parent line
    index = (path / "index.html").read_text()
    for step in planted["steps"]:
        shape = step["shape"].split(",")[0].replace("=", "_")
        link = re.search(rf'<a href="(trend-{re.escape(step["variant"])}-{shape}[^"]+)">', index).group(1)
        page = (path / link).read_text()
        [fig] = figures(page)
        marks = [s["x0"] for s in fig["layout"]["shapes"]]
        assert marks == [position[step["bad_sha"]] - 0.5]
        [label] = [a["text"] for a in fig["layout"]["annotations"]]
        assert label.endswith(f"% at {step['bad_sha'][:8]}") and label.startswith("-"), label
        assert "fwPlot(" in page and "assets/commits.js" in page


def test_quiet_series_have_no_marks(site):
    path, planted = site
    planted_pages = {p["variant"] for p in planted["steps"]}
    pages = [p for p in path.glob("trend-*.html") if not any(p.name.startswith(f"trend-{v}-") for v in planted_pages)]
    assert len(pages) >= 20
    for page in pages:
        found = figures(page.read_text())
        assert found, f"{page.name}: no figure parsed (a quiet page would pass the check below unseen)"
        for fig in found:
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


@pytest.mark.slow
def test_the_synthetic_year_shows_one_entry_per_culprit_commit(tmp_path):
    """The full year of benchmarks/synthetic_history.py (365 commits × 100 series): 2 culprit
    commits slowed 5 series; the dashboard has 2 entries, not 5."""
    planted = _generator().write_history(tmp_path)
    assert cli.main(["detect", "--repo", planted["repo"], "--threshold", "3%", "--json"]) == 0
    index = (Path(planted["repo"]) / ".flopwatch" / "site" / "index.html").read_text()
    entries = _entries(index)
    assert len(planted["plants"]) == len(entries) == 2 and len(planted["steps"]) == 5
    for entry, plant in zip(entries, sorted(planted["plants"], key=lambda p: min(s["change"] for s in p["steps"]))):
        text = " ".join(page_text(entry).split())
        assert text.startswith(f"Commit {plant['sha'][:10]} {plant['subject']}") and \
            f"slowed {len(plant['steps'])} series" in text, text
