"""flopwatch against a kept cluster joined by address, as docs/ci.md's PR cluster is used.

A Ray head started as Ray documents it (`ray start --head --num-gpus N`, token authentication on,
its token in ~/.ray/auth_token), then, on the bundled suite copied into a fresh repository
(`benchmarks/throughput.py`'s commits: A, B a README edit, C one variant's `-D` define):

1. `flopwatch run A --variant cuda_smem_tiled --ray-address ADDR` (the first driver: no kept
   slot yet, every slot probed);
2. the same again (a second driver: the slots the first kept are found, nothing re-probed);
3. `flopwatch compare A C --ray-address ADDR` in a fresh clone (a one-variant change: that
   variant built and timed against its base, every other series unchanged by identity).

Each at default settings, whole-command wall timed around the process, nvidia-smi sampled every
500 ms beside it; the driver's own phases (probe, builds and jobs, paired re-times) from its
`--json` summary. Output under OUT (default ./joined-cluster-out): one JSON per command and
`joined_cluster.json`; the table is printed last.

    python3 benchmarks/joined_cluster.py            # every GPU of the machine in the cluster
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (the bundled suite's repository and the command runner)

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "joined-cluster-out"))
# Ray's command line as installed, else its module (a wheel unpacked without console scripts)
RAY = [shutil.which("ray")] if shutil.which("ray") else [sys.executable, "-m", "ray.scripts.scripts"]
START_LIMIT_S = 180


def _cluster_env(base: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FLOPWATCH_RAY_ADDRESS",
                                                              "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0", RAY_TMPDIR=str(base / "t"))
    return env


def start_head(base: Path, gpus: int) -> tuple[subprocess.Popen, str, dict]:
    env = _cluster_env(base)
    subprocess.run([*RAY, "get-auth-token", "--generate"], env=env, capture_output=True, text=True, check=True,
                   timeout=120)
    (Path(env["HOME"]) / ".ray" / "auth_token").chmod(0o600)
    port = 6390
    log = open(base / "head.log", "ab")
    # As the README's Clusters section starts a node: its GPUs and a CPU slot offered to flopwatch
    # through flopwatch's resources (without them Ray has the GPUs and flopwatch no slot).
    offered = json.dumps({"flopwatch_cpu": 1, "flopwatch_cuda": gpus})
    head = subprocess.Popen([*RAY, "start", "--head", "--port", str(port), "--num-gpus", str(gpus),
                             "--resources", offered, "--include-dashboard", "false", "--block"], env=env,
                            stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log, start_new_session=True)
    address = f"127.0.0.1:{port}"
    probe = (f"import ray; ray.init(address={address!r}, logging_level='ERROR'); "
             "print(int(ray.cluster_resources().get('GPU', 0)))")
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False,
                             timeout=120)
        if out.returncode == 0 and out.stdout.strip().splitlines()[-1:] == [str(gpus)]:
            return head, address, env
        if head.poll() is not None:
            break
        time.sleep(2)
    raise SystemExit("the head did not come up: " + (base / "head.log").read_text()[-3000:])


def main() -> int:
    throughput.OUT = OUT
    OUT.mkdir(parents=True, exist_ok=True)
    gpus = throughput.gpu_count()
    base = Path(tempfile.mkdtemp(prefix="fwj", dir="/tmp"))
    head, address, env = start_head(base, gpus)
    cluster = {k: env[k] for k in ("HOME", "RAY_AUTH_MODE", "RAY_TMPDIR")}
    rows = []
    try:
        repo, shas = throughput.suite_repo("cuda")
        db = OUT / "joined.db"
        folder, variant = throughput.DEFINE_VARIANT["cuda"]
        for name in ("run_first_driver", "run_second_driver"):
            s = throughput.flopwatch(repo, name, db, "cuda", "run", shas["A"], "--variant", variant,
                                     "--ray-address", address, env_extra=cluster)
            rows.append(_row(s, db, gpus))
        clone = throughput.fresh_clone(repo, "clone_c")
        s = throughput.flopwatch(clone, "compare_one_variant", db, "cuda", "compare", shas["A"], shas["C"],
                                 "--ray-address", address, env_extra=cluster)
        rows.append(_row(s, db, gpus))
    finally:
        head.terminate()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
        shutil.rmtree(base, ignore_errors=True)
    (OUT / "joined_cluster.json").write_text(json.dumps(rows, indent=1, default=str))
    print(f"\nkept cluster joined by address, {gpus} GPU(s), token authentication on")
    print(f"{'command':24} {'exit':>4} {'wall':>7} {'probe':>7} {'builds+jobs':>11} {'paired':>7} "
          f"{'outside jobs':>12} {'nvidia-smi in jobs':>20}  slots")
    for r in rows:
        slots = {k: v for k, v in (r["slots"] or {}).items() if k != "timeline"} if isinstance(r["slots"], dict) else ""
        print(f"{r['name']:24} {r['exit']:>4} {r['command_wall_s']:>6.1f}s {r['probe_s']:>6.2f}s "
              f"{r['builds_and_jobs_s']:>10.1f}s {r['paired_s']:>6.1f}s {r['outside_s']:>11.1f}s "
              f"{r['util_jobs']:>20}  {'/'.join(r['statuses'])}  {slots}")
    # A figure counts only where the commands measured what they were asked: every result of
    # the first driver measured (not skipped), and the compare's changed variant timed.
    measured = [r for r in rows if r["statuses"]]
    ok = all(r["exit"] == 0 for r in rows) and all("skipped" not in r["statuses"] for r in measured) \
        and rows[0]["statuses"] == ["ok"]
    if not ok:
        print("NOT VALID: a command failed, or a result was skipped (statuses: "
              + "; ".join(f"{r['name']} {r['statuses']}" for r in rows) + ")")
    return 0 if ok else 1


def _row(s: dict, db: Path, gpus: int) -> dict:
    f = throughput.figures(s, db, "cuda", gpus)
    phases = f["driver"]
    util = f.get("util_jobs") or {}
    return {"name": s["name"], "exit": s["exit"], "command_wall_s": s["command_wall_s"],
            "probe_s": float(phases.get("probe", 0.0)), "builds_and_jobs_s": float(phases.get("builds_and_jobs", 0.0)),
            "paired_s": float(phases.get("paired", 0.0)), "outside_s": f["driver_outside_jobs_s"],
            "util_jobs": " / ".join(f"{v:.0f}%" for v in util.values()) if isinstance(util, dict) else str(util),
            "slots": (s.get("ray") or {}).get("slots", ""), "phases": phases,
            "verdicts": f.get("verdicts"), "jobs_wall_s": f["jobs_wall_s"],
            "statuses": sorted({r["status"] for r in s.get("results") or []})}


if __name__ == "__main__":
    sys.exit(main())
