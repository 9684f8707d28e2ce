"""Where the store lives: `--store URL`, `FLOPWATCH_STORE`, or the repository's default file.

    sqlite:///relative/path.db      a file, relative to the current folder
    sqlite:////abs/path.db          a file (four slashes: the path is absolute)
    /abs/path.db, path.db           a file (a plain path means SQLite)
    postgresql://user:pw@host:5432/db   a PostgreSQL database (driver: psycopg 3)

The build cache has a location of its own (`--cache DIR`, `FLOPWATCH_CACHE`): a folder, by
default `<repo>/.flopwatch/cache`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

STORE_ENV = "FLOPWATCH_STORE"
CACHE_ENV = "FLOPWATCH_CACHE"
DEFAULT_FILE = "results.db"  # inside the repository's .flopwatch folder
_POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


class LocationError(ValueError):
    """A store URL flopwatch cannot use; the CLI prints it and exits 2."""


@dataclass(frozen=True)
class StoreLocation:
    """A parsed store address. `url` carries the password, `shown` never does."""

    url: sa.URL

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name()

    @property
    def path(self) -> Path | None:
        """The database file of a SQLite store; None for a server."""
        return Path(self.url.database) if self.dialect == "sqlite" else None

    @property
    def shown(self) -> str:
        """What messages print: the file of a SQLite store, the URL without its password otherwise."""
        if self.path is not None:
            return str(self.path)
        return self.url.set(drivername="postgresql").render_as_string(hide_password=True)


def parse(text: str) -> StoreLocation:
    """A store address from `--store` / `FLOPWATCH_STORE` text."""
    text = text.strip()
    if not text:
        raise LocationError("the store location is empty: give a path, sqlite:///PATH or postgresql://…")
    if "://" not in text:
        return sqlite_file(Path(text))
    try:
        url = make_url(text)
    except ArgumentError as exc:
        raise LocationError(f"{text!r} is not a store URL: {exc}") from None
    scheme = url.drivername
    if scheme in ("sqlite", "sqlite+pysqlite"):
        if not url.database or url.database == ":memory:":
            raise LocationError("sqlite:// needs a file (sqlite:///PATH): an in-memory store keeps nothing")
        return sqlite_file(Path(url.database))
    if scheme in _POSTGRES_SCHEMES:
        if not url.database:
            raise LocationError(f"{StoreLocation(url).shown}: name the database (postgresql://HOST/DBNAME)")
        return StoreLocation(url.set(drivername="postgresql+psycopg"))
    raise LocationError(f"store URL scheme {scheme!r} is not supported: use sqlite:///PATH or postgresql://…")


def sqlite_file(path: Path) -> StoreLocation:
    return StoreLocation(sa.URL.create("sqlite", database=str(Path(path).expanduser().absolute())))


def resolve(given: str | None, default_file: Path, env: dict | None = None) -> StoreLocation:
    """The command line's value, else $FLOPWATCH_STORE, else `default_file`."""
    env = os.environ if env is None else env
    if given is not None:
        return parse(given)
    if env.get(STORE_ENV):
        return parse(env[STORE_ENV])
    return sqlite_file(default_file)


def resolve_cache(given: str | None, default_dir: Path, env: dict | None = None) -> Path:
    """The build cache folder: the command line's value, else $FLOPWATCH_CACHE, else `default_dir`."""
    env = os.environ if env is None else env
    chosen = given if given is not None else env.get(CACHE_ENV) or None
    return Path(chosen).expanduser().absolute() if chosen else default_dir


def inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies under it (both resolved, symlinks followed)."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path == folder or folder in path.parents


def wiped_by_ci(path: Path, env: dict | None = None) -> str | None:
    """Which folder of a GitHub Actions job holds `path` and is emptied between jobs (the
    workspace, which actions/checkout cleans, or the runner's temp folder); None outside
    Actions or when the path survives the job."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") != "true":
        return None
    for variable in ("GITHUB_WORKSPACE", "RUNNER_TEMP"):
        folder = env.get(variable)
        if folder and inside(path, Path(folder)):
            return f"${variable} ({folder})"
    return None

