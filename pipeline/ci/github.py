"""Publishes a comparison: a tiny GitHub REST client (standard library only) for flopwatch's PR
comment and job summary. Decides nothing; it takes the markdown rendered from a compare
`Report` and the repository/PR from the workflow's environment.

One comparison comment per PR: the comment carries a hidden HTML marker, so a new push
updates the existing comment instead of adding another one. Only a comment written by the
bot itself is ever edited: anyone can paste the marker into a comment of their own, and the
bot's token may edit every comment of the repository. `python -m pipeline.ci.github
comment` posts a body from a file (the PR workflow's comment job, which runs no PR code, posts
the comparison the benchmark job uploaded).

Transient failures are retried (`retry_wait`), as GitHub's REST API guide asks: a 5xx or a lost
connection after 1, 2, 4, 8 s; a rate limit (429, or 403 saying "rate limit") after the
`retry-after` header's seconds, else at `x-ratelimit-reset` when no request is left, else after
a minute, doubling. A wait longer than `Api.max_wait_s` is not waited: the error is raised.
Endpoints used (REST API version 2022-11-28):
  GET   /repos/{owner}/{repo}/issues/{number}/comments?per_page=100&page=N
  POST  /repos/{owner}/{repo}/issues/{number}/comments
  PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MARKER = "<!-- flopwatch-compare -->"
# Who a workflow's GITHUB_TOKEN comments as; with a GitHub App's token it is "<app-slug>[bot]".
BOT_LOGIN = "github-actions[bot]"
# GitHub refuses comment bodies over 65,536 characters.
MAX_BODY_CHARS = 65_000
DEFAULT_API_URL = "https://api.github.com"
PER_PAGE = 100
# A PR with more than 10,000 comments is not a case worth paging through forever.
MAX_PAGES = 100


class GitHubError(RuntimeError):
    """An API call failed; `status` is the HTTP status (0 when no response came back)."""

    def __init__(self, method: str, url: str, status: int, message: str) -> None:
        super().__init__(f"GitHub API {method} {url} failed: HTTP {status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Api:
    """Where and as whom to call: base URL (no trailing slash) and a token."""

    token: str
    url: str = DEFAULT_API_URL
    timeout_s: float = 30.0
    retries: int = 4  # further attempts after a transient failure
    max_wait_s: float = 300.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)


@dataclass(frozen=True)
class CommentResult:
    """The comment that now holds the body; created is False when an existing one was updated."""

    id: int
    html_url: str
    created: bool


def api_from_env(env: Mapping[str, str] | None = None) -> Api:
    """Api from GITHUB_TOKEN and GITHUB_API_URL (set by Actions; GitHub Enterprise differs)."""
    env = os.environ if env is None else env
    token = env.get("GITHUB_TOKEN", "")
    if not token:
        raise GitHubError("-", "-", 0, "GITHUB_TOKEN is not set")
    return Api(token=token, url=(env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"))


def headers(token: str) -> dict[str, str]:
    """The request headers GitHub documents for the REST API."""
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "flopwatch",
    }


def _error_message(raw: bytes) -> str:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace").strip()[:500] or "(empty body)"
    if isinstance(body, dict) and "message" in body:
        extra = f" ({body['documentation_url']})" if body.get("documentation_url") else ""
        return f"{body['message']}{extra}"
    return str(body)[:500]


def retry_wait(status: int, headers: Mapping[str, str], message: str, attempt: int,
               now: float | None = None) -> float | None:
    """Seconds to wait before attempt `attempt + 1` of a call that failed with `status` (0: no
    response), or None when retrying cannot help (a 404, bad credentials, a missing permission)."""
    headers = {k.lower(): v for k, v in headers.items()}
    rate_limited = status == 429 or (status == 403 and "rate limit" in message.lower())
    if rate_limited:
        if headers.get("retry-after", "").strip().isdigit():
            return float(headers["retry-after"])
        if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset", "").isdigit():
            return max(1.0, float(headers["x-ratelimit-reset"]) - (time.time() if now is None else now) + 1.0)
        return 60.0 * 2**attempt
    if status == 0 or status >= 500:
        if headers.get("retry-after", "").strip().isdigit():
            return float(headers["retry-after"])
        return float(2**attempt)
    return None


def request(api: Api, method: str, path: str, body: Any = None) -> Any:
    """Call one endpoint and return the decoded JSON; transient failures are retried
    (`retry_wait`); raise GitHubError when the call fails for good."""
    for attempt in range(api.retries + 1):
        try:
            return _request_once(api, method, path, body)
        except _Failed as failed:
            wait = retry_wait(failed.error.status, failed.headers, failed.error.message, attempt)
            if wait is None or attempt == api.retries or wait > api.max_wait_s:
                raise failed.error from None
            api.sleep(wait)
    raise AssertionError("unreachable")


class _Failed(Exception):
    def __init__(self, error: GitHubError, headers: Mapping[str, str]) -> None:
        self.error, self.headers = error, headers


class _SameHostAuth(urllib.request.HTTPRedirectHandler):
    """Follows a redirect as urllib does, but sends the token on only to the host it was meant
    for: urllib copies every header onto the redirected request, so a redirect to another host
    (a hostile or hijacked GITHUB_API_URL) would hand it the token. GitHub's own redirects (a
    renamed repository) stay on its host and keep it."""

    def redirect_request(self, req, fp, code, msg, hdrs, newurl):
        new = super().redirect_request(req, fp, code, msg, hdrs, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


_OPENER = urllib.request.build_opener(_SameHostAuth)


def _request_once(api: Api, method: str, path: str, body: Any) -> Any:
    url = f"{api.url}{path}"
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method=method, headers=headers(api.token))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=api.timeout_s) as response:
            raw = response.read()
    except urllib.error.HTTPError as err:
        raise _Failed(GitHubError(method, url, err.code, _error_message(err.read())), dict(err.headers or {})) from None
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise _Failed(GitHubError(method, url, 0, str(getattr(err, "reason", err))), {}) from None
    return json.loads(raw.decode("utf-8")) if raw else None


def list_issue_comments(api: Api, repo: str, number: int) -> list[dict]:
    """Every comment of issue or PR `number` in `repo` ("owner/name"), page by page."""
    comments: list[dict] = []
    for page in range(1, MAX_PAGES + 1):
        batch = request(api, "GET", f"/repos/{repo}/issues/{number}/comments?per_page={PER_PAGE}&page={page}")
        comments.extend(batch)
        # A short page is the last one; this saves the extra empty request.
        if len(batch) < PER_PAGE:
            break
    return comments


def bounded(body: str, limit: int = MAX_BODY_CHARS) -> str:
    """`body` cut to what GitHub accepts, saying how much was cut."""
    if len(body) <= limit:
        return body
    note = f"\n\n… ({len(body) - limit:,} characters cut: see the workflow run's summary)\n"
    return body[: limit - len(note)] + note


def upsert_comment(api: Api, repo: str, number: int, body: str, marker: str = MARKER,
                   author: str = BOT_LOGIN) -> CommentResult:
    """Create flopwatch's comment on PR `number`, or update the one `author` (the bot) wrote
    with `marker`; a comment of anyone else is never edited, marker or not.

    The marker is always the comment's first line, so that the next call finds the comment.
    It is prepended even when the body carries one already: the body is the PR's to shape (its
    title, branch and kernel names, or the whole file in the PR workflow), so a marker of its own,
    after a line of its choosing, must not stand in for the bot's. When several of the bot's
    comments begin with the marker (e.g. a race between two runs), the oldest is updated.
    """
    body = bounded(f"{marker}\n{body}")
    for comment in list_issue_comments(api, repo, number):
        if (comment.get("user") or {}).get("login") == author and (comment.get("body") or "").startswith(marker):
            updated = request(api, "PATCH", f"/repos/{repo}/issues/comments/{comment['id']}", {"body": body})
            return CommentResult(id=int(updated["id"]), html_url=updated.get("html_url", ""), created=False)
    created = request(api, "POST", f"/repos/{repo}/issues/{number}/comments", {"body": body})
    return CommentResult(id=int(created["id"]), html_url=created.get("html_url", ""), created=True)


def write_step_summary(markdown: str, env: Mapping[str, str] | None = None) -> bool:
    """Append markdown to the job summary file named by $GITHUB_STEP_SUMMARY.

    Returns False (and writes nothing) outside GitHub Actions, where the variable is unset.
    """
    env = os.environ if env is None else env
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return True


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """`python -m pipeline.ci.github comment --pr N --body-file F`: post or update the
    comparison comment from a file, with GITHUB_TOKEN and GITHUB_REPOSITORY from the environment
    (never from the command line). Exit 2 on a usage error, 1 when the API call fails."""
    import argparse
    import sys

    env = os.environ if env is None else env
    p = argparse.ArgumentParser(prog="python -m pipeline.ci.github")
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("comment", help="create or update flopwatch's comparison comment on a pull request")
    c.add_argument("--pr", type=int, required=True, help="pull request number")
    c.add_argument("--body-file", required=True, help="markdown to post (e.g. flopwatch compare's output)")
    c.add_argument("--repo-slug", default=env.get("GITHUB_REPOSITORY"), help="owner/name (default: $GITHUB_REPOSITORY)")
    c.add_argument("--author", default=BOT_LOGIN, help=f"login the token comments as (default: {BOT_LOGIN})")
    args = p.parse_args(argv)
    if not args.repo_slug:
        print("github: error: --repo-slug or $GITHUB_REPOSITORY is needed", file=sys.stderr)
        return 2
    try:
        with open(args.body_file, encoding="utf-8", errors="replace") as handle:
            body = handle.read()
    except OSError as exc:
        print(f"github: error: {args.body_file}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        result = upsert_comment(api_from_env(env), args.repo_slug, args.pr, body, author=args.author)
    except GitHubError as exc:
        print(f"github: error: {exc}", file=sys.stderr)
        return 1
    print(f"PR comment {'created' if result.created else 'updated'}: {result.html_url}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
