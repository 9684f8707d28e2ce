"""Which physical GPU a process uses, and its clocks and power limit, on either vendor.

One code path; the vendors differ only in data: the visible-devices variables their runtime
honours, and the management tool asked (its command line and its output format). Command
builders and parsers are pure functions over strings, so they are tested on recorded output.

`nvidia-smi -i N` numbers *physical* GPUs and ignores CUDA_VISIBLE_DEVICES, while torch's
device 0 is the first *visible* one: asking for "GPU 0" recorded GPU 0's identity for every job
on a multi-GPU node. So the tool is asked for the device by the UUID or PCI bus id that the
runtime itself reports for device 0; only when the runtime has neither is the physical index
derived from the visible-devices variables.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Vendor:
    kind: str
    # Outermost first: ROCR_VISIBLE_DEVICES selects among physical GPUs, HIP_VISIBLE_DEVICES
    # (and CUDA_VISIBLE_DEVICES, which HIP also honours) index into what ROCR left visible.
    visible_vars: tuple[str, ...]
    tool: str


VENDORS = {
    "cuda": Vendor("cuda", ("CUDA_VISIBLE_DEVICES",), "nvidia-smi"),
    "rocm": Vendor("rocm", ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"), "rocm-smi"),
}
ALL_VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")

NVIDIA_FIELDS = ("index", "uuid", "pci.bus_id", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem",
                 "power.limit")
_NVIDIA_NAMES = {"index": "smi_index", "uuid": "uuid", "pci.bus_id": "pci_bus_id", "driver_version": "driver",
                 "clocks.sm": "sm_clock_mhz", "clocks.max.sm": "max_sm_clock_mhz", "clocks.mem": "mem_clock_mhz",
                 "power.limit": "power_limit_w"}


def visible_devices(env: dict) -> dict:
    """The visible-devices variables that are set, as the process sees them (for the record)."""
    return {k: env[k] for k in ALL_VISIBLE_VARS if k in env}


def physical_token(vendor: Vendor, env: dict, ordinal: int = 0) -> str:
    """What the tool calls the process's device `ordinal`: a physical index or a UUID, after
    applying the vendor's visible-devices variables outermost first ("1" → "1";
    ROCR "2,3" then HIP "1" → "3"; "GPU-abc,GPU-def" → "GPU-abc")."""
    chain: list[str] | None = None
    for var in vendor.visible_vars:
        value = env.get(var)
        if value is None or value.strip() == "":
            continue
        tokens = [t.strip() for t in value.split(",") if t.strip()]
        if chain is None:
            chain = tokens
        else:  # an inner variable indexes into what the outer one left visible
            chain = [chain[int(t)] for t in tokens if t.isdigit() and int(t) < len(chain)]
    if chain is None:
        return str(ordinal)
    return chain[ordinal] if ordinal < len(chain) else ""


def torch_uuid(props) -> str:
    """The runtime's UUID of a device (torch ≥ 2.2 on both vendors), or ""."""
    value = getattr(props, "uuid", None)
    return str(value) if value else ""


def torch_bus_id(props) -> str:
    """`0000:18:00.0` from torch's device properties (pci_domain_id / pci_bus_id / pci_device_id), or ""."""
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return ""
    return f"{int(getattr(props, 'pci_domain_id', 0) or 0):04x}:{int(bus):02x}:{int(getattr(props, 'pci_device_id', 0) or 0):02x}.0"


def norm_uuid(text: str) -> str:
    text = (text or "").strip().lower()
    return text.removeprefix("gpu-")


def norm_bus(text: str) -> tuple[int, ...] | None:
    """`00000000:18:00.0` and `0000:18:00.0` are the same device."""
    try:
        domain, bus, rest = text.strip().lower().split(":")
        dev, fn = rest.split(".")
        return int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except (ValueError, AttributeError):
        return None


# -- NVIDIA ------------------------------------------------------------------------------------

def nvidia_selector(uuid: str, bus: str, token: str) -> str:
    """`--id=` value: the UUID (nvidia-smi writes `GPU-<uuid>`), else the bus id, else the token."""
    if uuid:
        return uuid if uuid.upper().startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    return bus or token


def nvidia_command(selector: str | None) -> list[str]:
    cmd = ["nvidia-smi", f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv,noheader,nounits"]
    return cmd + ([f"--id={selector}"] if selector else [])


def parse_nvidia_csv(text: str) -> list[dict]:
    """Rows of `nvidia_command` output under flopwatch's names; `[N/A]` becomes ""."""
    rows = []
    for line in text.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(NVIDIA_FIELDS):
            continue
        row = {}
        for field, value in zip(NVIDIA_FIELDS, values):
            value = "" if value.startswith("[") or value in ("N/A", "") else value
            row[_NVIDIA_NAMES[field]] = _number(value) if field.startswith(("clocks", "power")) else value
        rows.append(row)
    return rows


# -- AMD ---------------------------------------------------------------------------------------

def rocm_command() -> list[str]:
    return ["rocm-smi", "--showuniqueid", "--showbus", "--showclocks", "--showmaxpower", "--json"]


def parse_rocm_json(text: str) -> list[dict]:
    """`rocm-smi --json` ({"card0": {"Unique ID": ..., "PCI Bus": ..., "sclk clock speed:":
    "(2100Mhz)", "Max Graphics Package Power (W)": ...}}) under flopwatch's names."""
    try:
        cards = json.loads(text)
    except ValueError:
        return []
    rows = []
    for card, fields in cards.items():
        if not card.startswith("card") or not isinstance(fields, dict):
            continue
        row = {"smi_index": card[4:]}
        for key, value in fields.items():
            k = key.lower()
            if "unique id" in k:
                row["uuid"] = str(value)
            elif "pci bus" in k:
                row["pci_bus_id"] = str(value)
            elif k.startswith("sclk clock speed"):
                row["sm_clock_mhz"] = _number(str(value).strip("()").lower().removesuffix("mhz"))
            elif k.startswith("mclk clock speed"):
                row["mem_clock_mhz"] = _number(str(value).strip("()").lower().removesuffix("mhz"))
            elif "max graphics package power" in k:
                row["power_limit_w"] = _number(str(value))
        rows.append(row)
    return rows


# -- both --------------------------------------------------------------------------------------

def pick_row(rows: list[dict], uuid: str = "", bus: str = "", token: str = "") -> dict:
    """The tool's row of our device: by UUID, else PCI bus id, else the physical token (an
    index or a UUID from the visible-devices variable). {} when none matches: an unknown row
    is better left empty than filled with another GPU's identity."""
    if uuid:
        hit = [r for r in rows if norm_uuid(r.get("uuid", "")) == norm_uuid(uuid)]
        if hit:
            return hit[0]
    if bus and norm_bus(bus):
        hit = [r for r in rows if norm_bus(r.get("pci_bus_id", "")) == norm_bus(bus)]
        if hit:
            return hit[0]
    if token:
        hit = [r for r in rows if str(r.get("smi_index")) == token or
               (not token.isdigit() and norm_uuid(r.get("uuid", "")) == norm_uuid(token))]
        if hit:
            return hit[0]
    return {}


def node_gpus(proc: str | Path = "/proc", timeout_s: float = 20) -> list[dict]:
    """Every NVIDIA GPU of this node (as far as this process is shown them) as rows
    {"smi_index", "uuid", "pci_bus_id"} in bus-id order, nvidia-smi's index order: read from the
    driver's `/proc/driver/nvidia/gpus/<bus id>/information` (no tool started, no context made),
    else from nvidia-smi's list; [] when neither answers."""
    rows = []
    for entry in sorted(Path(proc, "driver", "nvidia", "gpus").glob("*")):
        try:
            text = (entry / "information").read_text()
        except OSError:
            continue
        uuid = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                     if line.strip().lower().startswith("gpu uuid")), "")
        if norm_bus(entry.name):
            rows.append({"uuid": uuid, "pci_bus_id": entry.name})
    if not rows:
        try:
            out = subprocess.run(nvidia_command(None), capture_output=True, text=True, timeout=timeout_s,
                                 check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        rows = [r for r in parse_nvidia_csv(out) if norm_bus(r.get("pci_bus_id", ""))]
    rows.sort(key=lambda r: norm_bus(r["pci_bus_id"]))
    return [{"smi_index": str(i), "uuid": r.get("uuid", ""), "pci_bus_id": r["pci_bus_id"]} for i, r in enumerate(rows)]


def query_smi(vendor: Vendor, uuid: str, bus: str, token: str, timeout_s: float = 20) -> dict:
    """Ask the vendor's tool about our device; {} when the tool is missing or says nothing.
    NVIDIA: by `--id=` first; if that answers nothing (an id form this driver does not take),
    all GPUs are listed and our row is picked by UUID, bus id or the physical token."""
    if vendor.kind == "cuda":
        attempts, parse = [nvidia_command(nvidia_selector(uuid, bus, token)), nvidia_command(None)], parse_nvidia_csv
    else:
        attempts, parse = [rocm_command()], parse_rocm_json
    for cmd in attempts:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return {}
        row = pick_row(parse(out), uuid, bus, token)
        if row:
            return row
    return {}


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text
