"""Record the ncu fixture tests/fixtures/ncu/flopwatch_h100/ncu_copy_raw.csv on an NVIDIA GPU:
builds the two copy variants, profiles ncu_child.py through ncu_command with every metric of
ncu_metrics_sm90.toml, and prints the derived metrics. Usage: capture_ncu_fixture.py OUT_DIR"""

import subprocess
import sys
import tomllib
from pathlib import Path

from workers.cuda import metrics, ncu, toolchain

root = Path(__file__).resolve().parents[2]
out = Path(sys.argv[1])
tools = toolchain.find_tools()
libs = []
for name in ("cuda_coalesced", "cuda_strided"):
    folder = root / "kernels" / "copy" / name
    manifest = tomllib.loads((folder / "variant.toml").read_text())
    lib = out / f"{name}.so"
    cmd = toolchain.nvcc_command(tools.nvcc, [str(folder / s) for s in manifest["sources"]], [],
                                 manifest["build"]["flags"], manifest["arches"], str(lib))
    subprocess.run(cmd, check=True)
    libs.append(str(lib))
table = metrics.load_table("sm90")
report = out / "ncu_copy_raw.csv"
child = [sys.executable, str(Path(__file__).with_name("ncu_child.py")), *libs]
cmd = ncu.ncu_command(tools.ncu, metrics.required_metrics(table), child, output_csv=str(report))
(out / "ncu_command.txt").write_text(" ".join(cmd) + "\n")
subprocess.run(cmd, check=True)
for launch in ncu.parse_raw_csv(report.read_text()):
    print(launch.launch_id, launch.kernel[:60], metrics.derive(launch.metrics, table))
