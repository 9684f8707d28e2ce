"""Nsight Compute: the profiling command line and the parser of its ``--csv --page raw`` output.

The CSV starts after the profiler's ``==PROF==`` lines and the program's own output. Its first row
names the columns (fixed launch columns, then one per metric), the second holds units, then one
row per profiled kernel launch. Numbers carry thousands separators ("1,234,567.5"); with the
default units ncu may also scale them ("Mbyte", "usecond"), which ``parse_raw_csv`` undoes."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

TIMED_RANGE = "flopwatch:timed"
_LAUNCH_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                   "Block Size", "Grid Size", "Device", "CC")
_NUMBER = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?$")
_SCALE = {"Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "usecond": 1e3, "msecond": 1e6,
          "second": 1e9, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9}
_BASE_UNIT = {"Kbyte": "byte", "Mbyte": "byte", "Gbyte": "byte", "Tbyte": "byte", "usecond": "nsecond",
              "msecond": "nsecond", "second": "nsecond", "Khz": "hz", "Mhz": "hz", "Ghz": "hz"}


@dataclass(frozen=True)
class NcuLaunch:
    """One profiled kernel launch. ``metrics`` holds every numeric column by its raw ncu name,
    in base units (bytes, nanoseconds, hz); ``units`` the unit of each after that conversion;
    ``info`` the launch columns and any non-numeric metric ("(256, 1, 1)", "PolicySpread")."""

    launch_id: int
    kernel: str
    metrics: dict[str, float]
    units: dict[str, str]
    info: dict[str, str]


def parse_number(text: str) -> float | None:
    """'1,234,567.5' -> 1234567.5; None for text that is not a plain number ('n/a', '(16, 16, 1)')."""
    text = text.strip()
    return float(text.replace(",", "")) if _NUMBER.match(text) else None


def _csv_start(text: str) -> int:
    match = re.search(r'^"ID",', text, flags=re.MULTILINE)
    if not match:
        raise ValueError("no ncu CSV header (a line starting with \"ID\",) found")
    return match.start()


def parse_raw_csv(text: str) -> list[NcuLaunch]:
    """All launches of an ``ncu --csv --page raw`` report (with or without ``--print-units base``)."""
    rows = list(csv.reader(io.StringIO(text[_csv_start(text):])))
    header = rows[0]
    if "Metric Name" in header and "Metric Value" in header:
        # One row per metric rather than per launch: summing it up would silently mix launches.
        raise ValueError("this is an ncu --page details CSV; profile with --page raw")
    units_row = rows[1] if len(rows) > 1 and rows[1][0] == "" else None
    launches = []
    for row in rows[2 if units_row else 1:]:
        if len(row) != len(header):
            continue  # a line of program output interleaved after the table
        metrics: dict[str, float] = {}
        units: dict[str, str] = {}
        info: dict[str, str] = {}
        for i, (name, cell) in enumerate(zip(header, row)):
            unit = units_row[i] if units_row else ""
            number = None if name in _LAUNCH_COLUMNS else parse_number(cell)
            if number is None:
                info[name] = cell
                continue
            metrics[name] = number * _SCALE.get(unit, 1.0)
            units[name] = _BASE_UNIT.get(unit, unit)
        launches.append(NcuLaunch(int(row[header.index("ID")]), info.get("Kernel Name", ""),
                                  metrics, units, info))
    return launches


def ncu_command(
    ncu: str,
    metrics: Sequence[str],
    cmd: Sequence[str],
    output_csv: str | None = None,
    nvtx_range: str | None = TIMED_RANGE,
    kernel_regex: str | None = None,
    launch_count: int | None = None,
) -> list[str]:
    """The ncu command line that profiles ``cmd``.

    Only kernels launched inside the NVTX push/pop range ``nvtx_range`` are profiled: the child
    program wraps its timed call in ``torch.cuda.nvtx.range_push("flopwatch:timed")`` / pop, and
    the trailing "/" is ncu's syntax for a push/pop range (without it ncu matches start/end ranges).
    This finds library kernels whose names nobody can guess (cuBLAS's ``nvjet_*``).
    ``--target-processes all`` follows the child if ``cmd`` is a launcher script."""
    if not metrics:
        raise ValueError("ncu needs at least one metric")
    command = [ncu, "--target-processes", "all"]
    if nvtx_range:
        command += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    if kernel_regex:
        command += ["--kernel-name", f"regex:{kernel_regex}"]
    if launch_count is not None:
        command += ["--launch-count", str(launch_count)]
    command += ["--metrics", ",".join(metrics), "--csv", "--page", "raw", "--print-units", "base"]
    if output_csv:
        command += ["--log-file", output_csv]
    return command + list(cmd)
