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
CHECKS = ["fork PR approval", "runners gpu-pool", "runners gpu-pr", "environment nightly", "nightly secrets",
          "pages source"]


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
