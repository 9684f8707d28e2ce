"""Whether a GitHub repository's settings are what docs/ci.md requires, read through the REST
API (`flopwatch doctor --github OWNER/REPO`). Reads only; standard library only (the client of
`pipeline.ci.github`).

What a fork's PR runs from its own copy of the workflows is stopped by settings, not files, so
they are checked here, one `Check` each:

- fork PR approval: every outside contributor's run waits for approval
  (GET /repos/{o}/{r}/actions/permissions/fork-pr-contributor-approval, `approval_policy`); for a
  private or internal repository, whose fork runs follow other settings, fork runs get no write
  token and no secrets and wait for approval, or do not run at all
  (GET /repos/{o}/{r}/actions/permissions/fork-pr-workflows-private-repos);
- per self-hosted label (`RUNNER_LABELS`): the runners carrying it sit in organization runner
  groups restricted to exactly the workflows that name the label, at the default branch
  (GET /orgs/{org}/actions/runner-groups?visible_to_repository=…, `restricted_to_workflows`,
  `selected_workflows`, `allows_public_repositories`; each group's runners for their labels;
  GET /repos/{o}/{r}/actions/runners, where a repository's own runners could not be restricted);
  the PR label's runners are ephemeral; every other self-hosted runner the repository can use
  sits in a group restricted to selected workflows (labels compared case-insensitively, as
  GitHub matches `runs-on`);
- the environment `nightly` may be used by the default branch only
  (GET /repos/{o}/{r}/environments, `deployment_branch_policy`, and its branch policies);
- the nightly's secrets are secrets of that environment, not repository secrets nor
  organization secrets shared with the repository (GET /repos/{o}/{r}/environments/nightly/secrets,
  GET /repos/{o}/{r}/actions/secrets, GET /repos/{o}/{r}/actions/organization-secrets);
- GitHub Pages is published by the workflow (GET /repos/{o}/{r}/pages, `build_type`);
- the default branch blocks force pushes and requires an approving review of its last push, by a
  ruleset nobody may bypass (GET /repos/{o}/{r}/rules/branches/{b}, each ruleset's `bypass_actors` from
  GET /repos/{o}/{r}/rulesets/{id}) or a classic rule that includes administrators
  (GET /repos/{o}/{r}/branches/{b}/protection, `enforce_admins`, `bypass_pull_request_allowances`).

A repository that cannot be read at all (no token, 401, 404) raises `SettingsError`; a setting
that cannot be read (403, 404) is a failed check that says which.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from pipeline.ci.github import Api, GitHubError, request

APPROVAL_POLICY = "all_external_contributors"
# A private repository's fork PR settings as required (GET …/actions/permissions/fork-pr-workflows-private-repos).
PRIVATE_FORK_SETTINGS = {"send_write_tokens_to_workflows": False, "send_secrets_and_variables": False,
                         "require_approval_for_fork_pr_workflows": True}
NIGHTLY_ENVIRONMENT = "nightly"
NIGHTLY_SECRETS = ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "FLOPWATCH_STORE")
# Each self-hosted label and the workflow files that may use its runners (tests/test_workflow_isolation.py
# checks this against .github/workflows).
RUNNER_LABELS = {"gpu-pool": ("nightly.yml", "bisect.yml"), "gpu-pr": ("pr-bench.yml",)}
EPHEMERAL_LABELS = ("gpu-pr",)
RUNNER_CHECKS = (*(f"runners {label}" for label in RUNNER_LABELS), "runners other")
PER_PAGE = 100


class SettingsError(RuntimeError):
    """The repository cannot be read at all: no token, a refused token, no such repository."""


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str
    fix: str = ""


def _get(api: Api, path: str):
    try:
        return request(api, "GET", path)
    except GitHubError as exc:
        if exc.status == 401:
            raise SettingsError(f"GitHub refused the token (HTTP 401 on {path}): {exc.message}") from None
        raise


def _unreadable(what: str, path: str, exc: GitHubError, fix: str) -> Check:
    why = {403: "the token may not read it", 404: "not found: the setting is absent, or the token lacks the "
                                                  "administration permission GitHub hides it behind"}
    return Check(what, False, f"GET {path}: HTTP {exc.status} ({why.get(exc.status, exc.message)})", fix)


def _all_pages(api: Api, path: str, key: str) -> list[dict]:
    """Every item of a paged list answer (`{"total_count": N, key: [...]}`)."""
    items: list[dict] = []
    sep = "&" if "?" in path else "?"
    for page in range(1, 100):
        answer = _get(api, f"{path}{sep}per_page={PER_PAGE}&page={page}")
        batch = answer.get(key) or []
        items.extend(batch)
        if len(batch) < PER_PAGE or len(items) >= int(answer.get("total_count", 0)):
            break
    return items


def check_approval(api: Api, repo: str, public: bool) -> Check:
    what = "fork PR approval"
    if not public:
        return _check_private_forks(api, repo)
    path = f"/repos/{repo}/actions/permissions/fork-pr-contributor-approval"
    fix = ("Settings → Actions → General → Approval for running fork pull request workflows from contributors: "
           "Require approval for all external contributors")
    try:
        policy = _get(api, path).get("approval_policy")
    except GitHubError as exc:
        return _unreadable(what, path, exc, fix)
    if policy == APPROVAL_POLICY:
        return Check(what, True, f"approval_policy {policy}: every outside contributor's run waits for approval")
    return Check(what, False, f"approval_policy {policy}: an outside contributor approved once (or not new to "
                              f"GitHub) runs workflows from their fork without approval", fix)


def _check_private_forks(api: Api, repo: str) -> Check:
    """A private (or internal) repository's fork PR runs follow their own settings, not the public approval
    policy: they may be handed a write token and the secrets, and may run without approval."""
    what = "fork PR approval"
    path = f"/repos/{repo}/actions/permissions/fork-pr-workflows-private-repos"
    fix = ("Settings → Actions → General → Fork pull request workflows in private repositories: untick Send write "
           "tokens and Send secrets and variables, tick Require approval for fork pull request workflows (or untick "
           "Run workflows from fork pull requests)")
    try:
        got = _get(api, path)
    except GitHubError as exc:
        return _unreadable(what, path, exc, fix)
    if got.get("run_workflows_from_fork_pull_requests") is False:
        return Check(what, True, "run_workflows_from_fork_pull_requests false: fork PRs run no workflow")
    wrong = [f"{key} {str(got.get(key)).lower()}" for key, want in PRIVATE_FORK_SETTINGS.items()
             if got.get(key) is not want]
    if wrong:
        return Check(what, False, f"{', '.join(wrong)}: a fork's PR runs its own workflows with more than a "
                                  f"reviewed, read-only run", fix)
    return Check(what, True, "fork PR runs wait for approval and get no write token, secrets or variables")


def _labels(runner: dict) -> set[str]:
    # GitHub matches `runs-on` labels case-insensitively: a runner labelled GPU-Pool takes gpu-pool jobs.
    return {label.get("name", "").lower() for label in runner.get("labels") or []}


def _is_public(info: dict) -> bool:
    return info.get("visibility") == "public" or info.get("private") is False


def _allowed_workflows(repo: str, files: tuple[str, ...], branch: str) -> set[str]:
    return {f"{repo}/.github/workflows/{f}@{ref}".lower() for f in files for ref in (branch, f"refs/heads/{branch}")}


def check_runners(api: Api, repo: str, info: dict) -> list[Check]:
    """One check per self-hosted label: where its runners are, and what may use them; then one for every
    other self-hosted runner the repository can reach."""
    org = (info.get("owner") or {}).get("login", "")
    branch = info.get("default_branch", "main")
    public = _is_public(info)
    groups: list[tuple[dict, list[dict]]] = []
    problems: dict[str, list[str]] = {label: [] for label in RUNNER_LABELS}
    try:
        repo_runners = _all_pages(api, f"/repos/{repo}/actions/runners", "runners")
    except GitHubError as exc:
        return [_unreadable(what, f"/repos/{repo}/actions/runners", exc,
                            "use a token with the repository's administration permission (read)")
                for what in RUNNER_CHECKS]
    is_org = (info.get("owner") or {}).get("type") == "Organization"
    if is_org:
        name = repo.split("/", 1)[1]
        path = f"/orgs/{org}/actions/runner-groups?visible_to_repository={urllib.parse.quote(name)}"
        try:
            for group in _all_pages(api, path, "runner_groups"):
                runners = _all_pages(api, f"/orgs/{org}/actions/runner-groups/{group['id']}/runners", "runners")
                groups.append((group, runners))
        except GitHubError as exc:
            return [_unreadable(what, path, exc, "use a token that may read the organization's runner groups "
                                                 "(admin:org, or Self-hosted runners: read)")
                    for what in RUNNER_CHECKS]
    checks = []
    for label, files in RUNNER_LABELS.items():
        allowed = _allowed_workflows(repo, files, branch)
        fix = (f"Organization settings → Actions → Runner groups: put the runners labelled {label} in a group of "
               f"their own, Workflow access: Selected workflows: "
               + ", ".join(f"{repo}/.github/workflows/{f}@refs/heads/{branch}" for f in files))
        found = [r for r in repo_runners if label in _labels(r)]
        if found:
            problems[label].append(f"repository runner(s) {', '.join(r.get('name', '?') for r in found)} carry "
                                   f"{label}: a repository's own runners cannot be limited to workflows")
        holders = [(g, [r for r in rs if label in _labels(r)]) for g, rs in groups]
        holders = [(g, rs) for g, rs in holders if rs]
        if not is_org:
            problems[label].append(f"{org} is a user account: runner groups, which limit runners to workflows, "
                                   f"need an organization")
        elif not holders and not found:
            problems[label].append(f"no runner labelled {label} in a runner group this repository may use")
        for group, runners in holders:
            gname = group.get("name", group.get("id"))
            selected = {w.lower() for w in group.get("selected_workflows") or []}
            if not group.get("restricted_to_workflows"):
                problems[label].append(f"group {gname!r} is not restricted to selected workflows: any workflow, a "
                                       f"fork's copy included, may use it")
            elif not selected or not selected <= allowed:
                extra = sorted(selected - allowed) or ["(none selected)"]
                problems[label].append(f"group {gname!r} allows {', '.join(extra)}")
            if public and not group.get("allows_public_repositories"):
                problems[label].append(f"group {gname!r} does not allow public repositories: the jobs never start")
            both = [r.get("name", "?") for r in runners if len(_labels(r) & set(RUNNER_LABELS)) > 1]
            if both:
                problems[label].append(f"runner(s) {', '.join(both)} carry both {' and '.join(RUNNER_LABELS)}")
            if label in EPHEMERAL_LABELS:
                kept = [r.get("name", "?") for r in runners if not r.get("ephemeral")]
                if kept:
                    problems[label].append(f"runner(s) {', '.join(kept)} are not ephemeral (register them with "
                                           f"--ephemeral)")
        names = ", ".join(repr(g.get("name")) for g, _ in holders)
        if problems[label]:
            checks.append(Check(f"runners {label}", False, "; ".join(problems[label]), fix))
        else:
            checks.append(Check(f"runners {label}", True, f"group(s) {names} limited to "
                                                         f"{', '.join(files)} at {branch}"))
    checks.append(_check_other_runners(repo_runners, groups, public))
    return checks


def _check_other_runners(repo_runners: list[dict], groups: list[tuple[dict, list[dict]]],
                         public: bool) -> Check:
    """A fork's copy of a workflow may say `runs-on: self-hosted` (or any label), which reaches every runner
    the repository can use, not only the GPU ones: each must sit in a group restricted to workflows."""
    what = RUNNER_CHECKS[-1]
    gpu = set(RUNNER_LABELS)  # runners with these labels are judged on their own lines above
    loose = [f"repository runner {r.get('name', '?')}" for r in repo_runners if not _labels(r) & gpu]
    for group, runners in groups:
        if group.get("restricted_to_workflows") or (public and not group.get("allows_public_repositories")):
            continue  # only selected workflows, or no job of this (public) repository at all
        loose += [f"{r.get('name', '?')} in group {group.get('name', group.get('id'))!r}"
                  for r in runners if not _labels(r) & gpu]
    if loose:
        return Check(what, False, f"{', '.join(loose)}: any workflow of the repository, a fork's copy with "
                                  f"`runs-on: self-hosted` included, may use them once its run is approved",
                     "move them to a runner group whose Workflow access is Selected workflows (Organization "
                     "settings → Actions → Runner groups), or out of the groups and repository this repository "
                     "can use")
    return Check(what, True, "every other self-hosted runner the repository can use is in a group restricted to "
                             "selected workflows")


def check_environment(api: Api, repo: str, branch: str) -> Check:
    what = f"environment {NIGHTLY_ENVIRONMENT}"
    fix = (f"Settings → Environments → {NIGHTLY_ENVIRONMENT} → Deployment branches and tags: Selected branches "
           f"and tags, one rule: {branch}")
    path = f"/repos/{repo}/environments"
    try:
        environments = _all_pages(api, path, "environments")
    except GitHubError as exc:
        return _unreadable(what, path, exc, fix)
    env = next((e for e in environments if e.get("name") == NIGHTLY_ENVIRONMENT), None)
    if env is None:
        return Check(what, False, f"no environment {NIGHTLY_ENVIRONMENT!r}: the nightly and bisect jobs name it",
                     f"Settings → Environments → New environment {NIGHTLY_ENVIRONMENT!r}; then: {fix}")
    policy = env.get("deployment_branch_policy")
    if not policy:
        return Check(what, False, "every branch may use it (deployment_branch_policy null)", fix)
    if policy.get("protected_branches"):
        return Check(what, False, "every protected branch may use it, not only the default branch", fix)
    path = f"/repos/{repo}/environments/{NIGHTLY_ENVIRONMENT}/deployment-branch-policies"
    try:
        rules = _all_pages(api, path, "branch_policies")
    except GitHubError as exc:
        return _unreadable(what, path, exc, fix)
    names = sorted(f"{r.get('type', 'branch')}:{r.get('name')}" for r in rules)
    if names != [f"branch:{branch}"]:
        return Check(what, False, f"deployment branch rules {', '.join(names) or '(none)'}, not only "
                                  f"branch:{branch}", fix)
    return Check(what, True, f"only branch {branch} may use it")


def check_secrets(api: Api, repo: str) -> Check:
    what = "nightly secrets"
    fix = (f"Settings → Environments → {NIGHTLY_ENVIRONMENT} → Environment secrets: add "
           f"{', '.join(NIGHTLY_SECRETS)}; then delete them under Settings → Secrets and variables → Actions → "
           f"Repository secrets")
    problems = []
    path = f"/repos/{repo}/environments/{NIGHTLY_ENVIRONMENT}/secrets"
    try:
        in_env = {s.get("name") for s in _all_pages(api, path, "secrets")}
    except GitHubError as exc:
        if exc.status != 404:
            return _unreadable(what, path, exc, fix)
        in_env = set()  # no such environment: check_environment says so
    path = f"/repos/{repo}/actions/secrets"
    try:
        in_repo = {s.get("name") for s in _all_pages(api, path, "secrets")}
    except GitHubError as exc:
        return _unreadable(what, path, exc, fix)
    path = f"/repos/{repo}/actions/organization-secrets"
    try:
        in_org = {s.get("name") for s in _all_pages(api, path, "secrets")}
    except GitHubError as exc:
        return _unreadable(what, path, exc, fix)
    # A job reads an environment secret before a repository or organization one of the same name,
    # but any workflow that names no environment gets the latter: the value must not exist there.
    for where, names in (("repository", in_repo), ("organization", in_org)):
        exposed = [s for s in NIGHTLY_SECRETS if s in names]
        if exposed:
            problems.append(f"{where} secret(s) {', '.join(exposed)}: every workflow on every branch may read them")
    missing = [s for s in NIGHTLY_SECRETS if s not in in_env]
    if missing:
        problems.append(f"not in environment {NIGHTLY_ENVIRONMENT!r}: {', '.join(missing)}")
    if problems:
        return Check(what, False, "; ".join(problems), fix)
    return Check(what, True, f"{', '.join(NIGHTLY_SECRETS)} are secrets of environment {NIGHTLY_ENVIRONMENT!r} only")


def check_pages(api: Api, repo: str) -> Check:
    what = "pages source"
    fix = "Settings → Pages → Build and deployment → Source: GitHub Actions"
    path = f"/repos/{repo}/pages"
    try:
        pages = _get(api, path)
    except GitHubError as exc:
        if exc.status == 404:
            return Check(what, False, "GitHub Pages is not enabled (HTTP 404): the nightly's deploy job fails", fix)
        return _unreadable(what, path, exc, fix)
    if pages.get("build_type") == "workflow":
        return Check(what, True, "build_type workflow: the nightly's deploy job publishes the site")
    return Check(what, False, f"build_type {pages.get('build_type')}: Pages builds from a branch, not the nightly's "
                              f"artifact", fix)


def check_default_branch(api: Api, repo: str, branch: str) -> Check:
    """The nightly environment, the runner groups' selected workflows and the driver all trust the default
    branch; that trust holds only if no push rewrites it and no change lands unreviewed. A ruleset or a
    classic protection rule may give either half, and only one that nobody may bypass: a ruleset with no
    bypass actors (GET …/rulesets/{id}), a classic rule that includes administrators (`enforce_admins`) and
    allows nobody to skip its reviews. A review counts only if a push after it needs another: stale
    approvals dismissed on push, or approval of the most recent push required; else a writer pushes after
    the approval and merges what nobody reviewed."""
    what = "default branch"
    fix = (f"Settings → Rules → Rulesets → New branch ruleset for the default branch ({branch}), with no bypass "
           f"list: Block force pushes, Require a pull request before merging with at least 1 required approval "
           f"and Dismiss stale pull request approvals when new commits are pushed")
    ref = urllib.parse.quote(branch, safe="")
    path = f"/repos/{repo}/rules/branches/{ref}"
    try:
        rules = _get(api, f"{path}?per_page={PER_PAGE}") or []
    except GitHubError as exc:
        return _unreadable(what, path, exc, fix)
    # Each half: (whether a source nobody bypasses gives it, why the sources that give it are bypassed).
    force, review = _Half(), _Half()
    bypassed: dict = {}
    for rule in rules:
        kind = rule.get("type")
        if kind not in ("non_fast_forward", "pull_request"):
            continue
        rid = rule.get("ruleset_id")
        if rid not in bypassed:
            bypassed[rid] = _ruleset_bypass(api, repo, rid)
        if kind == "non_fast_forward":
            force.offer(bypassed[rid])
        else:
            review.offer_review(rule.get("parameters") or {}, ("dismiss_stale_reviews_on_push",
                                                               "require_last_push_approval"), bypassed[rid])
    if not (force.held and review.held):
        path = f"/repos/{repo}/branches/{ref}/protection"
        try:
            protection = _get(api, path)
        except GitHubError as exc:
            if exc.status != 404 or "not protected" not in exc.message.lower():
                return _unreadable(what, path, exc, fix)
            protection = None  # GitHub's 404 "Branch not protected": no classic rule
        if protection:
            reviews = protection.get("required_pull_request_reviews")
            admins = "" if (protection.get("enforce_admins") or {}).get("enabled") else \
                ("the classic rule does not include administrators (enforce_admins off): an admin may push or "
                 "merge past it")
            if not (protection.get("allow_force_pushes") or {}).get("enabled", False):
                force.offer(admins)
            if reviews:
                allowed = _classic_allowances(reviews.get("bypass_pull_request_allowances"))
                skip = f"the classic rule lets {allowed} skip its reviews (bypass_pull_request_allowances)" if allowed \
                    else ""
                review.offer_review(reviews, ("dismiss_stale_reviews", "require_last_push_approval"),
                                    "; ".join(filter(None, (admins, skip))))
    problems = [force.problem("force pushes allowed: a push may rewrite the history the nightly trusts"),
                review.problem("no approving review required: a change may land on it unreviewed")]
    problems = list(dict.fromkeys(p for p in problems if p))  # one bypass said once, if it breaks both halves
    if problems:
        return Check(what, False, f"{branch}: {'; '.join(problems)}", fix)
    return Check(what, True, f"{branch}: force pushes blocked, an approving review of the last push required, "
                             f"nobody may bypass them")


STALE = ("an approval survives a later push (neither stale approvals dismissed on push nor approval of the most "
         "recent push required): a writer may push after the approval and merge what nobody reviewed")


class _Half:
    """One half of the default branch's protection: held when some rule gives it that nobody may
    bypass; else the most specific reason it does not hold."""

    def __init__(self) -> None:
        self.held = False
        self.reasons: list[str] = []

    def offer(self, bypass: str) -> None:
        if bypass:
            self.reasons.append(bypass)
        else:
            self.held = True

    def offer_review(self, reviews: dict, stale_keys: tuple[str, str], bypass: str) -> None:
        if not _approvals(reviews):
            return
        if not any(reviews.get(k) for k in stale_keys):
            self.reasons.append(STALE)
            return
        self.offer(bypass)

    def problem(self, absent: str) -> str:
        if self.held:
            return ""
        return "; ".join(dict.fromkeys(self.reasons)) if self.reasons else absent


def _ruleset_bypass(api: Api, repo: str, ruleset_id) -> str:
    """Why ruleset `ruleset_id` does not bind everyone ("" when it does): its bypass actors, or that
    they cannot be read (GitHub shows them only to a token with the administration permission)."""
    path = f"/repos/{repo}/rulesets/{ruleset_id}"
    try:
        ruleset = _get(api, f"{path}?includes_parents=true")
    except GitHubError as exc:
        return f"ruleset {ruleset_id}'s bypass list cannot be read (GET {path}: HTTP {exc.status})"
    actors = ruleset.get("bypass_actors")
    if actors is None:
        return (f"ruleset {ruleset_id}'s bypass list is not shown to this token (GET {path} has no bypass_actors: it "
                f"needs the administration permission)")
    if not actors:
        return ""
    named = ", ".join(f"{a.get('actor_type', '?')} {a.get('actor_id', '')} ({a.get('bypass_mode', 'always')})"
                      for a in actors)
    return f"ruleset {ruleset.get('name') or ruleset_id!r} may be bypassed by {named}: they may merge or push past it"


def _classic_allowances(allowances: dict | None) -> str:
    """The users, teams and apps a classic rule lets skip its pull request requirements, named."""
    names = [f"{kind[:-1]} {item.get('login') or item.get('slug') or item.get('name') or item.get('id')}"
             for kind in ("users", "teams", "apps") for item in (allowances or {}).get(kind) or []]
    return ", ".join(names)


def _approvals(reviews: dict | None) -> bool:
    return int((reviews or {}).get("required_approving_review_count") or 0) >= 1


def check_repository(api: Api, repo: str) -> list[Check]:
    """Every check for `repo` ("owner/name"), in docs/ci.md's order."""
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise SettingsError(f"--github wants OWNER/REPO, not {repo!r}")
    try:
        info = _get(api, f"/repos/{repo}")
    except GitHubError as exc:
        if exc.status == 404:
            raise SettingsError(f"repository {repo} not found (HTTP 404): it does not exist, or the token may not "
                                f"read it") from None
        raise SettingsError(f"reading repository {repo}: {exc}") from None
    branch = info.get("default_branch", "main")
    return [check_approval(api, repo, _is_public(info)), *check_runners(api, repo, info),
            check_environment(api, repo, branch), check_secrets(api, repo), check_pages(api, repo),
            check_default_branch(api, repo, branch)]
