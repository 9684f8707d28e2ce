"""Statements whose SQL differs by dialect, built once here (SQLAlchemy Core)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite


def upsert(conn: sa.Connection, table: sa.Table, values: dict, key: Sequence[str],
           update: Sequence[str] | None = None):
    """INSERT … ON CONFLICT (key) DO UPDATE: one atomic statement in both dialects, so two
    processes recording the same commit or build at once neither fail nor lose a row.
    `update`: the columns a conflict overwrites (default: every column given but the key)."""
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table).values(values)
    columns = update if update is not None else [c for c in values if c not in key]
    if not columns:
        return insert.on_conflict_do_nothing(index_elements=list(key))
    return insert.on_conflict_do_update(index_elements=list(key),
                                        set_={c: insert.excluded[c] for c in columns})
