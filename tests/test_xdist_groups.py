"""tests/xdist_groups.py: which tests share a pytest-xdist worker. Read from a collection of the
real suite, or of a small one of its own (no test runs): the tests of a file with a module
fixture share one group, those that do not use it too, the hostile package one group across
its files, the tests using the built CUDA variants one group across theirs, a file whose tests
share nothing none; a test marked with a group of its own is refused."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

SHOW = textwrap.dedent("""
    import json

    def pytest_collection_finish(session):
        groups = {}
        for item in session.items:
            mark = item.get_closest_marker("xdist_group")
            groups[item.nodeid] = mark.args[0] if mark else None
        print("GROUPS " + json.dumps(groups))
""")


def _groups(tmp_path: Path, *paths: str) -> dict[str, str | None]:
    (tmp_path / "show_groups.py").write_text(SHOW)
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "show_groups", *paths],
                          cwd=HERE.parent, capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{HERE.parent}:{HERE}"})
    line = next((x for x in done.stdout.splitlines() if x.startswith("GROUPS ")), None)
    assert line, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(line[len("GROUPS "):])


def test_a_module_fixture_groups_its_file_the_hostile_package_is_one_group_and_plain_tests_none(tmp_path):
    got = _groups(tmp_path, "tests/test_modes_compare.py", "tests/hostile/test_head_loss.py",
                  "tests/hostile/test_node_loss.py", "tests/test_progress_lines.py")
    modes = {g for n, g in got.items() if n.startswith("tests/test_modes_compare.py")}
    hostile = {g for n, g in got.items() if n.startswith("tests/hostile/")}
    plain = {g for n, g in got.items() if n.startswith("tests/test_progress_lines.py")}
    assert len(modes) == 1 and None not in modes, modes
    assert len(hostile) == 1 and None not in hostile and hostile != modes, hostile
    assert plain == {None}


def test_a_test_with_a_group_mark_of_its_own_is_refused(tmp_path):
    (tmp_path / "test_marked.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.xdist_group("mine")
        def test_x():
            pass
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "xdist_groups",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_marked.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{HERE.parent}:{HERE}"})
    assert done.returncode != 0
    assert "its xdist group comes from tests/xdist_groups.py" in done.stdout + done.stderr


def _groups_of(tmp_path: Path, files: dict[str, str]) -> dict[str, str | None]:
    """The groups of a small suite of its own: `files` (path under tests/ -> text) under
    tmp_path, collected with tests/xdist_groups.py as the suite's plugin."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "show_groups.py").write_text(SHOW)
    for rel, text in files.items():
        (tmp_path / "tests" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / rel).write_text(textwrap.dedent(text))
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "xdist_groups", "-p",
                           "show_groups", "--rootdir", str(tmp_path), "tests"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path / 'plugins'}:{HERE.parent}:{HERE}"})
    line = next((x for x in done.stdout.splitlines() if x.startswith("GROUPS ")), None)
    assert line, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(line[len("GROUPS "):])


def test_the_tests_of_a_file_that_do_not_use_its_module_fixture_share_the_group_of_those_that_do(tmp_path):
    got = _groups_of(tmp_path, {"test_partly.py": """
        import pytest

        @pytest.fixture(scope="module")
        def cluster():
            return "up"

        def test_before_the_cluster_none_is_up():
            pass

        def test_on_the_cluster(cluster):
            pass

        def test_after_the_cluster():
            pass
    """, "test_plain.py": """
        def test_alone():
            pass
    """})
    partly = {n.split("::")[1]: g for n, g in got.items() if n.startswith("tests/test_partly.py::")}
    assert partly["test_on_the_cluster"] is not None, got
    assert partly == dict.fromkeys(["test_before_the_cluster_none_is_up", "test_on_the_cluster",
                                    "test_after_the_cluster"], partly["test_on_the_cluster"]), got
    assert got["tests/test_plain.py::test_alone"] is None, got


def test_the_tests_of_two_files_using_the_built_cuda_variants_share_one_group(tmp_path):
    got = _groups(tmp_path, "tests/cuda/test_build_sm90.py", "tests/cuda/test_gpu_kernels.py")
    built = got["tests/cuda/test_build_sm90.py::test_every_cuda_variant_is_built"]
    assert built is not None, got
    assert got["tests/cuda/test_gpu_kernels.py::test_raw_gemm_through_the_shared_module_api"] == built, got
    # build_variant builds into a folder of its own per call: no group of its own
    assert got["tests/cuda/test_build_sm90.py::test_pybind_variant"] is None, got
