"""The results store: results, runs, builds, commits and regressions, in SQLite or PostgreSQL.
May import: workers.core.

Store(where)            open (check, create or migrate) a store: a SQLite path or a URL
    location.resolve(...)   --store / FLOPWATCH_STORE / the repository's default file
    checks.inspect(...)     what a store is, without writing to it (doctor)
    transfer.copy_history   move a history between stores (`flopwatch store export/import`)
    frame.results_frame     the stored results as a pandas DataFrame (`flopwatch export`)

Modules: `tables` (the schema, both dialects), `migrations` (numbered schema steps), `engine`
(per-dialect connection settings), `statements` (per-dialect SQL), `checks`, `location`,
`database` (the Store), `transfer`, `frame`.
"""

from pipeline.store.database import TEXT_LIMITS, Store, count_results
from pipeline.store.errors import StoreError
from pipeline.store.location import LocationError, StoreLocation
from pipeline.store.tables import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "TEXT_LIMITS", "LocationError", "Store", "StoreError", "StoreLocation", "count_results"]
