"""The PR benchmark's gate (pipeline/ci/pr_gate.py) run as the `gate` job runs it —
`python3 -m pipeline.ci.pr_gate` with the event payload in $GITHUB_EVENT_PATH and the PR read
from a recorded GitHub API on loopback — for every kind of event: approval binds one commit
(review finding 1b), a retargeted PR does not run (review note 3), and the outputs carry only
SHAs that are 40 hex digits."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from github_recording import FIXTURES, TOKEN, RecordedGitHub, recording

import pipeline.ci.pr_gate as gate

ROOT = Path(__file__).resolve().parents[1]
HEAD = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
BASE = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"
OTHER = "e5bd3914e2e596debea16f433f57875b5b90bcd6"


def _event(name: str) -> dict:
    return json.loads((FIXTURES / f"event_{name}.json").read_text())


def _run_gate(tmp_path, event_name: str, event: dict, pr_answers: dict | None = None):
    """The gate's step as the runner executes it; returns (exit code, outputs, stdout+stderr, API paths)."""
    (tmp_path / "event.json").write_text(json.dumps(event))
    out = tmp_path / "output"
    out.write_text("")
    answers = recording("pull_17.json") if pr_answers is None else pr_answers
    with RecordedGitHub(answers) as server:
        env = {"PATH": "/usr/bin:/bin", "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
               "GITHUB_OUTPUT": str(out), "GITHUB_REPOSITORY": "octo-org/kernels", "GITHUB_TOKEN": TOKEN,
               "GITHUB_API_URL": server.url, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
        # Only the standard library: the gate job runs it from a bare checkout, nothing installed.
        done = subprocess.run([sys.executable, "-S", "-m", "pipeline.ci.pr_gate"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=False)
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return done.returncode, outputs, done.stdout + done.stderr, server.paths()


def _pr_target(action: str, fork: bool, base_ref: str = "main") -> dict:
    event = _event("pull_request_target")
    event["action"] = action
    if not fork:
        event["pull_request"]["head"]["repo"] = copy.deepcopy(event["repository"])
    event["pull_request"]["base"]["ref"] = base_ref
    return event


@pytest.mark.parametrize(("action", "fork", "runs"), [
    ("opened", False, True),
    ("synchronize", False, True),
    ("reopened", False, True),
    ("opened", True, False),
    ("synchronize", True, False),  # a fork's push never runs by itself
    ("reopened", True, False),
    ("edited", False, False),
])
def test_pull_request_events_run_only_same_repository_heads(tmp_path, action, fork, runs):
    code, outputs, text, asked = _run_gate(tmp_path, "pull_request_target", _pr_target(action, fork))
    assert code == 0, text
    assert outputs == {"run": "true" if runs else "false", "head_sha": HEAD, "base_sha": BASE, "number": "17"}
    assert asked == []  # the event says everything: no API call
    if fork:
        assert "a fork's PR runs only when a maintainer comments `/bench <head sha>`" in text


def _comment(body: str = f"/bench {HEAD}", association: str = "MEMBER") -> dict:
    event = _event("issue_comment")
    event["comment"]["body"] = body
    event["comment"]["author_association"] = association
    return event


def _pr_answers(head: str = HEAD, base_ref: str = "main", state: str = "open") -> dict:
    answers = recording("pull_17.json")
    pr = answers["/repos/octo-org/kernels/pulls/17"]["body"]
    pr["head"]["sha"], pr["base"]["ref"], pr["state"] = head, base_ref, state
    return answers


@pytest.mark.parametrize("association", ["OWNER", "MEMBER", "COLLABORATOR"])
def test_a_maintainers_bench_comment_runs_exactly_the_named_head(tmp_path, association):
    code, outputs, text, asked = _run_gate(tmp_path, "issue_comment", _comment(association=association))
    assert code == 0, text
    assert outputs == {"run": "true", "head_sha": HEAD, "base_sha": BASE, "number": "17"}
    assert asked == ["/repos/octo-org/kernels/collaborators/octo-maintainer/permission",
                     "/repos/octo-org/kernels/pulls/17"]
    assert f"approved by octo-maintainer: run at {HEAD}" in (tmp_path / "summary.md").read_text()


def test_a_head_pushed_before_the_approval_lands_waits_for_a_new_one(tmp_path):
    """The maintainer read HEAD; the author pushed OTHER just before the comment: nothing runs,
    and the gate names the commit that needs approval."""
    code, outputs, text, _ = _run_gate(tmp_path, "issue_comment", _comment(), _pr_answers(head=OTHER))
    assert code == 0, text
    assert outputs["run"] == "false"
    assert f"the approved commit {HEAD} is not the PR's head {OTHER}" in text
    assert f"comments `/bench {OTHER}`" in text


@pytest.mark.parametrize(("body", "association", "says"), [
    (f"/bench {HEAD}", "CONTRIBUTOR", "only OWNER, MEMBER, COLLABORATOR approve"),
    (f"/bench {HEAD}", "NONE", "only OWNER, MEMBER, COLLABORATOR approve"),
    (f"/bench {HEAD}", "FIRST_TIME_CONTRIBUTOR", "only OWNER, MEMBER, COLLABORATOR approve"),
    (f"/bench {HEAD[:12]}", "MEMBER", "name the full 40-hex SHA"),  # a short prefix can be ground to collide
    ("/bench", "MEMBER", "the comment is not `/bench <sha>`"),
    (f"/bench {HEAD} please", "MEMBER", "the comment is not `/bench <sha>`"),
    (f"looks good\n/bench {HEAD}", "MEMBER", "the comment is not `/bench <sha>`"),
])
def test_other_comments_run_nothing(tmp_path, body, association, says):
    code, outputs, text, asked = _run_gate(tmp_path, "issue_comment", _comment(body, association))
    assert code == 0, text
    assert outputs["run"] == "false" and outputs["head_sha"] == "", outputs
    assert says in text
    assert asked == []  # refused before the PR is read


@pytest.mark.parametrize(("permission", "says"), [
    ("read", "whose permission on the repository is 'read': only admin or write approve"),
    (None, "whose permission on the repository is 'none'"),  # 404: not a collaborator at all
])
def test_an_association_without_write_permission_is_not_an_approval(tmp_path, permission, says):
    """COLLABORATOR covers outside collaborators invited with read access, MEMBER every member of
    the organization: the gate asks the API for the commenter's permission on the repository."""
    answers = _pr_answers()
    path = "/repos/octo-org/kernels/collaborators/octo-maintainer/permission"
    if permission is None:
        del answers[path]
    else:
        answers[path]["body"]["permission"] = permission
    code, outputs, text, asked = _run_gate(tmp_path, "issue_comment", _comment(association="COLLABORATOR"), answers)
    assert code == 0 and outputs["run"] == "false", text
    assert says in text
    assert asked == [path]  # refused before the PR is read


def test_a_comment_on_an_issue_is_not_an_approval(tmp_path):
    event = _comment()
    del event["issue"]["pull_request"]
    code, outputs, text, asked = _run_gate(tmp_path, "issue_comment", event)
    assert code == 0 and outputs["run"] == "false" and "not a new comment on a pull request" in text
    assert asked == []


@pytest.mark.parametrize("kind", ["pull_request_target", "issue_comment"])
def test_a_pr_retargeted_off_the_default_branch_does_not_run(tmp_path, kind):
    """The driver and publisher come from the default branch; a PR into another branch is
    refused rather than measured against (or by) that branch."""
    if kind == "pull_request_target":
        code, outputs, text, _ = _run_gate(tmp_path, kind, _pr_target("synchronize", False, base_ref="release-1"))
    else:
        code, outputs, text, _ = _run_gate(tmp_path, kind, _comment(), _pr_answers(base_ref="release-1"))
    assert code == 0 and outputs["run"] == "false", text
    assert "the PR is into 'release-1', not the default branch 'main'" in text


def test_a_closed_pr_does_not_run(tmp_path):
    code, outputs, text, _ = _run_gate(tmp_path, "issue_comment", _comment(), _pr_answers(state="closed"))
    assert code == 0 and outputs["run"] == "false" and "not open" in text


def test_a_head_that_is_not_a_sha_stops_the_gate_before_any_output(tmp_path):
    event = _pr_target("opened", False)
    event["pull_request"]["head"]["sha"] = "$(touch pwned)"
    code, outputs, text, _ = _run_gate(tmp_path, "pull_request_target", event)
    assert code == 1 and outputs == {}
    assert "pr_gate: error: head.sha is not a 40-hex commit SHA: '$(touch pwned)'" in text
    assert not (ROOT / "pwned").exists() and not (tmp_path / "pwned").exists()


def test_other_events_run_nothing():
    decision = gate.decide("workflow_dispatch", {"repository": {"default_branch": "main"}}, lambda n: {})
    assert not decision.run and "does not run the benchmark" in decision.reason


def test_the_gate_reads_the_pr_with_the_workflow_token_and_api_url(tmp_path):
    """A refused token is an error of the gate (exit 1, said), not a silent `run=false`."""
    event = _comment()
    answers = _pr_answers()
    with RecordedGitHub(answers, token="ghs_another") as server:
        (tmp_path / "event.json").write_text(json.dumps(event))
        env = {"PATH": "/usr/bin:/bin", "GITHUB_EVENT_NAME": "issue_comment",
               "GITHUB_EVENT_PATH": str(tmp_path / "event.json"), "GITHUB_OUTPUT": str(tmp_path / "out"),
               "GITHUB_REPOSITORY": "octo-org/kernels", "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url}
        done = subprocess.run([sys.executable, "-S", "-m", "pipeline.ci.pr_gate"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "pr_gate: error: reading the pull request or the commenter's permission: GitHub API GET" in done.stderr
    assert "HTTP 401" in done.stderr
    assert not (tmp_path / "out").exists()
