"""A recorded-response GitHub REST API on loopback: an http.server that answers each GET path
(query string ignored: pages and filters ask the same question) with the status and JSON body
recorded for it in tests/fixtures/github_api/*.json, 404 for any other path, 401 for a request
without the expected bearer token. Every request is kept (headers lower-cased), so a test can see what was asked.
Point a client at `server.url`, a GitHub Enterprise style base URL (`http://127.0.0.1:PORT/api/v3`)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self
from urllib.parse import urlsplit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "github_api"
TOKEN = "ghp_recorded0000000000000000000000000000"
PREFIX = "/api/v3"  # GitHub Enterprise Server's API lives below this path
NOT_FOUND = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}


def recording(*names: str) -> dict:
    answers: dict = {}
    for name in names:
        answers.update(json.loads((FIXTURES / name).read_text()))
    return answers


class RecordedGitHub:
    def __init__(self, answers: dict, token: str = TOKEN) -> None:
        self.answers, self.token, self.requests = answers, token, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # http.server's name for a GET handler
                path = urlsplit(self.path).path.removeprefix(PREFIX)
                outer.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.headers.get("Authorization") != f"Bearer {outer.token}":
                    status, body = 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest",
                                         "status": "401"}
                else:
                    answer = outer.answers.get(path, {"status": 404, "body": NOT_FOUND})
                    status, body = answer["status"], answer["body"]
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{PREFIX}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def paths(self) -> list[str]:
        return [urlsplit(p).path.removeprefix(PREFIX) for _m, p, _h in self.requests]

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
