"""`flopwatch doctor --github OWNER/REPO` against a recorded GitHub API on loopback
(tests/github_recording.py; responses in tests/fixtures/github_api, shaped from GitHub's REST API
documentation, see its README): a correctly set repository passes line by line, a misconfigured
one gets each wrong setting named and exit 1, and a token that is missing, refused, or cannot see
the repository stops with one clear error (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from github_recording import TOKEN, RecordedGitHub, recording

from pipeline import cli

REPO = "octo-org/kernels"
CHECKS = ["fork PR approval", "runners gpu-pool", "runners gpu-pr", "runners other", "environment nightly",
          "nightly secrets", "pages source", "default branch"]


def _doctor(capsys, monkeypatch, server, *extra, token=TOKEN, env_name="GITHUB_TOKEN"):
    monkeypatch.delenv("GITHUB_API_URL", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    if token is not None:
        monkeypatch.setenv(env_name, token)
    code = cli.main(["doctor", "--github", REPO, "--api-url", server.url, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _lines(out: str) -> dict[str, str]:
    found = {}
    for line in out.splitlines():
        verdict, rest = line[:5], line[6:]
        what, _, detail = rest.partition(": ")
        found[what] = f"{verdict.strip()} {detail}"
    return found


def test_a_correctly_set_repository_passes(capsys, monkeypatch):
    with RecordedGitHub(recording("settings_correct.json")) as server:
        code, out, err = _doctor(capsys, monkeypatch, server)
    lines = _lines(out)
    assert list(lines) == CHECKS, out
    assert all(v.startswith("ok ") for v in lines.values()), out
    assert code == 0, out + err
    assert "'gpu-nightly' limited to nightly.yml, bisect.yml at main" in lines["runners gpu-pool"]
    # every endpoint docs/ci.md names was asked, with the token in the header only
    asked = set(server.paths())
    assert {f"/repos/{REPO}/actions/permissions/fork-pr-contributor-approval", "/orgs/octo-org/actions/runner-groups",
            f"/repos/{REPO}/environments", f"/repos/{REPO}/actions/secrets", f"/repos/{REPO}/pages"} <= asked
    assert all(h.get("x-github-api-version") == "2022-11-28" for _m, _p, h in server.requests)
    assert any("visible_to_repository=kernels" in p for _m, p, _h in server.requests)


def test_a_misconfigured_repository_gets_each_wrong_setting_named(capsys, monkeypatch):
    with RecordedGitHub(recording("settings_misconfigured.json")) as server:
        code, out, err = _doctor(capsys, monkeypatch, server)
    lines = _lines(out)
    assert code == 1, out + err
    assert list(lines) == CHECKS and all(v.startswith("WRONG ") for v in lines.values()), out
    assert "approval_policy first_time_contributors" in lines["fork PR approval"]
    assert "Require approval for all external contributors" in lines["fork PR approval"]
    assert "group 'Default' is not restricted to selected workflows" in lines["runners gpu-pool"]
    gpu_pr = lines["runners gpu-pr"]
    assert f"allows {REPO}/.github/workflows/ci.yml@refs/heads/main" in gpu_pr
    assert "gpu-pr-kept are not ephemeral" in gpu_pr and "gpu-pr-7f3a" not in gpu_pr
    assert "every branch may use it (deployment_branch_policy null)" in lines["environment nightly"]
    secrets = lines["nightly secrets"]
    assert "repository secret(s) RAY_AUTH_TOKEN, FLOPWATCH_STORE" in secrets
    assert "not in environment 'nightly': RAY_AUTH_TOKEN, FLOPWATCH_STORE" in secrets
    assert "GitHub Pages is not enabled (HTTP 404)" in lines["pages source"]
    assert "cpu-1 in group 'Default'" in lines["runners other"] and "gpu-h100" not in lines["runners other"]
    assert "force pushes allowed" in lines["default branch"] and "no approving review" in lines["default branch"]


def test_one_wrong_setting_fails_alone(capsys, monkeypatch):
    """Each check reads its own answer: flipping one recorded setting flips one line."""
    answers = recording("settings_correct.json")
    answers[f"/repos/{REPO}/pages"]["body"]["build_type"] = "legacy"
    answers[f"/repos/{REPO}/environments"]["body"]["environments"][1]["deployment_branch_policy"] = {
        "protected_branches": True, "custom_branch_policies": False}
    with RecordedGitHub(answers) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server, "--json")
    rows = {r["what"]: r for r in json.loads(out)}
    assert code == 1
    assert [w for w, r in rows.items() if not r["ok"]] == ["environment nightly", "pages source"]
    assert "every protected branch may use it" in rows["environment nightly"]["detail"]
    assert rows["pages source"]["detail"].startswith("build_type legacy")


def test_a_nightly_secret_shared_from_the_organization_is_named(capsys, monkeypatch):
    answers = recording("settings_correct.json")
    org = answers[f"/repos/{REPO}/actions/organization-secrets"]["body"]
    org["secrets"].append({"name": "RAY_AUTH_TOKEN", "created_at": "2026-11-19T09:12:00Z",
                           "updated_at": "2026-11-19T09:12:00Z"})
    org["total_count"] = len(org["secrets"])
    with RecordedGitHub(answers) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server)
    lines = _lines(out)
    assert code == 1 and [w for w, v in lines.items() if v.startswith("WRONG")] == ["nightly secrets"]
    assert "organization secret(s) RAY_AUTH_TOKEN: every workflow on every branch may read them" in \
        lines["nightly secrets"]


def test_a_setting_the_token_cannot_read_says_so(capsys, monkeypatch):
    answers = recording("settings_correct.json")
    del answers[f"/repos/{REPO}/actions/permissions/fork-pr-contributor-approval"]
    with RecordedGitHub(answers) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server)
    line = _lines(out)["fork PR approval"]
    assert code == 1
    assert line.startswith("WRONG GET /repos/octo-org/kernels/actions/permissions/fork-pr-contributor-approval: "
                           "HTTP 404 (not found: the setting is absent, or the token lacks the administration")


@pytest.mark.parametrize(("token", "repo", "message"), [
    (None, REPO, "--github needs a token in $GITHUB_TOKEN"),
    ("ghp_wrong", REPO, "GitHub refused the token (HTTP 401 on /repos/octo-org/kernels): Bad credentials"),
    (TOKEN, "octo-org/absent", ("repository octo-org/absent not found (HTTP 404): it does not exist, or the "
                                "token may not read it")),
])
def test_no_token_a_refused_token_and_a_missing_repository_stop_with_one_error(capsys, monkeypatch, token, repo,
                                                                                message):
    with RecordedGitHub(recording("settings_correct.json")) as server:
        monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        if token is not None:
            monkeypatch.setenv("GITHUB_TOKEN", token)
        code = cli.main(["doctor", "--github", repo, "--api-url", server.url])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"flopwatch: error: {message}") and len(err.strip().splitlines()) == 1, err


def test_the_program_takes_the_token_and_api_url_from_the_environment(tmp_path):
    """As a user runs it: the `flopwatch` entry point, a token in a variable of their choosing,
    the base URL from GITHUB_API_URL; the token never appears in the output."""
    with RecordedGitHub(recording("settings_correct.json")) as server:
        env = {"PATH": "/usr/bin:/bin", "GITHUB_API_URL": server.url, "CI_SETTINGS_TOKEN": TOKEN,
               "HOME": str(tmp_path)}
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", "doctor", "--github", REPO, "--token-env",
                               "CI_SETTINGS_TOKEN"], env=env, capture_output=True, text=True, timeout=120,
                              check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(done.stdout.splitlines()) == len(CHECKS) and TOKEN not in done.stdout + done.stderr


def _only_wrong(capsys, monkeypatch, answers) -> tuple[str, str]:
    """The single WRONG line of a run with exit 1 (what, detail); fails if any other line is WRONG."""
    with RecordedGitHub(answers) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server, "--json")
    rows = json.loads(out)
    wrong = [r for r in rows if not r["ok"]]
    assert [r["what"] for r in rows] == CHECKS and code == 1 and len(wrong) == 1, out
    return wrong[0]["what"], wrong[0]["detail"]


def _runner(name: str, *labels: str, ephemeral: bool = False) -> dict:
    return {"id": 90, "name": name, "os": "linux", "status": "online", "busy": False, "ephemeral": ephemeral,
            "labels": [{"id": i, "name": n, "type": "custom"} for i, n in enumerate(("self-hosted", *labels))]}


def _add_runner(answers: dict, path: str, runner: dict) -> None:
    body = answers.setdefault(path, {"status": 200, "body": {"total_count": 0, "runners": []}})["body"]
    body["runners"].append(runner)
    body["total_count"] = len(body["runners"])


def test_a_label_in_another_case_is_the_same_label(capsys, monkeypatch):
    """GitHub matches runs-on labels case-insensitively: a `GPU-Pool` runner in the unrestricted Default
    group takes `gpu-pool` jobs from any workflow, and is judged on the gpu-pool line."""
    answers = recording("settings_correct.json")
    _add_runner(answers, "/orgs/octo-org/actions/runner-groups/1/runners", _runner("gpu-h100-c", "Linux", "GPU-Pool"))
    what, detail = _only_wrong(capsys, monkeypatch, answers)
    assert what == "runners gpu-pool" and "group 'Default' is not restricted to selected workflows" in detail


@pytest.mark.parametrize("where", ["/orgs/octo-org/actions/runner-groups/1/runners", f"/repos/{REPO}/actions/runners"])
def test_any_self_hosted_runner_a_fork_can_reach_is_wrong(capsys, monkeypatch, where):
    """A fork's copy saying `runs-on: self-hosted` reaches a runner without a GPU label too: in the
    unrestricted Default group, or registered on the repository itself."""
    answers = recording("settings_correct.json")
    _add_runner(answers, where, _runner("build-1", "Linux", "docker"))
    what, detail = _only_wrong(capsys, monkeypatch, answers)
    assert what == "runners other" and "build-1" in detail and "runs-on: self-hosted" in detail


def test_a_runner_in_a_group_public_repositories_cannot_use_is_not_reachable(capsys, monkeypatch):
    answers = recording("settings_correct.json")
    answers["/orgs/octo-org/actions/runner-groups"]["body"]["runner_groups"][0]["allows_public_repositories"] = False
    _add_runner(answers, "/orgs/octo-org/actions/runner-groups/1/runners", _runner("build-1", "Linux"))
    with RecordedGitHub(answers) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server)
    assert code == 0 and _lines(out)["runners other"].startswith("ok "), out


PRIVATE_FORKS = f"/repos/{REPO}/actions/permissions/fork-pr-workflows-private-repos"
PRIVATE_RIGHT = {"run_workflows_from_fork_pull_requests": True, "send_write_tokens_to_workflows": False,
                 "send_secrets_and_variables": False, "require_approval_for_fork_pr_workflows": True}


def _private(answers: dict, forks: dict) -> dict:
    answers[f"/repos/{REPO}"]["body"].update(private=True, visibility="private")
    # GitHub answers the public approval policy with 422 for a private repository
    answers[f"/repos/{REPO}/actions/permissions/fork-pr-contributor-approval"] = {
        "status": 422, "body": {"message": "Validation Failed", "status": "422"}}
    answers[PRIVATE_FORKS] = {"status": 200, "body": forks}
    return answers


@pytest.mark.parametrize("forks", [PRIVATE_RIGHT, {**PRIVATE_RIGHT, "run_workflows_from_fork_pull_requests": False,
                                                   "send_secrets_and_variables": True}])
def test_a_private_repository_with_fork_runs_reviewed_and_read_only_or_off_passes(capsys, monkeypatch, forks):
    with RecordedGitHub(_private(recording("settings_correct.json"), forks)) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server)
    assert code == 0, out
    assert PRIVATE_FORKS in server.paths()


@pytest.mark.parametrize(("key", "value"), [("send_write_tokens_to_workflows", True),
                                            ("send_secrets_and_variables", True),
                                            ("require_approval_for_fork_pr_workflows", False)])
def test_a_private_repositorys_fork_settings_are_read(capsys, monkeypatch, key, value):
    answers = _private(recording("settings_correct.json"), {**PRIVATE_RIGHT, key: value})
    what, detail = _only_wrong(capsys, monkeypatch, answers)
    assert what == "fork PR approval" and detail.startswith(f"{key} {str(value).lower()}:"), detail


RULES = f"/repos/{REPO}/rules/branches/main"
PROTECTION = f"/repos/{REPO}/branches/main/protection"
RULESET = f"/repos/{REPO}/rulesets/42"
OK_BRANCH = "ok main: force pushes blocked, an approving review of the last push required, nobody may bypass them"
CLASSIC = {"url": f"https://api.github.com{PROTECTION}", "allow_force_pushes": {"enabled": False},
           "required_pull_request_reviews": {"dismiss_stale_reviews": True, "require_code_owner_reviews": False,
                                             "required_approving_review_count": 1},
           "enforce_admins": {"enabled": True}, "allow_deletions": {"enabled": False}}


def _drop_rule(answers: dict, kind: str) -> dict:
    answers[RULES]["body"] = [r for r in answers[RULES]["body"] if r["type"] != kind]
    return answers


def test_a_classic_protection_rule_serves_as_well_as_a_ruleset(capsys, monkeypatch):
    answers = recording("settings_correct.json")
    answers[RULES]["body"] = []
    answers[PROTECTION] = {"status": 200, "body": CLASSIC}
    with RecordedGitHub(answers) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server)
    assert code == 0 and _lines(out)["default branch"] == OK_BRANCH


@pytest.mark.parametrize(("fault", "said"), [
    ("ruleset without non_fast_forward", "force pushes allowed"),
    ("ruleset without pull_request", "no approving review required"),
    ("ruleset pull_request with 0 approvals", "no approving review required"),
    ("classic rule allowing force pushes", "force pushes allowed"),
    ("classic rule without reviews", "no approving review required"),
])
def test_the_default_branch_must_block_force_pushes_and_require_a_review(capsys, monkeypatch, fault, said):
    answers = recording("settings_correct.json")
    if fault == "ruleset without non_fast_forward":
        _drop_rule(answers, "non_fast_forward")
    elif fault == "ruleset without pull_request":
        _drop_rule(answers, "pull_request")
    elif fault == "ruleset pull_request with 0 approvals":
        next(r for r in answers[RULES]["body"] if r["type"] == "pull_request")["parameters"][
            "required_approving_review_count"] = 0
    else:
        answers[RULES]["body"] = []
        classic = json.loads(json.dumps(CLASSIC))
        if fault == "classic rule allowing force pushes":
            classic["allow_force_pushes"]["enabled"] = True
        else:
            del classic["required_pull_request_reviews"]
        answers[PROTECTION] = {"status": 200, "body": classic}
    what, detail = _only_wrong(capsys, monkeypatch, answers)
    assert what == "default branch" and detail.startswith(f"main: {said}"), detail
    assert ";" not in detail, detail  # the other half holds


def _review_rule(answers: dict) -> dict:
    return next(r for r in answers[RULES]["body"] if r["type"] == "pull_request")["parameters"]


def test_the_correct_repository_reads_its_rulesets_bypass_list(capsys, monkeypatch):
    with RecordedGitHub(recording("settings_correct.json")) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server)
    assert code == 0 and _lines(out)["default branch"] == OK_BRANCH, out
    assert RULESET in server.paths()


STALE = "an approval survives a later push"


@pytest.mark.parametrize(("fault", "said"), [
    # The workflows review's edits (2026-12-06): each passed as "ok" before.
    ("ruleset keeps stale approvals", STALE),
    ("classic rule keeps stale approvals", STALE),
    ("classic rule not enforced for admins", "the classic rule does not include administrators (enforce_admins off)"),
    ("classic rule lets a team skip reviews", "the classic rule lets team release-bots skip its reviews"),
    ("ruleset with a bypass actor", "ruleset 'main' may be bypassed by OrganizationAdmin 1 (always), Team 7 "
                                    "(pull_request)"),
    ("ruleset bypass list hidden", "ruleset 42's bypass list is not shown to this token"),
    ("ruleset unreadable", "ruleset 42's bypass list cannot be read (GET /repos/octo-org/kernels/rulesets/42: "
                           "HTTP 404)"),
])
def test_the_default_branch_review_must_cover_the_last_push_and_bind_everyone(capsys, monkeypatch, fault, said):
    answers = recording("settings_correct.json")
    classic = json.loads(json.dumps(CLASSIC))
    if fault == "ruleset keeps stale approvals":
        _review_rule(answers).update(dismiss_stale_reviews_on_push=False, require_last_push_approval=False)
    elif fault.startswith("classic rule"):
        answers[RULES]["body"] = []
        if fault == "classic rule keeps stale approvals":
            classic["required_pull_request_reviews"]["dismiss_stale_reviews"] = False
        elif fault == "classic rule not enforced for admins":
            classic["enforce_admins"]["enabled"] = False
        else:
            classic["required_pull_request_reviews"]["bypass_pull_request_allowances"] = {
                "users": [], "teams": [{"id": 7, "slug": "release-bots", "name": "Release bots"}], "apps": []}
        answers[PROTECTION] = {"status": 200, "body": classic}
    elif fault == "ruleset with a bypass actor":
        answers[RULESET]["body"]["bypass_actors"] = [
            {"actor_id": 1, "actor_type": "OrganizationAdmin", "bypass_mode": "always"},
            {"actor_id": 7, "actor_type": "Team", "bypass_mode": "pull_request"}]
    elif fault == "ruleset bypass list hidden":
        del answers[RULESET]["body"]["bypass_actors"]
    else:
        del answers[RULESET]
    what, detail = _only_wrong(capsys, monkeypatch, answers)
    assert what == "default branch" and detail.startswith(f"main: {said}"), detail
    if fault.startswith("ruleset") and fault != "ruleset keeps stale approvals":
        # The bypass opens both halves: said once, not once per rule of the ruleset.
        assert detail.count(said) == 1, detail


def test_a_bypassed_ruleset_is_made_good_by_a_classic_rule_that_binds_everyone(capsys, monkeypatch):
    answers = recording("settings_correct.json")
    answers[RULESET]["body"]["bypass_actors"] = [{"actor_id": 5, "actor_type": "RepositoryRole",
                                                  "bypass_mode": "always"}]
    answers[PROTECTION] = {"status": 200, "body": CLASSIC}
    with RecordedGitHub(answers) as server:
        code, out, _err = _doctor(capsys, monkeypatch, server)
    assert code == 0 and _lines(out)["default branch"] == OK_BRANCH, out
