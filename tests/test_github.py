"""Tests of pipeline.ci.github against a local HTTP server that mimics the issue-comments API."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline.ci import github
from pipeline.ci.github import (
    BOT_LOGIN,
    MARKER,
    Api,
    GitHubError,
    api_from_env,
    retry_wait,
    upsert_comment,
    write_step_summary,
)

TOKEN = "test-token-123"
BOT = {"login": BOT_LOGIN, "type": "Bot"}
PERSON = {"login": "pr-author", "type": "User"}


class FakeGitHub:
    """Issue comments held in memory; every request is recorded as (method, path, headers, body)."""

    def __init__(self, comments=None):
        self.comments = list(comments or [])
        self.requests = []
        self.next_id = 1000
        self.failures = []  # (status, payload, headers) answered before any real handling

    def handle(self, method, path, headers, body):
        # Header names are case-insensitive (urllib sends "X-github-api-version").
        headers = {name.lower(): value for name, value in headers.items()}
        self.requests.append((method, path, headers, body))
        if self.failures:
            return self.failures.pop(0)
        if "/repos/acme/locked/" in path:
            return 403, {
                "message": "Resource not accessible by integration",
                "documentation_url": "https://docs.example/x",
            }
        if headers.get("authorization") != f"Bearer {TOKEN}":
            return 401, {"message": "Bad credentials"}
        listing = re.fullmatch(r"/repos/acme/kernels/issues/(\d+)/comments\?per_page=(\d+)&page=(\d+)", path)
        if method == "GET" and listing:
            per_page, page = int(listing.group(2)), int(listing.group(3))
            return 200, self.comments[(page - 1) * per_page : page * per_page]
        if method == "POST" and re.fullmatch(r"/repos/acme/kernels/issues/\d+/comments", path):
            self.next_id += 1
            # The API records who wrote it: the token's identity, the bot here.
            comment = {"id": self.next_id, "body": body["body"], "html_url": f"https://gh/c/{self.next_id}",
                       "user": BOT}
            self.comments.append(comment)
            return 201, comment
        patch = re.fullmatch(r"/repos/acme/kernels/issues/comments/(\d+)", path)
        if method == "PATCH" and patch:
            for comment in self.comments:
                if comment["id"] == int(patch.group(1)):
                    comment["body"] = body["body"]
                    return 200, comment
        return 404, {"message": "Not Found"}


@pytest.fixture
def server():
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, payload, *extra = fake.handle(self.command, self.path, self.headers, body)
            raw = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (extra[0] if extra else {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, *args):  # keep pytest output clean
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.slept = []
    fake.api = Api(token=TOKEN, url=f"http://127.0.0.1:{httpd.server_address[1]}", timeout_s=5,
                   sleep=fake.slept.append)
    yield fake
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def test_first_call_creates_second_updates_the_same_comment(server):
    first = upsert_comment(server.api, "acme/kernels", 7, "## flopwatch\nslower: gemm 4096 (-4.8%)")
    assert first.created
    second = upsert_comment(server.api, "acme/kernels", 7, "## flopwatch\nsame: gemm 4096")
    assert not second.created and second.id == first.id
    assert len(server.comments) == 1
    assert server.comments[0]["body"] == f"{MARKER}\n## flopwatch\nsame: gemm 4096"
    methods = [(m, p.split("?")[0]) for m, p, _, _ in server.requests]
    assert methods == [
        ("GET", "/repos/acme/kernels/issues/7/comments"),
        ("POST", "/repos/acme/kernels/issues/7/comments"),
        ("GET", "/repos/acme/kernels/issues/7/comments"),
        ("PATCH", f"/repos/acme/kernels/issues/comments/{first.id}"),
    ]


def test_headers_carry_the_token_and_api_version(server):
    upsert_comment(server.api, "acme/kernels", 1, "hello")
    for _, _, headers, _ in server.requests:
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert headers["accept"] == "application/vnd.github+json"
        assert headers["x-github-api-version"] == "2022-11-28"


def test_marker_comment_on_a_later_page_is_found(server):
    server.comments = [{"id": i, "body": f"review {i}", "user": PERSON} for i in range(1, 151)]
    server.comments[120]["user"] = BOT
    server.comments[120]["body"] = f"{MARKER}\nold results"
    result = upsert_comment(server.api, "acme/kernels", 3, "new results")
    assert not result.created and result.id == 121
    assert len(server.comments) == 150
    pages = [p for m, p, _, _ in server.requests if m == "GET"]
    assert [p.rsplit("page=", 1)[1] for p in pages] == ["1", "2"]


def test_a_marker_in_someone_elses_comment_is_left_alone(server):
    # A PR author pastes the marker to have the bot overwrite (or vouch for) their text.
    server.comments = [{"id": 5, "body": f"{MARKER}\nall faster!", "user": PERSON}]
    result = upsert_comment(server.api, "acme/kernels", 3, "measured: same")
    assert result.created and result.id != 5
    assert server.comments[0]["body"] == f"{MARKER}\nall faster!"
    assert [m for m, _, _, _ in server.requests] == ["GET", "POST"]


def test_the_bots_comment_is_found_by_its_first_line_only(server):
    """The bot's login is shared by every workflow of the repository (github-actions[bot]): a
    comment of its that only carries the marker further down (another workflow echoing the PR's
    text, a quoted comment) is not flopwatch's and is never overwritten."""
    echoed = f"## lint report\nthe PR description says:\n{MARKER}\nall faster!"
    server.comments = [{"id": 5, "body": echoed, "user": BOT},
                       {"id": 6, "body": f"{MARKER}\nold results", "user": BOT}]
    result = upsert_comment(server.api, "acme/kernels", 3, "new results")
    assert not result.created and result.id == 6
    assert server.comments[0]["body"] == echoed
    server.comments = [{"id": 5, "body": echoed, "user": BOT}]
    result = upsert_comment(server.api, "acme/kernels", 3, "new results")
    assert result.created and server.comments[0]["body"] == echoed


@pytest.mark.parametrize("body", [
    f"{MARKER}\nall faster!",  # the PR's file begins with a marker of its own
    f"all faster, approved by the maintainers\n{MARKER}\n## flopwatch",  # a line of its choosing before one
    f"\r\n{MARKER}\r\nall faster!",
    "",
])
def test_the_marker_is_the_comments_first_line_whatever_the_body(server, body):
    """The body is the PR's to shape (the PR workflow posts the file its bench job uploaded):
    whatever it holds, the bot's comment begins with the bot's marker line."""
    first = upsert_comment(server.api, "acme/kernels", 7, body)
    posted = server.comments[0]["body"]
    assert posted.split("\n", 1)[0] == MARKER and posted == f"{MARKER}\n{body}"
    again = upsert_comment(server.api, "acme/kernels", 7, "measured: same")
    assert not again.created and again.id == first.id and len(server.comments) == 1


def test_a_pr_title_branch_or_variant_name_cannot_move_the_marker(server):
    """Names with a newline and a fake marker, rendered as `flopwatch compare --pr` renders them."""
    from pipeline.history import compare as cmp

    fake = f"fix\n{MARKER}\nall faster"
    report = cmp.Report("a" * 40, fake, "b" * 40, f"feature/x\n{MARKER}", None, 3,
                        (cmp.Row(f"gemm\n{MARKER}", "64x64x64", "float32", "cpu", "same", None, None),))
    upsert_comment(server.api, "acme/kernels", 7, cmp.render_markdown(report))
    lines = server.comments[0]["body"].splitlines()
    assert lines[0] == MARKER and MARKER not in "\n".join(lines[1:])
    assert lines[1] == "### flopwatch: no regressions"


def test_a_body_over_githubs_limit_is_cut_and_says_so(server):
    upsert_comment(server.api, "acme/kernels", 3, "x" * 100_000)
    posted = server.comments[0]["body"]
    assert len(posted) == github.MAX_BODY_CHARS and "characters cut" in posted


def test_comment_command_posts_a_file_with_the_token_from_the_environment(server, tmp_path, capsys):
    body = tmp_path / "comparison.md"
    body.write_text("## flopwatch\nslower: gemm")
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.api.url, "GITHUB_REPOSITORY": "acme/kernels"}
    assert github.main(["comment", "--pr", "9", "--body-file", str(body)], env) == 0
    assert server.comments[0]["body"] == f"{MARKER}\n## flopwatch\nslower: gemm"
    assert "PR comment created" in capsys.readouterr().out
    assert github.main(["comment", "--pr", "9", "--body-file", str(tmp_path / "missing.md")], env) == 2
    assert github.main(["comment", "--pr", "9", "--body-file", str(body)], {**env, "GITHUB_TOKEN": "wrong"}) == 1
    assert "401: Bad credentials" in capsys.readouterr().err


def test_http_error_raises_with_status_and_message(server):
    with pytest.raises(GitHubError, match="HTTP 403: Resource not accessible by integration") as info:
        upsert_comment(server.api, "acme/locked", 7, "x")
    assert info.value.status == 403 and len(server.requests) == 1 and server.slept == []
    bad_token = Api(token="wrong", url=server.api.url, timeout_s=5)
    with pytest.raises(GitHubError, match="401: Bad credentials"):
        upsert_comment(bad_token, "acme/kernels", 7, "x")


def test_unreachable_server_raises_github_error_after_the_retries():
    slept = []
    with pytest.raises(GitHubError, match="HTTP 0"):
        upsert_comment(Api(token=TOKEN, url="http://127.0.0.1:9", timeout_s=2, sleep=slept.append),
                       "acme/kernels", 1, "x")
    assert slept == [1.0, 2.0, 4.0, 8.0]


def test_one_bad_gateway_does_not_fail_the_publish(server):
    server.failures = [(502, {"message": "Server Error"})]
    result = upsert_comment(server.api, "acme/kernels", 7, "## flopwatch")
    assert result.created and len(server.comments) == 1
    assert server.slept == [1.0]
    assert [m for m, *_ in server.requests] == ["GET", "GET", "POST"]


def test_rate_limits_wait_as_github_says(server):
    server.failures = [
        (429, {"message": "Too Many Requests"}, {"Retry-After": "7"}),
        (403, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}),
        (503, {"message": "Service Unavailable"}),
    ]
    upsert_comment(server.api, "acme/kernels", 7, "x")
    # retry-after's seconds; a secondary limit without headers: a minute, doubled per attempt
    assert server.slept == [7.0, 120.0, 4.0]
    assert len(server.comments) == 1


def test_a_failure_that_persists_is_raised_after_the_retries(server):
    server.failures = [(502, {"message": "Bad Gateway"})] * 5
    with pytest.raises(GitHubError, match="HTTP 502: Bad Gateway"):
        upsert_comment(server.api, "acme/kernels", 7, "x")
    assert server.slept == [1.0, 2.0, 4.0, 8.0] and len(server.requests) == 5 and not server.comments


def test_a_wait_past_the_limit_is_not_waited(server):
    server.failures = [(429, {"message": "Too Many Requests"}, {"Retry-After": "3600"})]
    with pytest.raises(GitHubError, match="HTTP 429"):
        upsert_comment(server.api, "acme/kernels", 7, "x")
    assert server.slept == [] and len(server.requests) == 1


def test_retry_wait_reads_the_rate_limit_reset_and_leaves_permanent_errors_alone():
    exhausted = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1000"}
    assert retry_wait(403, exhausted, "API rate limit exceeded for installation", 0, now=970.0) == 31.0
    assert retry_wait(403, {}, "Resource not accessible by integration", 0) is None
    assert retry_wait(404, {}, "Not Found", 0) is None
    assert retry_wait(422, {}, "Validation Failed", 0) is None
    assert retry_wait(500, {}, "", 2) == 4.0


def test_api_from_env_honours_github_api_url():
    api = api_from_env({"GITHUB_TOKEN": "t", "GITHUB_API_URL": "https://ghe.example/api/v3/"})
    assert (api.token, api.url) == ("t", "https://ghe.example/api/v3")
    assert api_from_env({"GITHUB_TOKEN": "t"}).url == "https://api.github.com"
    with pytest.raises(GitHubError, match="GITHUB_TOKEN"):
        api_from_env({})


def test_write_step_summary_appends(tmp_path):
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    assert write_step_summary("# one", env)
    assert write_step_summary("two\n", env)
    assert summary.read_text() == "# one\ntwo\n"
    assert not write_step_summary("ignored", {})



def _recording_server(respond):
    """A local server answering every GET with `respond(handler)`; returns (the server, the
    headers of each request it got)."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append({k.lower(): v for k, v in self.headers.items()})
            respond(self)

        def log_message(self, *args):  # keep pytest output clean
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, seen


def _no_comments(handler):
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    handler.wfile.write(b"[]")


def test_a_redirect_to_another_host_does_not_carry_the_token():
    """Workflows review (2026-12-06): urllib copies every header onto a redirected request, so an
    API URL answering with a redirect to another host handed that host the token. A redirect on
    the same host (GitHub's own, for a renamed repository) still carries it."""
    other, other_seen = _recording_server(_no_comments)

    def redirect(handler):
        if handler.path.startswith("/moved/"):
            return _no_comments(handler)
        port = (other if "/away/" in handler.path else handler.server).server_address[1]
        handler.send_response(301)
        handler.send_header("Location", f"http://127.0.0.1:{port}/moved{handler.path}")
        handler.end_headers()

    first, first_seen = _recording_server(redirect)
    api = Api(token=TOKEN, url=f"http://127.0.0.1:{first.server_address[1]}", timeout_s=5)
    try:
        assert github.list_issue_comments(api, "acme/same", 1) == []
        assert [h.get("authorization") for h in first_seen] == [f"Bearer {TOKEN}"] * 2  # the same host
        first_seen.clear()
        assert github.list_issue_comments(api, "acme/away", 1) == []
        assert [h.get("authorization") for h in first_seen] == [f"Bearer {TOKEN}"]
        assert len(other_seen) == 1 and "authorization" not in other_seen[0], other_seen  # another host
    finally:
        first.shutdown()
        other.shutdown()
