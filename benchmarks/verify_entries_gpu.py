"""Verify on one NVIDIA GPU, in one command, what the CPU tests of Python-side entries cannot:

1. an entry that returns its output and leaves part of it unwritten is `incorrect` with "never
   written" (the poison block left in torch's caching allocator before the call);
2. a package's functional entry, a `torch.library` op and a KernelBench-style problem with
   weights and its solutions (one answering from a cache) on the GPU, each with a % of peer;
3. an autotuned Triton kernel records the configuration its autotuner chose, per result
   (`kernels/gemm/triton_autotuned`, shapes of 4096³ bf16).

It builds a repository from tests/ecosystem_repo (GPU devices) and the bundled variant, runs it
at default settings, writes everything under OUT (default ./gpu-verify-entries) and ends with
a table and one line per expectation.

    python3 benchmarks/verify_entries_gpu.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from verify_ops_gpu import git_commit  # the same helper as the ops verification (this folder)

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify-entries"))
UNWRITTEN = '''import torch


def rms_norm_last_row_unwritten(X, W, eps):
    """Right everywhere but the last row, which it never writes."""
    Y = torch.empty_like(X)
    Y[:-1] = (X[:-1].float() * torch.rsqrt(X[:-1].float().pow(2).mean(-1, keepdim=True) + eps)).to(X.dtype) * W
    return Y
'''
ON_GPU = ("my_rms", "torch_op_swiglu", "linear", "linear_new", "linear_cached")


def build_repo(repo: Path) -> None:
    shutil.copytree(ROOT / "tests" / "ecosystem_repo", repo)
    for folder in (repo / "flopwatch").iterdir():
        if folder.name not in ON_GPU:
            shutil.rmtree(folder)
            continue
        manifest = folder / "variant.toml"
        text = re.sub(r'^devices = .*\n', "", manifest.read_text(), flags=re.MULTILINE)
        manifest.write_text(text.replace('dtypes = ["fp32"', 'devices = ["cuda"]\ndtypes = ["fp32"', 1))
    (repo / "pkg" / "src" / "mylib" / "unwritten.py").write_text(UNWRITTEN)
    (repo / "flopwatch" / "unwritten").mkdir()
    (repo / "flopwatch" / "unwritten" / "variant.toml").write_text(
        'name = "unwritten"\nop = "rms_norm"\nbackend = "python"\ndevices = ["cuda"]\ndtypes = ["bf16"]\n'
        'shapes = [[4096, 4096]]\n[binding]\nkind = "python"\nentry = "mylib.unwritten:rms_norm_last_row_unwritten"\n'
        'returns = true\n')
    shutil.copytree(ROOT / "kernels" / "gemm" / "triton_autotuned", repo / "flopwatch" / "triton_autotuned")
    config = repo / "flopwatch.toml"
    config.write_text(config.read_text() + "[shape_sets]\ngemm_gpu = [[4096, 4096, 4096]]\n")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    repo = OUT / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    build_repo(repo)
    git_commit(repo, "entries")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--json", "--db", str(OUT / "entries.db"),
                           "--site", str(OUT / "site")], cwd=repo, capture_output=True, text=True, env=env, check=False)
    (OUT / "run.log").write_text(proc.stdout + "\n" + proc.stderr)
    print(f"$ flopwatch run  (exit {proc.returncode}, {time.time() - t0:.0f} s)")
    summary = json.loads(proc.stdout) if proc.stdout.strip() else {"results": []}
    (OUT / "entries.json").write_text(json.dumps(summary, indent=1))
    rows = [r for r in summary["results"] if (r.get("device") or "").startswith("cuda")]
    by = {}
    for r in sorted(rows, key=lambda r: (r["op"], r["shape"], r["variant"])):
        by.setdefault(r["variant"], []).append(r)
        pct = f"{r['pct_of_peer']:.1f}%" if r.get("pct_of_peer") else ""
        print(f"  {r['variant'][:28]:28} {r['shape'][:40]:40} {r['dtype']:5} {r['status']:10} {pct:>7} "
              f"{(r.get('median_s') or 0) * 1e3:9.3f} ms  {r['diagnostic'][:150]}")
    checks = {
        "unwritten: incorrect, the last row never written":
            any(r["status"] == "incorrect" and "never written" in r["diagnostic"] for r in by.get("unwritten", [])),
        "my_rms, torch_op_swiglu, linear_new ok with a % of peer":
            all(any(r["status"] == "ok" and r.get("pct_of_peer") for r in by.get(v, []))
                for v in ("my_rms", "torch_op_swiglu", "linear_new")),
        "linear_cached: incorrect (a cached answer)":
            any(r["status"] == "incorrect" and "does not depend" in r["diagnostic"] for r in by.get("linear_cached", [])),
        "triton_autotuned: the autotuner's choice recorded per result":
            any(r["status"] == "ok" and (r.get("resources") or {}).get("autotune")
                for r in by.get("triton_autotuned", [])),
    }
    for r in by.get("triton_autotuned", []):
        print(f"  triton_autotuned autotune: {(r.get('resources') or {}).get('autotune')}")
    for what, ok in checks.items():
        print(f"{'yes' if ok else 'NO '}  {what}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
