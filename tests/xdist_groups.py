"""The suite in parallel: which tests run on one pytest-xdist worker, one after another.

scripts/test.sh runs the suite with `-n <workers> --dist loadgroup`: a test marked
`xdist_group(name)` runs on the worker that runs every other test of that name, in collection
order; an unmarked test runs on whichever worker is free. This plugin marks the tests that share
something a second worker must not make again or touch at the same time:

- every test of a file where any test uses a module- or class-scoped fixture of the suite (a
  local Ray cluster, a measured repository, a built site): the fixture is made once, and the
  file's tests keep the order they were written in (some check the Ray the fixture leaves up, or
  that none is up before it);
- every test of a package with a package-scoped fixture (tests/hostile: the run's token marks
  every process its tests start, and its last test checks that none of them is left);
- every test that uses a session-scoped fixture of the suite that is made once and shared
  (`built_variants`, every CUDA variant built with nvcc), except the ones in PER_WORKER: cheap,
  or private to the worker that makes them (each worker starts its own PostgreSQL server for
  its store tests, on a free port of its own, the first time one asks).

Tests that share any of these share one group (a module with a module fixture and a test that
uses a shared session fixture join into one). Run serially for debugging with `-n 0` or
`-p no:xdist`; the marks are then inert.
"""

from __future__ import annotations

import os

import pytest

# Session-scoped fixtures a worker may make for itself: what they cost is small and nothing
# they make is seen by another worker.
PER_WORKER = {
    "repo_root",  # a path
    "cuda_tools",  # which CUDA tools are on PATH
    "build_variant",  # a function that builds one variant into a folder of its own per call
    "pg_server",  # a private PostgreSQL server on a free port (tests/pg_server.py), ~3 s to start
}


def _own_fixtures(item: pytest.Item):
    """(name, scope, where it is defined) of every fixture of the suite's own the test uses."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    for name in item.fixturenames:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixturedef = defs[-1]
        if fixturedef.baseid.split("/", 1)[0] != "tests":  # pytest's and plugins' own
            continue
        yield name, fixturedef.scope, fixturedef.baseid


def resources(item: pytest.Item) -> set[str]:
    """What the test shares with other tests (names of resources, not of groups)."""
    found = set()
    for name, scope, baseid in _own_fixtures(item):
        if scope in ("module", "class"):
            found.add(f"file:{_file(item)}")
        elif scope == "package":
            found.add(f"package:{baseid}")
        elif scope == "session" and name not in PER_WORKER:
            found.add(f"fixture:{name}")
    return found


def groups(items: list[pytest.Item]) -> dict[str, str]:
    """nodeid -> group name for every test that must share a worker; the others are absent."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def join(a: str, b: str) -> None:
        parent[root(a)] = root(b)

    used = {item.nodeid: resources(item) for item in items}
    # A module or class fixture groups its whole file.
    files = {key for keys in used.values() for key in keys if key.startswith("file:")}
    packages = {key.split(":", 1)[1] for keys in used.values() for key in keys if key.startswith("package:")}
    for item in items:
        keys = used[item.nodeid]
        if f"file:{_file(item)}" in files:
            keys.add(f"file:{_file(item)}")
        keys.update(f"package:{p}" for p in packages if item.nodeid.startswith(p + "/"))
        keys = sorted(keys)
        for other in keys[1:]:
            join(keys[0], other)
    names: dict[str, str] = {}
    out = {}
    for item in items:
        keys = used[item.nodeid]
        if not keys:
            continue
        top = root(min(keys))
        # A readable name, the same on every worker: a file or fixture of the group.
        names.setdefault(top, min(keys).split(":", 1)[1])
        out[item.nodeid] = names[top]
    return out


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(True for _ in item.iter_markers("xdist_group")):
            raise pytest.UsageError(f"{item.nodeid}: its xdist group comes from tests/xdist_groups.py, "
                                    "not from a mark of its own (one test must not belong to two groups)")
    assigned = groups(items)
    for item in items:
        if item.nodeid in assigned:
            item.add_marker(pytest.mark.xdist_group(assigned[item.nodeid]))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers:  # on an xdist worker; a serial run keeps pytest's own order and limits
        items[:] = heaviest_first(items, assigned)
        stretch_timeouts(config, items, workers / (os.cpu_count() or 1))


# The longest groups and files, longest first: started first, so that none of them is the tail
# of a parallel run. (Seconds of their tests' setup, call and teardown together, 4 workers on the
# 2-core machine, 2026-12-06.) Order only: a file missing here, or a figure gone stale, costs
# wall time, never a result.
HEAVIEST = (
    "tests/hostile",  # 750 s (its network-namespace clusters wait on cut links and lost heads)
    "tests/test_ecosystem.py",  # 570 s (four torch extension builds)
    "tests/test_sweep_bundled.py",  # 380 s (24 nvcc and gfx942 compiles)
    "tests/test_suite_static_report.py",  # 300 s
    "tests/test_ray_token_cluster.py",  # 195 s
    "tests/test_unchanged.py",  # 195 s
    "tests/test_torch_library.py",  # 190 s
    "tests/test_planted_history.py",  # 140 s
    "tests/test_sweep_history.py",  # 130 s
    "tests/test_nightly_store.py",  # 110 s
    "tests/rocm/test_torch_ext_gfx942.py",  # 90 s
    "tests/test_site_browser.py",  # 90 s
    "tests/test_kill_resume.py",  # 85 s
    "tests/test_ops.py",  # 100 s
)


def heaviest_first(items: list[pytest.Item], assigned: dict[str, str]) -> list[pytest.Item]:
    """The items in the order xdist should hand them out (`--no-loadscope-reorder`): the
    HEAVIEST groups and files first, in that order; then the other groups, most tests first (as
    xdist's own reordering does); then the tests of no group, as collected. A group's own tests
    keep their order."""
    def heavy(name: str) -> int | None:
        return HEAVIEST.index(name) if name in HEAVIEST else None

    members: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.nodeid in assigned:
            members.setdefault(assigned[item.nodeid], []).append(item)
    group_rank = {}
    for name, its in members.items():
        ranks = [r for r in [heavy(name)] + [heavy(_file(i)) for i in its] if r is not None]
        group_rank[name] = (0, min(ranks), 0) if ranks else (1, 0, -len(its))

    def rank(item: pytest.Item) -> tuple:
        name = assigned.get(item.nodeid)
        if name is not None:
            return group_rank[name]
        r = heavy(_file(item))
        return (0, r, 0) if r is not None else (2, 0, 0)

    return sorted(items, key=rank)  # stable: collection order within a rank, so within a group


def stretch_timeouts(config, items: list[pytest.Item], stretch: float) -> None:
    """Each test's time limit (pytest-timeout: its mark, else the configured default) times
    `stretch`, the workers per core: a limit is sized for a test that has the machine to itself,
    and beside other workers a test that computes gets its share of the cores, no more."""
    if stretch <= 1:
        return
    default = getattr(config, "_env_timeout", None)
    for item in items:
        mark = item.get_closest_marker("timeout")
        limit = (mark.args[0] if mark and mark.args else mark.kwargs.get("timeout") if mark else default)
        if limit:
            kwargs = {k: v for k, v in (mark.kwargs.items() if mark else ()) if k != "timeout"}
            item.add_marker(pytest.mark.timeout(float(limit) * stretch, **kwargs), append=False)


def pytest_configure(config):
    dist = getattr(config.option, "dist", "no")
    if not hasattr(config, "workerinput") and getattr(config.option, "tx", None):
        if dist != "loadgroup":
            raise pytest.UsageError(f"the suite runs in parallel only with `--dist loadgroup` (got --dist {dist}): "
                                    "tests that share a Ray cluster, a fixture or a package's run must share a "
                                    "worker (tests/xdist_groups.py); scripts/test.sh passes it")
        config.option.loadscopereorder = False  # the workers order the items (`heaviest_first`)
