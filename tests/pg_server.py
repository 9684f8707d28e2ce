"""A real PostgreSQL server for the store tests, started and stopped by the tests themselves.

pytest-postgresql's `PostgreSQLExecutor` runs Debian's `pg_ctl` (initdb, start, stop) on a
private port and data folder; its `DatabaseJanitor` makes a fresh database per test. PostgreSQL
refuses to run as root, and CI runs as root: then every `pg_ctl` call goes through
`runuser -u postgres` (the account Debian's `postgresql` package creates), and the server's
folder belongs to that account. Nothing here touches a server the machine already runs.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import stat
import tempfile
from pathlib import Path

SERVER_USER = "flopwatch"  # the superuser initdb creates in the private cluster


def find_pg_ctl() -> str | None:
    """Debian keeps the server binaries out of PATH, in /usr/lib/postgresql/<major>/bin."""
    found = shutil.which("pg_ctl")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return candidates[-1] if candidates else None


def why_not_available() -> str | None:
    """None when a server can be started here; else the reason (the tests skip with it)."""
    if find_pg_ctl() is None:
        return "PostgreSQL is not installed (apt-get install postgresql; scripts/setup.sh does)"
    try:
        import pytest_postgresql  # noqa: F401
    except ImportError:
        return "pytest-postgresql is not installed (pip install -e .[test])"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a 'postgres' account to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser (util-linux) to start the server as 'postgres'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One private server: `start()`, then `database()` per test, then `stop()`."""

    def __init__(self) -> None:
        from pytest_postgresql.executors.proc import PostgreSQLExecutor

        pg_ctl = find_pg_ctl()
        self.home = Path(tempfile.mkdtemp(prefix="flopwatch-pg-"))  # data, socket, log
        self.port = _free_port()
        executable = pg_ctl
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.home, account.pw_uid, account.pw_gid)
            # The wrapper lives apart from the server's folder: the postgres account may not edit it.
            self.wrapper_dir = Path(tempfile.mkdtemp(prefix="flopwatch-pgctl-"))
            os.chmod(self.wrapper_dir, 0o755)
            executable = str(self.wrapper_dir / "pg_ctl")
            Path(executable).write_text(f'#!/bin/sh\nexec runuser -u postgres -- "{pg_ctl}" "$@"\n')
            os.chmod(executable, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        else:
            self.wrapper_dir = None
        self.executor = PostgreSQLExecutor(
            executable=executable, host="127.0.0.1", port=self.port, datadir=str(self.home / "data"),
            unixsocketdir=str(self.home), logfile=str(self.home / "server.log"), startparams="-w",
            dbname="flopwatch_tests", user=SERVER_USER, password=None, timeout=120)

    def start(self) -> Server:
        self.executor.start()
        return self

    def stop(self) -> None:
        try:
            self.executor.stop()
        finally:
            shutil.rmtree(self.home, ignore_errors=True)
            if self.wrapper_dir:
                shutil.rmtree(self.wrapper_dir, ignore_errors=True)

    def url(self, dbname: str) -> str:
        return f"postgresql://{SERVER_USER}@127.0.0.1:{self.port}/{dbname}"

    def database(self, dbname: str):
        """A context manager that creates `dbname` and drops it afterwards (connections included)."""
        from pytest_postgresql.janitor import DatabaseJanitor

        return DatabaseJanitor(user=SERVER_USER, host="127.0.0.1", port=self.port, dbname=dbname)


class NamespacedServer:
    """A private server inside a lab node's network namespace (tests/netlab.py), listening on
    the node's address only: a client reaches it over the lab's links, so a cut link drops its
    connections as a real network does. The test process itself talks to it through its Unix
    socket (a file: namespaces do not separate those), to make databases and count rows."""

    def __init__(self, node, port: int = 5432) -> None:
        self.node, self.port = node, port
        self.home = Path(tempfile.mkdtemp(prefix="flopwatch-pgns-"))
        self.data = self.home / "data"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            account = pwd.getpwnam("postgres")
            os.chown(self.home, account.pw_uid, account.pw_gid)

    def _pg_ctl(self, *args: str) -> list[str]:
        argv = [find_pg_ctl(), *args]
        return (["runuser", "-u", "postgres", "--"] + argv) if self.as_root else argv

    def start(self) -> NamespacedServer:
        import subprocess

        env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8")
        subprocess.run(self._pg_ctl("initdb", "-D", str(self.data), "-o", f"--username={SERVER_USER} --auth=trust"),
                       check=True, capture_output=True, timeout=120, env=env)
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {self.node.address.rsplit('.', 1)[0]}.0/24 trust\n")
        options = (f"-p {self.port} -c listen_addresses={self.node.address} "
                   f"-c unix_socket_directories={self.home}")
        subprocess.run(self.node.argv(*self._pg_ctl("start", "-w", "-D", str(self.data), "-o", options,
                                                    "-l", str(self.home / "server.log"))),
                       check=True, capture_output=True, timeout=120, env=env)
        return self

    def stop(self) -> None:
        import subprocess

        try:
            subprocess.run(self._pg_ctl("stop", "-D", str(self.data), "-m", "immediate"), capture_output=True,
                           timeout=60, check=False)
        finally:
            shutil.rmtree(self.home, ignore_errors=True)

    def url(self, dbname: str) -> str:
        """The address a client in the lab uses."""
        return f"postgresql://{SERVER_USER}@{self.node.address}:{self.port}/{dbname}"

    def local(self, dbname: str = "postgres"):
        """A connection from this process, through the Unix socket (autocommit)."""
        import psycopg

        return psycopg.connect(host=str(self.home), port=self.port, user=SERVER_USER, dbname=dbname, autocommit=True)

    def create(self, dbname: str) -> str:
        with self.local() as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        return self.url(dbname)
