"""The store's tables, declared once for SQLite and PostgreSQL (SQLAlchemy Core).

This is the schema at SCHEMA_VERSION: a new store is created from it in one step. An existing
store reaches it through the numbered steps in `migrations.py`, which never read this module
(a step describes the change it made at its version, so that a later step can build on it).

JSON-shaped values (samples, counters, resources, device details, phases, run summaries) are
stored as JSON text in TEXT columns in both dialects: the store never queries inside them,
the same bytes move between SQLite and PostgreSQL unchanged, and reading them back is one
`json.loads` in the driver either way.
"""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 5

# Text the repository under test controls (a subject, a compiler's or a kernel's output) is
# stored up to these many characters: a flood must not grow the store without bound. Values
# go in as bound parameters only, never into the SQL text.
TEXT_LIMITS = {"subject": 1000, "author": 300, "diagnostic": 8000, "stderr_tail": 8000, "log": 20000}

# Row ids: 64-bit on PostgreSQL (BIGSERIAL); on SQLite the column must be spelt INTEGER to be
# the rowid (SQLite integers are 64-bit anyway).
RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

commits = sa.Table(
    "commits", metadata,
    sa.Column("sha", sa.Text, primary_key=True),
    sa.Column("subject", sa.Text),
    sa.Column("author", sa.Text),
    sa.Column("authored_at", sa.Text),
    sa.Column("parents", sa.Text),  # JSON list of SHAs
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("commit_sha", sa.Text, nullable=False),
    sa.Column("dirty", sa.Integer, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("repo", sa.Text),
    sa.Column("host", sa.Text),
    sa.Column("command", sa.Text),
    sa.Column("started_at", sa.Float),
    sa.Column("finished_at", sa.Float),
    sa.Column("summary", sa.Text),  # JSON: device accounting and peer check
)

builds = sa.Table(
    "builds", metadata,
    sa.Column("build_hash", sa.Text, primary_key=True),
    sa.Column("variant", sa.Text),
    sa.Column("ok", sa.Integer),
    sa.Column("toolchain", sa.Text),
    sa.Column("seconds", sa.Float),
    sa.Column("first_errors", sa.Text),
    sa.Column("log", sa.Text),
    sa.Column("analysis", sa.Text),  # JSON
    sa.Column("created_at", sa.Float),
)

results = sa.Table(
    "results", metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite")),
    sa.Column("commit_sha", sa.Text, nullable=False),
    sa.Column("dirty", sa.Integer, nullable=False),
    sa.Column("variant", sa.Text, nullable=False),
    sa.Column("op", sa.Text),
    sa.Column("backend", sa.Text),
    sa.Column("shape", sa.Text, nullable=False),
    sa.Column("dtype", sa.Text, nullable=False),
    sa.Column("device", sa.Text, nullable=False),
    sa.Column("toolchain", sa.Text),
    sa.Column("build_hash", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("peer", sa.Integer),
    sa.Column("median_s", sa.Float),
    sa.Column("ci_low_s", sa.Float),
    sa.Column("ci_high_s", sa.Float),
    sa.Column("flops", sa.Float),
    sa.Column("bytes_moved", sa.Float),
    sa.Column("diagnostic", sa.Text),
    sa.Column("samples", sa.Text),
    sa.Column("correctness", sa.Text),
    sa.Column("timing", sa.Text),
    sa.Column("counters", sa.Text),
    sa.Column("resources", sa.Text),
    sa.Column("device_info", sa.Text),
    sa.Column("stderr_tail", sa.Text),
    sa.Column("created_at", sa.Float),
    sa.Column("phases", sa.Text),
    # The measurement identity of the result's series (`pipeline.run.identity`): a stored result
    # with the same identity measured the same thing, so compare and bisect may reuse it.
    sa.Column("identity", sa.Text),
    # The median of the result's call path at its launch floor (`workers.measure.launch_floor`), and
    # the timed call's peak device allocation above its start (`workers.measure.memory`); NULL
    # where not measured (a CPU job, a result stored before schema 5).
    sa.Column("launch_floor_s", sa.Float),
    sa.Column("peak_mem_bytes", sa.BigInteger),
    sa.Index("results_key", "commit_sha", "variant", "shape", "dtype", "device", "build_hash"),
    sa.Index("results_series", "variant", "shape", "dtype", "device"),
    sa.Index("results_identity", "identity"),
)

regressions = sa.Table(
    "regressions", metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("variant", sa.Text, nullable=False),
    sa.Column("shape", sa.Text, nullable=False),
    sa.Column("dtype", sa.Text, nullable=False),
    sa.Column("device", sa.Text, nullable=False),
    sa.Column("good_sha", sa.Text, nullable=False),
    sa.Column("bad_sha", sa.Text, nullable=False),
    sa.Column("change", sa.Float),
    sa.Column("rate_before", sa.Float),
    sa.Column("rate_after", sa.Float),
    sa.Column("p_value", sa.Float),
    sa.Column("detected_at", sa.Float),
    sa.Column("culprit_sha", sa.Text),
    sa.Column("bisect", sa.Text),  # JSON: the bisection's summary
    # What stepped: "time" (a slowdown) or "memory" (a peak memory growth). A commit may do both
    # to one series: two rows, one per metric.
    sa.Column("metric", sa.Text, nullable=False, server_default="time"),
    sa.UniqueConstraint("variant", "shape", "dtype", "device", "metric", "good_sha", "bad_sha"),
)

# Result columns holding JSON text, and what an empty one reads back as.
JSON_COLUMNS = {"samples": list, "correctness": dict, "timing": dict, "counters": dict, "resources": dict,
                "device_info": dict, "phases": dict}
RESULT_COLUMNS = tuple(c.name for c in results.columns)
# What identifies a series, and a stored result within a commit (`--resume`).
SERIES_KEY = ("variant", "shape", "dtype", "device")
