"""What keeps a fork's code off the nightly's machines, secrets and caches, as far as the
repository's own files can say it (docs/ci.md, "What isolates what"):

- no workflow a fork's PR can start from its own copy (`pull_request` and kin) names a
  self-hosted runner, in every file under .github/workflows, including files added later;
- the nightly's secrets reach only jobs bound to the environment `nightly` (which only the
  default branch may use), and no PR-triggered workflow uses it;
- the PR benchmark's store and build cache are made for the run (under the ephemeral runner's
  temp folder), never a setting shared between runs;
- what `flopwatch doctor --github` checks on GitHub is what these files need: the workflows that
  use each self-hosted label, the environment and its secrets.

The settings that stop a fork's *own* copy of a workflow are GitHub's, not files: doctor checks
them (tests/test_doctor_github.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.ci import repo_settings

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
# Events whose workflow file comes from the PR's merge commit: a fork edits what they run.
FORK_COPY_EVENTS = {"pull_request", "pull_request_review", "pull_request_review_comment", "merge_group"}
NIGHTLY_SECRETS = ("secrets.RAY_ADDRESS", "secrets.RAY_AUTH_TOKEN", "secrets.FLOPWATCH_STORE")


def _workflow_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".yml", ".yaml"))


def _triggers(workflow: dict) -> set[str]:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    if isinstance(on, str):
        return {on}
    return set(on or ())


def _self_hosted_labels() -> set[str]:
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    return {"self-hosted", *config["self-hosted-runner"]["labels"]}


def fork_reachable_self_hosted(folder: Path) -> list[str]:
    """Jobs of fork-copy workflows whose `runs-on` is not a plain GitHub-hosted label."""
    found = []
    labels = _self_hosted_labels()
    for path in _workflow_files(folder):
        workflow = yaml.safe_load(path.read_text())
        if not _triggers(workflow) & FORK_COPY_EVENTS:
            continue
        for name, job in workflow.get("jobs", {}).items():
            runs_on = job.get("runs-on", "")
            names = runs_on if isinstance(runs_on, list) else [runs_on]
            text = " ".join(str(n) for n in names)
            # An expression or a runner group may resolve to anything: only literal hosted labels pass.
            if isinstance(runs_on, dict) or "${{" in text or any(n in labels for n in names) or not names:
                found.append(f"{path.name}:{name}")
    return found


def test_no_pull_request_workflow_names_a_self_hosted_runner():
    assert {p.name for p in _workflow_files(WORKFLOWS)} >= {"ci.yml", "pr-bench.yml"}
    assert fork_reachable_self_hosted(WORKFLOWS) == []


def test_the_check_finds_a_fork_copy_workflow_on_self_hosted_runners(tmp_path):
    job = "jobs:\n  x:\n    runs-on: {}\n    steps:\n      - run: make\n"
    (tmp_path / "ok.yml").write_text("on: [push, pull_request]\n" + job.format("ubuntu-latest"))
    (tmp_path / "labels.yml").write_text("on: [pull_request]\n" + job.format("[self-hosted, gpu-pool]"))
    (tmp_path / "added-later.yaml").write_text("on:\n  pull_request_review:\n" + job.format("gpu-pr"))
    (tmp_path / "expr.yml").write_text("on: pull_request\n" + job.format("${{ matrix.runner }}"))
    (tmp_path / "group.yml").write_text("on: pull_request\n" + job.format("{group: gpus}"))
    (tmp_path / "trusted.yml").write_text("on: [schedule]\n" + job.format("[self-hosted, gpu-pool]"))
    assert fork_reachable_self_hosted(tmp_path) == ["added-later.yaml:x", "expr.yml:x", "group.yml:x",
                                                    "labels.yml:x"]


def _jobs(folder: Path = WORKFLOWS):
    for path in _workflow_files(folder):
        workflow = yaml.safe_load(path.read_text())
        for name, job in workflow.get("jobs", {}).items():
            yield path.name, name, job, _triggers(workflow)


def _environment(job: dict) -> str | None:
    env = job.get("environment")
    return env.get("name") if isinstance(env, dict) else env


def test_nightly_secrets_reach_only_jobs_of_the_nightly_environment():
    holders = {(f, n) for f, n, job, _ in _jobs() if any(s in str(job) for s in NIGHTLY_SECRETS)}
    assert holders == {("nightly.yml", "bench"), ("bisect.yml", "bisect")}
    for f, n, job, _ in _jobs():
        if (f, n) in holders:
            assert _environment(job) == repo_settings.NIGHTLY_ENVIRONMENT, (f, n)


def test_no_pr_triggered_job_uses_the_nightly_environment_or_its_runners():
    pr_events = FORK_COPY_EVENTS | {"pull_request_target", "issue_comment"}
    for f, n, job, events in _jobs():
        if events & pr_events:
            assert _environment(job) != repo_settings.NIGHTLY_ENVIRONMENT, (f, n)
            assert "gpu-pool" not in str(job.get("runs-on")), (f, n)
            assert not any(s in str(job) for s in NIGHTLY_SECRETS), (f, n)


def test_pr_store_and_cache_are_made_for_the_run():
    """A store or cache that outlives the run lets one PR plant builds or results that the next
    PR's run loads (review 8b): the PR benchmark's live under the ephemeral runner's temp folder."""
    jobs = yaml.safe_load((WORKFLOWS / "pr-bench.yml").read_text())["jobs"]
    (step,) = [s for s in jobs["bench"]["steps"] if "flopwatch compare" in s.get("run", "")]
    assert step["env"]["FLOPWATCH_STORE"] == "sqlite:///${{ runner.temp }}/flopwatch-run/results.db"
    assert step["env"]["FLOPWATCH_CACHE"] == "${{ runner.temp }}/flopwatch-run/cache"
    for path in _workflow_files(WORKFLOWS):
        assert "FLOPWATCH_PR_" not in path.read_text(), path.name  # no shared PR store or cache setting


def test_doctor_checks_the_runner_groups_these_workflows_need():
    """doctor --github requires each self-hosted label's runner group to allow exactly the
    workflows (at the default branch) that name the label: the same list as these files."""
    used: dict[str, set[str]] = {}
    for f, _n, job, _ in _jobs():
        runs_on = job.get("runs-on")
        for label in runs_on if isinstance(runs_on, list) else [runs_on]:
            if label in _self_hosted_labels() - {"self-hosted"}:
                used.setdefault(label, set()).add(f)
    assert {label: set(files) for label, files in repo_settings.RUNNER_LABELS.items()} == used
    assert set(repo_settings.NIGHTLY_SECRETS) == {s.removeprefix("secrets.") for s in NIGHTLY_SECRETS}


def test_the_docs_do_not_call_stripping_secrets_from_job_children_a_boundary():
    """Review note (Low): job children start without the tokens, but they run as the same user
    and can read the driver's /proc/<pid>/environ; the docs must say so wherever they mention it."""
    for path in (ROOT / "docs" / "ci.md", ROOT / "workers" / "job" / "runner.py"):
        text = " ".join(path.read_text().split())
        assert "child_env" in text or "SECRET_VARIABLES" in text, path
        assert "not a boundary" in text and "/proc/<" in text, path
    text = " ".join((ROOT / "docs" / "ci.md").read_text().split())
    assert "they cannot leak" not in text and "never see, they cannot" not in text
