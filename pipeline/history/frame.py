"""The stored history as one table: a pandas DataFrame with one row per result, for notebooks
(`results_frame`) and for `flopwatch export` (CSV or Parquet).

    from pipeline.history.frame import results_frame
    df = results_frame("postgresql://flopwatch@db.example/flopwatch")   # or a .db path; None: the default
    df[df.status.isin(["ok", "unchecked"])].groupby(["variant", "shape"]).throughput.max()

Columns, in this order:

- the result: `result_id`, `created_at` (UTC), `variant`, `op`, `backend`, `shape` (the key,
  `M=512,N=512,K=512`), `dtype`, `device`, `status`, `peer`, `median_s`, `ci_low_s`,
  `ci_high_s`, `n_samples`, `flops`, `bytes_moved`, `throughput` (FLOP/s for ops that count
  flops, else B/s; empty unless ok), `throughput_unit`, `launch_floor_s`, `launch_bound`,
  `peak_mem_bytes` (GPU results), `toolchain`, `build_hash`, `diagnostic`;
- its commit and run: `commit_sha`, `commit_subject`, `commit_author`, `commit_date`, `dirty`,
  `run_id`, `run_kind`, `run_host`;
- one column per shape dimension: `shape.M`, `shape.N`, `shape.K`, `shape.n`, …;
- the build's static analysis: `kernel` (the kernel's name; several joined by `;`) and
  `resource.vgprs`, `resource.lds_bytes`, … (with several kernels, the largest value among
  them: the kernel that limits occupancy);
- the profiler's counters, `counter.l1_hit_pct`, …, and the device's details,
  `device.name`, `device.uuid`, `device.sm_clock_mhz`, … (numbers flattened with dots);
- `samples` (every timed sample, in seconds) when asked for.

Rows are oldest first (by result id); `commit_date` orders them by history.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

from pipeline.history.compare import flatten_numeric
from pipeline.store import Store, location
from workers.core import status
from workers.core.launch import launch_bound

LEADING = ("result_id", "created_at", "variant", "op", "backend", "shape", "dtype", "device", "status", "peer",
           "median_s", "ci_low_s", "ci_high_s", "n_samples", "flops", "bytes_moved", "throughput", "throughput_unit",
           "launch_floor_s", "launch_bound", "peak_mem_bytes", "toolchain", "build_hash", "diagnostic", "commit_sha", "commit_subject", "commit_author", "commit_date",
           "dirty", "run_id", "run_kind", "run_host")
# What a row needs; correctness tile maps, timing details and phases stay in the store.
_READ = ("id", "created_at", "run_id", "commit_sha", "dirty", "variant", "op", "backend", "shape", "dtype", "device",
         "toolchain", "build_hash", "status", "peer", "median_s", "ci_low_s", "ci_high_s", "flops", "bytes_moved",
         "diagnostic", "samples", "counters", "resources", "device_info", "launch_floor_s", "peak_mem_bytes")


class NoMatch(ValueError):
    """A filter that keeps no stored result: the message names the value and those it could take."""


def results_frame(store: Store | str | Path | None = None, *, repo: str | Path = ".",
                  variants: Iterable[str] | None = None, devices: Iterable[str] | None = None,
                  samples: bool = False):
    """The stored results as a pandas DataFrame (module docstring). `store`: an open Store, a
    store URL or a SQLite path; None: $FLOPWATCH_STORE, else `<repo>/.flopwatch/results.db`.
    `variants` / `devices` keep only those (NoMatch for a value no stored result has, or a
    combination none has); `samples` adds the list of timed samples."""
    if isinstance(store, Store):
        return _frame(store, variants, devices, samples)
    where = store if store is not None else location.resolve(None, Path(repo) / ".flopwatch" / location.DEFAULT_FILE)
    with Store(where) as opened:
        return _frame(opened, variants, devices, samples)


def _frame(store: Store, variants, devices, samples: bool):
    import pandas as pd

    wanted_variants = set(variants) if variants else None
    wanted_devices = set(devices) if devices else None
    commits = {c["sha"]: c for c in store.commits_with_results()}
    runs = {r["id"]: r for r in store.runs()}
    records = []
    stored_variants, stored_devices = set(), set()
    for row in store.results(columns=_READ):
        stored_variants.add(row["variant"])
        stored_devices.add(row["device"])
        if wanted_variants is not None and row["variant"] not in wanted_variants:
            continue
        if wanted_devices is not None and row["device"] not in wanted_devices:
            continue
        records.append(_record(row, commits.get(row["commit_sha"], {}), runs.get(row["run_id"], {}), samples))
    # A filter that keeps nothing would write a table of headers only, and say nothing (a device
    # given as `cpu:x86_64` while devices are stored by model name): say which value, and the
    # values stored.
    for what, wanted, stored in (("variant", wanted_variants, stored_variants),
                                 ("device", wanted_devices, stored_devices)):
        for value in sorted(wanted or ()):
            if value not in stored:
                raise NoMatch(no_stored(what, value, stored))
    if not records and wanted_variants and wanted_devices:
        raise NoMatch(f"no stored result has variant {' or '.join(map(repr, sorted(wanted_variants)))} on device "
                      f"{' or '.join(map(repr, sorted(wanted_devices)))}, though each is stored on its own")
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return pd.DataFrame(columns=list(LEADING) + (["samples"] if samples else []))
    rest = sorted(c for c in frame.columns if c not in LEADING and c != "samples")
    frame = frame[[*LEADING, *rest, *(["samples"] if samples else [])]]
    frame["created_at"] = pd.to_datetime(frame["created_at"], unit="s", utc=True)
    frame["commit_date"] = pd.to_datetime(frame["commit_date"], utc=True, errors="coerce", format="ISO8601")
    return frame


def no_stored(what: str, value: str, stored: set[str], limit: int = 12) -> str:
    """"no stored result has device 'cpu:x86_64'; devices stored: …", the nearest first."""
    if not stored:
        return f"no stored result has {what} {value!r}: the store holds no results"
    # a device kind alone ("cpu") means the stored devices of that kind, whatever their spelling
    kind = sorted(v for v in stored if what == "device" and ":" not in value and v.split(":", 1)[0] == value)
    near = kind[:3] or difflib.get_close_matches(value, sorted(stored), n=3, cutoff=0.5)
    listed = near + sorted(stored - set(near))
    more = f" and {len(listed) - limit} more" if len(listed) > limit else ""
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"no stored result has {what} {value!r}{hint}; {what}s stored: {', '.join(listed[:limit])}{more}"


def _record(row: dict, commit: dict, run: dict, samples: bool) -> dict:
    ok = status.measured(row["status"]) and row["median_s"]
    work, unit = (row["flops"], "FLOP/s") if row["flops"] else (row["bytes_moved"], "B/s")
    record = {
        "result_id": row["id"], "created_at": row["created_at"], "variant": row["variant"], "op": row["op"],
        "backend": row["backend"], "shape": row["shape"], "dtype": row["dtype"], "device": row["device"],
        "status": row["status"], "peer": bool(row["peer"]), "median_s": row["median_s"],
        "ci_low_s": row["ci_low_s"], "ci_high_s": row["ci_high_s"], "n_samples": len(row["samples"]),
        "flops": row["flops"], "bytes_moved": row["bytes_moved"],
        "throughput": work / row["median_s"] if ok and work else None, "throughput_unit": unit if work else None,
        "launch_floor_s": row["launch_floor_s"], "launch_bound": launch_bound(row["median_s"], row["launch_floor_s"]),
        "peak_mem_bytes": row["peak_mem_bytes"], "toolchain": row["toolchain"], "build_hash": row["build_hash"], "diagnostic": row["diagnostic"],
        "commit_sha": row["commit_sha"], "commit_subject": commit.get("subject"),
        "commit_author": commit.get("author"), "commit_date": commit.get("authored_at"),
        "dirty": bool(row["dirty"]), "run_id": row["run_id"], "run_kind": run.get("kind"), "run_host": run.get("host"),
    }
    for part in (row["shape"] or "").split(","):
        name, _, value = part.partition("=")
        if value.strip().lstrip("-").isdigit():
            record[f"shape.{name.strip()}"] = int(value)
    record.update(_resources(row["resources"] or {}))
    record.update(flatten_numeric(row["counters"] or {}, "counter"))
    record.update(flatten_numeric(row["device_info"] or {}, "device"))
    for key, value in (row["device_info"] or {}).items():
        if isinstance(value, str):
            record[f"device.{key}"] = value
    if samples:
        record["samples"] = list(row["samples"])
    return record


def _resources(resources: dict) -> dict:
    """`kernel` and `resource.<name>` from `{"kernels": {name: {...}}, ...}`: one column per
    figure, not per kernel name, so results of different variants line up."""
    out: dict = {}
    kernels = resources.get("kernels") if isinstance(resources.get("kernels"), dict) else {}
    if kernels:
        out["kernel"] = ";".join(sorted(kernels))
    for figures in kernels.values():
        for name, value in flatten_numeric(figures, "resource").items():
            out[name] = max(out.get(name, value), value)
    rest = {k: v for k, v in resources.items() if k != "kernels"}
    out.update(flatten_numeric(rest, "resource"))
    return out


def write(frame, out: Path | str, fmt: str) -> None:
    """Write `frame` as CSV (samples as JSON text) or Parquet (samples as a list column)."""
    import json

    if fmt == "parquet":
        frame.to_parquet(out, index=False)
        return
    if "samples" in frame.columns:
        frame = frame.assign(samples=frame["samples"].map(json.dumps))
    frame.to_csv(out, index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ")


def format_of(out: str, given: str | None) -> str:
    """`--format`, else from the file name (`-` is CSV on standard output)."""
    if given:
        return given
    if out == "-" or out.lower().endswith(".csv"):
        return "csv"
    if out.lower().endswith((".parquet", ".pq")):
        return "parquet"
    raise ValueError(f"cannot tell the format of {out!r} from its name: end it in .csv or .parquet, or give --format")

