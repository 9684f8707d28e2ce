"""The PR benchmark's gate: whether a workflow event may run a pull request's code on the GPU
runners, and at which commit. Standard library only: the `gate` job of `pr-bench.yml` runs it
from a checkout of the default branch without installing anything
(`python3 -m pipeline.ci.pr_gate`), and the tests run the same entry point for every kind
of event.

The rules (docs/ci.md, "Approval bound to a commit"):

- A same-repository PR (its author can push to the repository anyway) runs on `opened`,
  `synchronize` and `reopened`, at the head the event names.
- A fork's PR runs only on a comment `/bench <sha>` (the full 40-hex SHA: a short prefix can be
  ground to match a second commit) written by the repository's OWNER, a MEMBER of its
  organization or a COLLABORATOR who, as the API says now, holds write or admin permission on
  the repository (a collaborator may have been invited with read access only, and an
  organization's members need not have any), and only when `<sha>` is the PR's head when the
  gate reads the PR. The benchmark then checks out exactly `<sha>`: a push after the comment is never run, and a
  push before it makes the gate refuse until a maintainer names the new head.
- Only PRs into the default branch run: a PR retargeted to another branch would be measured by
  that branch's driver.

Outputs (`$GITHUB_OUTPUT`): run (true/false), head_sha, base_sha, number; the reason goes to
stdout and the job summary. Exit 1 when the event is malformed (a SHA that is not 40 hex
digits), 2 when the environment lacks what Actions always sets.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pipeline.ci import github

MAINTAINERS = ("OWNER", "MEMBER", "COLLABORATOR")
# `permission` of GET /repos/{o}/{r}/collaborators/{user}/permission (maintain reads as write).
MAY_APPROVE = ("admin", "write")
SAME_REPO_ACTIONS = ("opened", "synchronize", "reopened")
SHA = re.compile(r"[0-9a-f]{40}")
# The whole first line: `/bench` and one full SHA, nothing else (a stray word is a typo, not a vote).
BENCH = re.compile(r"/bench\s+(\S+)\s*")


class MalformedEvent(ValueError):
    """The event carries a value the gate refuses to pass on (not a commit SHA, a missing key)."""


@dataclass(frozen=True)
class Decision:
    run: bool
    head_sha: str
    base_sha: str
    number: int
    reason: str

    def outputs(self) -> str:
        return (f"run={'true' if self.run else 'false'}\nhead_sha={self.head_sha}\nbase_sha={self.base_sha}\n"
                f"number={self.number}\n")


def _sha(value: object, what: str) -> str:
    if not isinstance(value, str) or not SHA.fullmatch(value):
        raise MalformedEvent(f"{what} is not a 40-hex commit SHA: {str(value)[:60]!r}")
    return value


def _pr_fields(pr: Mapping) -> tuple[str, str, str, int]:
    try:
        head, base, number = pr["head"], pr["base"], int(pr["number"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedEvent(f"the pull request lacks {exc}") from None
    return _sha(head.get("sha"), "head.sha"), _sha(base.get("sha"), "base.sha"), str(base.get("ref", "")), number


def _refuse(pr: Mapping | None, number: int, reason: str) -> Decision:
    head = base = ""
    if pr is not None:
        head, base, _ref, number = _pr_fields(pr)
    return Decision(False, head, base, number, reason)


def decide(event_name: str, event: Mapping, read_pr: Callable[[int], Mapping],
           read_permission: Callable[[str], str] = lambda login: "none") -> Decision:
    """The gate's decision for one event. Only an approval comment needs the API:
    `read_pr(number)` returns the PR as it is now (the comment's payload carries no head SHA),
    `read_permission(login)` the commenter's permission on the repository."""
    default_branch = (event.get("repository") or {}).get("default_branch", "")
    repo_name = (event.get("repository") or {}).get("full_name", "")
    if event_name == "pull_request_target":
        pr = event.get("pull_request") or {}
        head, base, base_ref, number = _pr_fields(pr)
        head_repo = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
        if base_ref != default_branch:
            return _refuse(pr, number, f"the PR is into {base_ref!r}, not the default branch {default_branch!r}")
        if head_repo != repo_name:
            return _refuse(pr, number, "a fork's PR runs only when a maintainer comments `/bench <head sha>`")
        if event.get("action") not in SAME_REPO_ACTIONS:
            return _refuse(pr, number, f"event action {event.get('action')!r} does not run the benchmark")
        return Decision(True, head, base, number, f"same-repository PR: run at {head}")
    if event_name == "issue_comment":
        issue, comment = event.get("issue") or {}, event.get("comment") or {}
        number = int(issue.get("number") or 0)
        if event.get("action") != "created" or "pull_request" not in issue:
            return _refuse(None, number, "not a new comment on a pull request")
        first = (comment.get("body") or "").strip().splitlines()[:1]
        match = BENCH.fullmatch(first[0]) if first else None
        if match is None:
            return _refuse(None, number, "the comment is not `/bench <sha>`")
        if comment.get("author_association") not in MAINTAINERS:
            return _refuse(None, number, f"`/bench` from {(comment.get('user') or {}).get('login')!r} "
                                         f"({comment.get('author_association')}): only {', '.join(MAINTAINERS)} approve")
        approved = match.group(1).lower()
        if not SHA.fullmatch(approved):
            return _refuse(None, number, f"`/bench {approved[:60]}`: name the full 40-hex SHA of the PR's head")
        login = str((comment.get("user") or {}).get("login", ""))
        permission = read_permission(login)
        if permission not in MAY_APPROVE:
            return _refuse(None, number, f"`/bench` from {login!r}, whose permission on the repository is "
                                         f"{permission!r}: only {' or '.join(MAY_APPROVE)} approve")
        pr = read_pr(number)
        head, base, base_ref, number = _pr_fields(pr)
        if pr.get("state") != "open":
            return _refuse(pr, number, "the pull request is not open")
        if base_ref != default_branch:
            return _refuse(pr, number, f"the PR is into {base_ref!r}, not the default branch {default_branch!r}")
        if head != approved:
            return _refuse(pr, number, f"the approved commit {approved} is not the PR's head {head}: "
                                       f"a maintainer reads it and comments `/bench {head}`")
        return Decision(True, approved, base, number, f"approved by {(comment.get('user') or {}).get('login')}: "
                                                      f"run at {approved}")
    return _refuse(None, 0, f"event {event_name!r} does not run the benchmark")


def main(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    missing = [k for k in ("GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_OUTPUT", "GITHUB_REPOSITORY")
               if not env.get(k)]
    if missing:
        print(f"pr_gate: error: {', '.join(missing)} not set (run by GitHub Actions)", file=sys.stderr)
        return 2
    with open(env["GITHUB_EVENT_PATH"], encoding="utf-8") as handle:
        event = json.load(handle)

    def read_pr(number: int) -> Mapping:
        return github.request(github.api_from_env(env), "GET", f"/repos/{env['GITHUB_REPOSITORY']}/pulls/{number}")

    def read_permission(login: str) -> str:
        path = f"/repos/{env['GITHUB_REPOSITORY']}/collaborators/{urllib.parse.quote(login)}/permission"
        try:
            return str(github.request(github.api_from_env(env), "GET", path).get("permission", "none"))
        except github.GitHubError as exc:
            if exc.status == 404:  # not a collaborator at all
                return "none"
            raise

    try:
        decision = decide(env["GITHUB_EVENT_NAME"], event, read_pr, read_permission)
    except MalformedEvent as exc:
        print(f"pr_gate: error: {exc}", file=sys.stderr)
        return 1
    except github.GitHubError as exc:
        print(f"pr_gate: error: reading the pull request or the commenter's permission: {exc}", file=sys.stderr)
        return 1
    with open(env["GITHUB_OUTPUT"], "a", encoding="utf-8") as handle:
        handle.write(decision.outputs())
    line = f"PR #{decision.number}: {'run' if decision.run else 'no run'}: {decision.reason}"
    print(line)
    github.write_step_summary(line, env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
