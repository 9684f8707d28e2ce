"""Reaching a Ray cluster by address: which address this command uses, and whether this driver
can reach that cluster and is let in, said in one line before Ray's own connect starts.

Why check first: `ray.init(address=...)` retries for 20 s against a cluster that refuses the
driver's token ("Authentication token is missing or incorrect") and then raises a bare
ConnectionError; against a port where nothing Ray answers it waits 40 s. Three quick probes say
what is wrong within a few seconds instead: a TCP connect (is anything there), the HTTP/2
preface (a gRPC server answers with a SETTINGS frame; Ray's GCS speaks gRPC, a web server or a
closed port does not), and one GCS call (does the cluster accept this driver's token).

Ray reads its authentication settings from the environment once, when `ray` is imported
(RAY_AUTH_MODE, then the token from RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token;
https://docs.ray.io/en/latest/ray-security/token-auth.html). With an explicit address Ray never
turns token mode on by itself, so a driver of a token cluster needs RAY_AUTH_MODE=token in its
environment; the messages say so. The token itself is never read, printed or stored here.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

# Where an address may come from, first match wins.
ADDRESS_VARIABLES = ("FLOPWATCH_RAY_ADDRESS", "RAY_ADDRESS")
# A TCP connect that takes longer than this is as good as unreachable for an interactive command.
CONNECT_TIMEOUT_S = 5.0
# The client preface every HTTP/2 connection starts with, then an empty SETTINGS frame
# (RFC 9113 §3.4); a gRPC server answers with its own SETTINGS frame (type 0x4).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x4
SET_TOKEN = ("set RAY_AUTH_MODE=token and give the cluster's token in RAY_AUTH_TOKEN_PATH (a file, "
             "mode 600) or ~/.ray/auth_token, as on the cluster's nodes")


class ClusterError(RuntimeError):
    """Ray cannot be used as asked (unreachable, refused, misconfigured); the CLI prints the
    one-line message and exits 2."""


@dataclass(frozen=True)
class Address:
    """Where to find a cluster, and who said so (a flag or an environment variable)."""

    host: str
    port: int
    source: str

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str, source: str) -> Address:
    """HOST:PORT (or [IPv6]:PORT) of a cluster's head, as `ray start --head --port` opened it."""
    value = text.strip()
    if "://" in value:
        raise ClusterError(f"{source}={text!r}: give the head's HOST:PORT (the GCS port of `ray start --head "
                           f"--port`, 6379 by default), not a URL; Ray Client (ray://) is not supported")
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"{source}={text!r} is not HOST:PORT (e.g. 10.0.0.5:6379, the head's "
                           f"`ray start --head --port`)")
    return Address(host, int(port), source)


def resolve_address(flag: str | None, env: Mapping[str, str] | None = None) -> Address | None:
    """The cluster this command joins: --ray-address, else $FLOPWATCH_RAY_ADDRESS, else
    $RAY_ADDRESS; None when none is set (then flopwatch uses a local Ray of its own).
    "local" in any of them also means a local Ray, as it does for `ray.init`."""
    env = os.environ if env is None else env
    candidates = [("--ray-address", flag)] + [(name, env.get(name)) for name in ADDRESS_VARIABLES]
    for source, value in candidates:
        if value is None or not value.strip():
            continue
        if value.strip() == "local":
            return None
        if value.strip() == "auto":
            raise ClusterError(f"{source}=auto: flopwatch does not guess which cluster to join; give the "
                               f"head's HOST:PORT, or leave it unset for a local Ray")
        return parse_address(value, source)
    return None


def unreachable_message(address: Address, reason: str) -> str:
    return (f"cannot reach a Ray cluster at {address} (from {address.source}): {reason}; start its head "
            f"with `ray start --head --port {address.port}` there, or unset {address.source} for a local Ray")


def not_ray_message(address: Address) -> str:
    return (f"{address} (from {address.source}) answers, but not as a Ray cluster's head; give the GCS port "
            f"of `ray start --head --port` (6379 by default), not the dashboard or client port")


def refused_message(address: Address, auth_mode: str | None) -> str:
    mode = "RAY_AUTH_MODE is not set here" if not auth_mode else f"RAY_AUTH_MODE={auth_mode} here"
    return (f"the Ray cluster at {address} (from {address.source}) refused this driver: authentication token "
            f"missing or wrong ({mode}); {SET_TOKEN}")


def tcp_problem(address: Address, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing can be reached at `address`, or None when something answers there and
    speaks HTTP/2 (as Ray's GCS does)."""
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(_H2_PREFACE)
            header = _recv_exactly(sock, 9)
    except socket.gaierror as exc:
        return unreachable_message(address, f"unknown host ({exc.strerror})")
    except TimeoutError:
        return unreachable_message(address, f"no answer within {timeout_s:g} s")
    except OSError as exc:
        return unreachable_message(address, (exc.strerror or str(exc)).lower())
    if len(header) < 9 or header[3] != _H2_SETTINGS:
        return not_ray_message(address)
    return None


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


def admission_problem(address: Address, env: Mapping[str, str] | None = None) -> str | None:
    """Why the cluster's GCS does not accept this driver, or None when it does. One GCS call:
    it answers at once, with an authentication error when the token is missing or wrong."""
    from ray._raylet import GcsClient
    from ray.exceptions import AuthenticationError, RpcError

    env = os.environ if env is None else env
    try:
        with _quiet_stderr():
            GcsClient(address=f"{address.host}:{address.port}")
    except AuthenticationError:
        return refused_message(address, env.get("RAY_AUTH_MODE"))
    except RpcError as exc:
        return f"{not_ray_message(address)} (its answer: {str(exc).strip() or type(exc).__name__})"
    return None


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Keep Ray's C++ log lines of a failed probe ("Failed to get cluster ID from GCS server")
    off the terminal: the probe's outcome is reported in one line of our own. Ray's C++ side
    writes to file descriptor 2 directly, so that is what is redirected."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def check(address: Address) -> None:
    """Raise ClusterError with one line unless this driver can reach and join `address`."""
    problem = tcp_problem(address) or admission_problem(address)
    if problem:
        raise ClusterError(problem)
