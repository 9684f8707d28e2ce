"""`flopwatch nightly` as the nightly workflow runs it on a self-hosted runner: the store and
the build cache where repository settings say, outside the workspace that actions/checkout
cleans before every job.

- Two nightlies with the workspace wiped between them (`git clean -ffdx`, as checkout's
  `clean: true` does) show a trend of two commits, on SQLite outside the workspace and on a
  PostgreSQL server.
- End to end: history measured for real, the nightly measures the head, detects the planted
  slowdown, bisects its range, records the culprit and publishes the site.
- Without a store setting, the nightly refuses to start rather than lose its history.

Everything is measured for real on a local Ray cluster (one per module)."""

from __future__ import annotations

import json
import re

import git
import pytest
import yaml
from suite_repo import init_repo, measure_commits
from test_planted_history import KERNEL, MANIFEST

from pipeline import cli
from pipeline.history import series
from pipeline.history.regressions import RegressionStore
from pipeline.run.summary import exit_code
from pipeline.store import Store

BUDGET = "0.3"
CONFIG = 'kernels = ["kernels"]\n\n[shape_sets]\nsmall = [[256, 256, 256]]\n'
NIGHTLY = __import__("pathlib").Path(__file__).resolve().parents[1] / ".github" / "workflows" / "nightly.yml"


def _commit(repo: git.Repo, root, reps: int, note: str, subject: str) -> str:
    folder = root / "kernels" / "gemm" / "cpp_blocked"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "variant.toml").write_text(MANIFEST)
    (folder / "gemm_blocked.cpp").write_text(KERNEL.replace("REPS", str(reps)))
    (root / "flopwatch.toml").write_text(CONFIG)
    (root / ".gitignore").write_text(".flopwatch/\n")
    (root / "README.md").write_text(f"# kernels\n\n{note}\n")
    repo.index.add([".gitignore", "flopwatch.toml", "README.md", "kernels/gemm/cpp_blocked/variant.toml",
                    "kernels/gemm/cpp_blocked/gemm_blocked.cpp"])
    return repo.index.commit(subject).hexsha


def _upstream(root) -> git.Repo:
    return init_repo(root, "Night Owl", "owl@example.com")


def _checkout(upstream_root, workspace) -> None:
    """What actions/checkout does to a self-hosted runner's workspace: clean it (ignored files
    too, so a `.flopwatch/` inside would go), fetch, and check out the new head."""
    if not workspace.exists():
        git.Repo.clone_from(str(upstream_root), str(workspace))
        return
    ws = git.Repo(workspace)
    ws.git.clean("-ffdx")
    ws.git.reset("--hard")
    ws.git.fetch("origin")
    ws.git.checkout("--force", "origin/main")


def _workflow_env(settings: dict[str, str]) -> dict[str, str]:
    """The nightly step's `env:` as the runner expands it from repository settings: a secret or
    variable that is not set expands to an empty string."""
    workflow = yaml.safe_load(NIGHTLY.read_text())
    (step,) = [s for s in workflow["jobs"]["bench"]["steps"] if "flopwatch nightly" in s.get("run", "")]
    expand = re.compile(r"\$\{\{\s*((?:secrets|vars)\.\w+)\s*\}\}")
    return {name: expand.sub(lambda m: settings.get(m.group(1), ""), value) for name, value in step["env"].items()}


def _as_the_runner(monkeypatch, tmp_path, workspace, settings) -> dict[str, str]:
    """The runner's environment for the nightly step: the store and cache settings as the
    workflow passes them (the cluster settings stay out: the tests' own local Ray measures)."""
    env = _workflow_env(settings)
    for name, value in env.items():
        if name.startswith("FLOPWATCH_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(workspace))
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path / "runner" / "_temp"))
    return env


def _nightly(env, workspace, capsys, *extra) -> str:
    code = cli.main(["nightly", "--repo", str(workspace), "--budget", BUDGET, *extra])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    return out.out


def test_nightly_refuses_a_store_that_the_next_checkout_wipes(tmp_path, monkeypatch, capsys):
    upstream = _upstream(tmp_path / "upstream")
    _commit(upstream, tmp_path / "upstream", 1, "first", "First kernel")
    workspace = tmp_path / "runner" / "_work" / "kernels"
    _checkout(tmp_path / "upstream", workspace)
    env = _as_the_runner(monkeypatch, tmp_path, workspace, settings={})  # no FLOPWATCH_STORE secret
    assert env["FLOPWATCH_STORE"] == ""
    code = cli.main(["nightly", "--repo", str(workspace)])
    err = capsys.readouterr().err
    assert code == 2
    assert "no store is configured" in err and f"$GITHUB_WORKSPACE ({workspace})" in err
    assert "Set the repository secret FLOPWATCH_STORE" in err
    monkeypatch.setenv("FLOPWATCH_STORE", f"sqlite:///{tmp_path / 'runner' / '_temp' / 'results.db'}")
    assert cli.main(["nightly", "--repo", str(workspace)]) == 2
    assert "is inside $RUNNER_TEMP" in capsys.readouterr().err
    assert not (workspace / ".flopwatch").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_two_nightlies_with_the_workspace_wiped_show_a_two_commit_trend(kind, ray_cluster, tmp_path, monkeypatch,
                                                                         capsys, request):
    outside = tmp_path / "runner" / "flopwatch"  # the runner's own disk, outside any workspace
    url = (f"sqlite:///{outside / 'results.db'}" if kind == "sqlite" else request.getfixturevalue("postgresql_url"))
    settings = {"secrets.FLOPWATCH_STORE": url, "vars.FLOPWATCH_CACHE": str(outside / "cache")}
    upstream_root, workspace = tmp_path / "upstream", tmp_path / "runner" / "_work" / "kernels"
    upstream = _upstream(upstream_root)
    first = _commit(upstream, upstream_root, 1, "night one", "Blocked GEMM")
    _checkout(upstream_root, workspace)
    env = _as_the_runner(monkeypatch, tmp_path, workspace, settings)
    assert "measured" in _nightly(env, workspace, capsys)
    built = _build_times(url)
    assert built, "the first night stored no build: the comparison below would hold for nothing"

    second = _commit(upstream, upstream_root, 1, "night two: notes only", "Document the kernel")
    _checkout(upstream_root, workspace)
    assert not (workspace / ".flopwatch").exists(), "the checkout must wipe what the first nightly left"
    out = _nightly(env, workspace, capsys)
    assert f"measured {second[:10]} Document the kernel" in out, out

    with Store(url) as store:
        assert {c["sha"] for c in store.commits_with_results()} == {first, second}
        trends = series.load(store, [first, second])
    blocked = [s for s in trends if s.variant == "cpp_blocked"]
    assert blocked and all([p.sha for p in s.measured] == [first, second] for s in blocked)
    page = (workspace / ".flopwatch" / "site" / f"trend-{blocked[0].slug}.html").read_text()
    assert first[:8] in page and second[:8] in page
    # the second night's build came from the cache outside the workspace: nothing was rebuilt
    assert _build_times(url) == built and list((outside / "cache" / "builds").iterdir())


def _build_times(url) -> dict:
    with Store(url) as store:
        return {b: store.build(b)["created_at"] for b in {r["build_hash"] for r in store.results()} if store.build(b)}


N_COMMITS = 12
PLANTED = 7                       # from this commit on the kernel does its work four times
SLOWER = 4  # far beyond the noise of a loaded 2-core runner (medians there wander by ±50%)
MEASURED_BEFORE = (0, 1, 2, 3, 4, 8, 9, 10)  # earlier nightlies; the head (11) is measured by this one


@pytest.mark.slow
def test_nightly_end_to_end_detects_bisects_records_the_culprit_and_publishes(ray_cluster, tmp_path, monkeypatch,
                                                                              capsys):
    outside = tmp_path / "runner" / "flopwatch"
    url = f"sqlite:///{outside / 'results.db'}"
    upstream_root, workspace = tmp_path / "upstream", tmp_path / "runner" / "_work" / "kernels"
    upstream = _upstream(upstream_root)
    shas = [_commit(upstream, upstream_root, SLOWER if i >= PLANTED else 1, f"revision {i}",
                    "Repeat the product for accuracy" if i == PLANTED else f"Update notes {i}")
            for i in range(N_COMMITS)]
    # the nightlies of earlier nights (commits 5..7 were never measured), in one session
    outcomes = measure_commits(upstream_root, [shas[i] for i in MEASURED_BEFORE], url, float(BUDGET),
                               cache=outside / "cache")
    assert all(exit_code([r.to_dict() for r in o.results]) == 0 for o in outcomes)  # as each `run` would exit
    capsys.readouterr()
    _checkout(upstream_root, workspace)
    env = _as_the_runner(monkeypatch, tmp_path, workspace,
                         {"secrets.FLOPWATCH_STORE": url, "vars.FLOPWATCH_CACHE": str(outside / "cache")})

    out = _nightly(env, workspace, capsys)

    with Store(url) as store:
        times = [{p.sha: p.median_s for s in series.load(store, shas) for p in s.measured}.get(x) for x in shas]
        assert "1 regression(s) in history, 1 new" in out, (out, times)
        (regression,) = RegressionStore(store).all()
        assert (regression.good_sha, regression.bad_sha) == (shas[4], shas[8]), \
            (shas.index(regression.good_sha), shas.index(regression.bad_sha), times)
        assert regression.culprit_sha == shas[PLANTED], regression.bisect
        assert regression.change < -0.5
        assert shas[-1] in {c["sha"] for c in store.commits_with_results()}  # the head, measured tonight
    site = workspace / ".flopwatch" / "site"
    feed = json.loads((site / "regressions.json").read_text())
    (item,) = feed["regressions"]
    assert item["culprit_sha"] == shas[PLANTED] and item["culprit_subject"] == "Repeat the product for accuracy"
    assert shas[PLANTED][:8] in (site / "index.html").read_text()
    assert list(site.glob("bisect-*.html")), "the bisection's page is published"
    assert not (workspace / ".flopwatch" / "results.db").exists(), "the store lives outside the workspace"
