"""Which cluster address a command uses, and the one-line answers when it cannot be reached or
is not a Ray head. Real sockets on this machine; no Ray cluster (test_ray_token_cluster.py has
the real one with authentication)."""

from __future__ import annotations

import socket
import threading

import git
import pytest

from pipeline import cli
from pipeline.fleet.ray_access import (
    Address,
    ClusterError,
    parse_address,
    refused_message,
    resolve_address,
    tcp_problem,
)


def test_the_flag_wins_then_flopwatch_variable_then_rays():
    env = {"FLOPWATCH_RAY_ADDRESS": "10.0.0.2:6379", "RAY_ADDRESS": "10.0.0.3:6379"}
    assert resolve_address("10.0.0.1:6380", env) == Address("10.0.0.1", 6380, "--ray-address")
    assert resolve_address(None, env) == Address("10.0.0.2", 6379, "FLOPWATCH_RAY_ADDRESS")
    assert resolve_address(None, {"RAY_ADDRESS": "head.example:7000"}) == Address("head.example", 7000, "RAY_ADDRESS")
    assert resolve_address(None, {"RAY_ADDRESS": " "}) is None
    assert resolve_address(None, {}) is None


def test_local_means_a_local_ray_as_it_does_for_ray_init():
    assert resolve_address("local", {"RAY_ADDRESS": "10.0.0.3:6379"}) is None
    assert resolve_address(None, {"RAY_ADDRESS": "local"}) is None


@pytest.mark.parametrize(("text", "words"), [
    ("ray://head:10001", "not a URL"),
    ("head", "is not HOST:PORT"),
    ("head:port", "is not HOST:PORT"),
    ("head:70000", "is not HOST:PORT"),
    (":6379", "is not HOST:PORT"),
])
def test_a_malformed_address_is_named_with_its_source(text, words):
    with pytest.raises(ClusterError) as err:
        resolve_address(None, {"RAY_ADDRESS": text})
    assert str(err.value).startswith(f"RAY_ADDRESS={text!r}") and words in str(err.value)


def test_auto_is_refused_rather_than_guessed():
    with pytest.raises(ClusterError, match="does not guess"):
        resolve_address("auto", {})


def test_ipv6_in_brackets():
    assert parse_address("[::1]:6379", "x") == Address("::1", 6379, "x")
    assert str(Address("::1", 6379, "x")) == "[::1]:6379"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_once(reply: bytes) -> tuple[int, threading.Thread]:
    """A listener on a free port that answers the first connection with `reply`."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer():
        conn, _ = server.accept()
        with conn:
            conn.recv(64)
            conn.sendall(reply)
        server.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return server.getsockname()[1], thread


def test_a_closed_port_is_unreachable_in_one_line():
    address = Address("127.0.0.1", _free_port(), "--ray-address")
    problem = tcp_problem(address)
    assert problem.startswith(f"cannot reach a Ray cluster at {address} (from --ray-address): connection refused")
    assert "\n" not in problem


def test_a_web_server_is_not_taken_for_a_ray_head():
    port, thread = _serve_once(b"HTTP/1.0 400 Bad Request\r\n\r\n")
    problem = tcp_problem(Address("127.0.0.1", port, "RAY_ADDRESS"))
    thread.join(timeout=30)
    assert problem and "answers, but not as a Ray cluster's head" in problem and "GCS port" in problem


def test_an_http2_server_passes_the_reachability_check():
    # The SETTINGS frame a gRPC server sends first: length 0, type 4, flags 0, stream 0.
    port, thread = _serve_once(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    assert tcp_problem(Address("127.0.0.1", port, "RAY_ADDRESS")) is None
    thread.join(timeout=30)


def test_the_refusal_says_what_to_set():
    line = refused_message(Address("10.0.0.1", 6379, "RAY_ADDRESS"), None)
    assert "refused this driver" in line and "RAY_AUTH_MODE is not set here" in line
    assert "RAY_AUTH_MODE=token" in line and "RAY_AUTH_TOKEN_PATH" in line
    assert "RAY_AUTH_MODE=disabled here" in refused_message(Address("h", 1, "x"), "disabled")


def test_cli_exits_2_with_one_line_when_the_cluster_is_unreachable(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    git.Repo.init(tmp_path)
    port = _free_port()
    code = cli.main(["run", "--repo", str(tmp_path), "--ray-address", f"127.0.0.1:{port}", "--no-report"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [(f"flopwatch: error: cannot reach a Ray cluster at 127.0.0.1:{port} (from --ray-address): "
                    f"connection refused; start its head with `ray start --head --port {port}` there, or unset "
                    f"--ray-address for a local Ray")]


def test_num_gpus_with_an_address_is_a_usage_error(tmp_path, capsys, monkeypatch):
    git.Repo.init(tmp_path)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert cli.main(["run", "--repo", str(tmp_path), "--num-gpus", "1", "--no-report"]) == 2
    assert "--num-gpus is for a local Ray" in capsys.readouterr().err
