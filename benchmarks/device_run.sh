#!/bin/bash
# One verification on a GPU machine that has torch, nvcc and ncu but not Ray, plotly,
# gitpython, SQLAlchemy, pydantic (2.13.4 with pydantic-core 2.46.4), orjson, tomlkit or rich:
# install the carried wheels (.whl/ray-slim.tar.xz and .whl/deps/*.whl, Python 3.12
# manylinux), then run the named benchmarks from the repository root, each writing under
# /tmp/bench/NAME. What the machine did all along (utilization, SM clock, power every 100 ms)
# comes back as $OUT/smi_trace.csv.
# What comes back: $OUT/NAME.txt (the benchmark's output) and $OUT/NAME.tar.gz (its JSON and
# logs, no repositories or builds). All share one folder, /tmp/bench: after `throughput`,
# `fidelity` and `planted` reuse its suite repository, build cache and run (nothing rebuilt).
#
#   bash benchmarks/device_run.sh throughput fidelity planted
#
# throughput  benchmarks/throughput.py (the fast-verdicts table at default settings)
# verdicts    the same on issue 15's suite (gemm and copy)
# verdicts_ab the same, then `run` with spares off and on (their saving; medians off vs on)
# verdicts_ab2 the same, then `run` with the next-job overlap off and on, and with a variant's shapes
#             in one process off and on (each one's saving; medians off vs on)
# verdicts_warm the same, then `run` with loops waiting idle for a preparation step, and warming up beside it
# fidelity6   timing_fidelity.py on gemm+copy, six rounds per short series (fixed vs adaptive, every sample kept)
# fidelity14  the same, and 14 rounds in all for a series whose fixed rule's own rounds spread more than 1%
# fidelity_noisy  30 rounds of the six series whose fixed rule's own rounds spread more than 1% (torch_ref, the Triton GEMMs)
# fresh_first benchmarks/fresh_first.py: on a fresh machine with no flopwatch Ray up, `run --variant
#             cuda_wmma` of the bundled suite (--json, nvidia-smi beside), then the same again (kept
#             Ray), then first commands on new local Rays (default; head readying no slots; Ray's
#             worker prestart off): wall, jobs wall, the driver's phases outside the jobs. Run it first.
# startup     what a command's interpreter start and imports cost on this machine (the driver's "python" phase)
# triton_first  benchmarks/triton_first_call.py (a Triton kernel's first call in a forked job process, cold and warmed)
# planted_default  the planted 1% slowdown, compare at default settings only (after verdicts)
# settled     timing_fidelity.py on gemm+copy with a third rule: 3 s of sampling, the reference both are held to
# spare_prep  benchmarks/spare_prep.py (what a spare's preparation costs; does it move medians beside it)
# fidelity    benchmarks/timing_fidelity.py --skip-planted (fixed vs adaptive medians per series)
# planted     benchmarks/timing_fidelity.py --skip-fidelity (a 1% slowdown, compare --all and default)
# ops         benchmarks/verify_ops_gpu.py, when present
# ecosystem   benchmarks/verify_ecosystem_gpu.py --repos .ext (public repositories onboarded with
#             flopwatch new, then run; carry the checkouts as .ext/)
# ecosystem_drafted  the same with the drafts already in the checkouts
# ecosystem_refs  the same for Liger-Kernel and extension-cpp only (every entry with the reference flopwatch finds)
# ecosystem_refs_test  extension-cpp whole, and the Liger-Kernel entries whose references live in its tests
# ecosystem_liger_repository  extension-cpp whole, and the Liger-Kernel drafts whose reference is the
#             repository's own (its tests' functions and statements) or none
# ecosystem_liger_builtin  the Liger-Kernel drafts checked against a built-in op (the two together: every entry)
# scaling_unpinned  after scaling: the same counts again, every GPU first, with the slots' CPU pinning off
#             (FLOPWATCH_PIN_CPUS=0) and a Ray of each command's own (no kept slot keeps the pinning)
# fresh_seeds  fresh_first with its new-Ray arms limited to: default, the runners not seeded, the head not
#             started ahead
# fresh_lean  fresh_first with the default new-Ray arm only (the first command, the one after it, a new Ray)
# joined_cluster  benchmarks/joined_cluster.py (a token-authenticated Ray head started with `ray start`,
#             every GPU in it; two `run --variant` by address, then a one-variant `compare`)
# modes       benchmarks/verify_modes_gpu.py --repos .ext (Liger-Kernel's entries drafted by flopwatch new at
#             their test sizes: launch-bound marks, peak memory, forward/backward/full with the backward
#             checked; Liger's benchmark scripts beside flopwatch's Liger-to-peer memory ratio; a planted
#             +20% allocation, backward-only slowdown and memory bisection; carry the checkout as .ext/);
#             modes_liger / modes_planted: its Liger part / its planted part alone
# entries     benchmarks/verify_entries_gpu.py (returned outputs never written, a torch.library op,
#             a problem with weights, the autotuner's choice per result)
# challenge   benchmarks/verify_challenge_gpu.py (kernel-challenge problem folders: tests/challenge_repo's
#             two examples ok at every benchmarks: entry, every tests: entry checked; a submission wrong at
#             one test size incorrect; gpu-mode's pmpp vectoradd_py and matmul_py where .ext/reference-kernels
#             is carried). flopwatch reads task.yml with PyYAML: carry its wheel where the machine lacks it
#             (EXTRA_WHEELS="pyyaml" for device-ray.sh)
# challenge_drafted  the same script with --drafted: the examples and gpu-mode's pmpp vectoradd_py and matmul_py
#             (with their solutions/) drafted unedited by `flopwatch new` / `init`, then run: ok at every
#             benchmarks: entry, every tests: entry checked, reference-kernels' wrong solution incorrect
# sizes_draft benchmarks/verify_sizes_gpu.py --part draft (carry .ext/Liger-Kernel and .ext/extension-cpp):
#             `flopwatch new` on Liger's functional module, its benchmark scripts run under the recorder for
#             their sizes; extension-cpp `init` and `run` on this node without expecttest (each operator at
#             >= 16M elements); the drafted checkouts stay in /tmp/bench/sizes for sizes_run
# sizes_run   benchmarks/verify_sizes_gpu.py --part run (after sizes_draft, same machine): Liger's drafts run at
#             each entry's largest size, then Liger's own scripts, forward speed only, held against flopwatch's
#             % of peer (within 25%); the short table last
# sizes_extcpp  benchmarks/verify_sizes_gpu.py --part extcpp: extension-cpp `init` and `run` on this node
#             without expecttest (each operator at >= 16M elements)
# sizes       all three, in one call (past the 10-minute limit when Liger's scripts and runs are slow)
# sizes_carried  sizes_run on drafts `new` wrote elsewhere (carried as .ext/sizes_draft, as modes_drafted),
#             flopwatch's run alone (no Liger script)
# sizes_carried_scripts  the same with Liger's scripts, run first, then the compared entries' run,
#             then the others' (a call stopped at its deadline keeps the ratios and every finished job);
#             sizes_ratio: the scripts and the compared drafts' copies at the scripts' points only;
#             sizes_rescaled: the drafts whose sizes the scaling rule changed, and those a call's deadline
#             left unrun, from drafts carried as .ext/sizes_draft2
# modes_drafted  verify_modes_gpu.py's Liger part on the drafts a sizes_draft call wrote (carry its
#             liger-drafts/ and sizes-liger-new.json as .ext/sizes_draft): no second `flopwatch new`
#
# DEADLINE_S=N stops each case at N seconds after the call began (SIGINT, then SIGKILL 15 s on),
# so that what the cases wrote comes back from a call with a time limit. The cases marked
# "direct" below write their outputs straight under $OUT/NAME/ as each step ends (their
# checkouts and stores stay under /tmp/bench): a case stopped at the deadline loses only its
# last step.
# scaling     benchmarks/throughput.py --scaling --gpus 1 --gpus all (a warm `run A` on one GPU and on
#             every GPU, nvidia-smi per GPU, the lower bound, `flopwatch plan` held against each count)
# scaling124  the same on 1, 2 and every GPU (each count's device work and its phases, the planner
#             from each count held against the others, learned and default growth)
# scaling14_context  scaling on 1 GPU and every GPU, then on every GPU `run A` with the spares' context made outside the
#             device lock and inside it (FLOPWATCH_SPARE_CONTEXT_LOCK=0, the default, / =1; a Ray of each run's own):
#             device work, each preparation step's hold, and every median off vs on
# scaling_again  the same runs again after scaling, the GPU counts in the reverse order (each count
#             measured once early and once late in the growing store)
# scaling_threads8  the same with every job on 8 host threads (--threads 8) instead of the node's cores over its GPUs
# report_profile  where the time of a report goes on the store `scaling` left (a fresh process,
#             as `flopwatch run` writes it after its jobs; cProfile, the 25 largest by cumulative time)
# driver_profile  benchmarks/driver_profile.py --reuse (after scaling: the suite on every GPU, then again under
#             cProfile: the driver's phases, what they leave uncovered, and where its own time goes)
# hog         benchmarks/throughput.py --hog (after scaling: `run A` with the last GPU loaded on purpose;
#             the peer check must flag it and only it)
# planted_scaling  the planted 1% slowdown, compare at default settings on every GPU (after scaling)
# table_gpus  benchmarks/throughput.py --gpus 1 --gpus all (the fast-verdicts table on one GPU and on every GPU)
# multi       benchmarks/throughput.py --gpu-verify (UUIDs, broken set, one GPU slowed on purpose)
# hostile     benchmarks/verify_gpu.py hostile (a CUDA job's daemon killed; a shape too big invalid)
# profile     benchmarks/verify_gpu.py suite --shape 4096x4096x4096 (ncu counters beside TFLOP/s, spares on)
# sweep       benchmarks/verify_sweep_gpu.py (parameter axes: every point timed, suite wall with and without
#             the swept variants, compare naming the one slowed point, bisect on a point, --points best);
#             sweep_runs / sweep_history: its first step, then the others; sweep_pairs: one binary
#             paired against itself (own buffers, shared buffers), then compare B C
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/site
if [ -s .whl/ray-slim.tar.xz ]; then
  tar -C /tmp/site -xJf .whl/ray-slim.tar.xz
  python3 -m pip install -q --no-deps --no-compile --target /tmp/site .whl/deps/*.whl
fi
# The machine's image sets PYTHONDONTWRITEBYTECODE, and the wheels above are unpacked without
# compiling: every process would compile Ray, SQLAlchemy, pydantic and flopwatch from source
# again (3-4 s of each command's start there). A pip install compiles them once; so do we.
python3 -m compileall -q -j 0 /tmp/site pipeline workers reports benchmarks > /dev/null 2>&1 || true
export PYTHONPATH=/tmp/site:$PWD RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
# Console scripts of the carried wheels (ninja, which torch.utils.cpp_extension builds with).
export PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ date -u; nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit --format=csv;
  python3 -c 'import torch, ray; print("torch", torch.__version__, "ray", ray.__version__)'; nproc; } \
  > "$OUT/machine.txt" 2>&1
# The GPU's clock, power and utilization every 100 ms for the whole call: what a median or a
# gap between timing loops can be held against (the benchmarks' own 500 ms sampling is separate).
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,power.draw,temperature.gpu --format=csv,noheader \
  -lms 100 > "$OUT/smi_trace.csv" 2>/dev/null &
trace=$!
trap 'kill $trace 2>/dev/null' EXIT

# One case: its command, its outputs under $OUT (the direct cases under $OUT/NAME/); its exit status.
run_case() {
  local name=$1 work cmd reuse dest left rc
  work=/tmp/bench
  mkdir -p "$work"
  reuse=()
  [ -f "$work/shas.json" ] && reuse=(--reuse)
  case $name in
    throughput) cmd=(python3 benchmarks/throughput.py) ;;
    verdicts) cmd=(python3 benchmarks/throughput.py --ops gemm,copy) ;;
    verdicts_ab) cmd=(python3 benchmarks/throughput.py --ops gemm,copy --spare-ab) ;;
    verdicts_ab2) cmd=(python3 benchmarks/throughput.py --ops gemm,copy --ab overlap --ab batch) ;;
    verdicts_warm) cmd=(python3 benchmarks/throughput.py --ops gemm,copy --ab warm) ;;
    startup) cmd=(python3 -c 'import subprocess, sys, time
print(sys.version, "dont_write_bytecode", sys.flags.dont_write_bytecode)
for code in ("pass", "import torch", "import ray", "import pipeline.cli") * 2:
    t0 = time.perf_counter(); subprocess.run([sys.executable, "-c", code], check=True)
    print(f"python3 -c {code!r}: {time.perf_counter() - t0:.2f} s")
out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pipeline.cli"], capture_output=True, text=True).stderr
rows = [l for l in out.splitlines() if l.startswith("import time:") and "|" in l and l.split("|")[1].strip().isdigit()]
print("\n".join(sorted(rows, key=lambda l: int(l.split("|")[1]))[-30:]))') ;;
    fresh_first) cmd=(python3 benchmarks/fresh_first.py) ;;
    fresh_seeds) cmd=(python3 benchmarks/fresh_first.py --arm new_ray --arm new_ray_no_seeds --arm new_ray_not_ahead) ;;
    fresh_lean) cmd=(python3 benchmarks/fresh_first.py --arm new_ray) ;;
    triton_first) cmd=(python3 benchmarks/triton_first_call.py) ;;
    fidelity6) cmd=(python3 benchmarks/timing_fidelity.py --skip-planted --ops gemm,copy --rounds 6 "${reuse[@]}") ;;
    fidelity14) cmd=(python3 benchmarks/timing_fidelity.py --skip-planted --ops gemm,copy --rounds 6 --noisy-rounds 14 "${reuse[@]}") ;;
    fidelity_noisy) cmd=(python3 benchmarks/timing_fidelity.py --skip-planted --ops gemm --variants torch_ref,triton_tiled,triton_autotuned --rounds 30 "${reuse[@]}") ;;
    planted_default) cmd=(python3 benchmarks/timing_fidelity.py --skip-fidelity --default-only "${reuse[@]}") ;;
    fidelity) cmd=(python3 benchmarks/timing_fidelity.py --skip-planted "${reuse[@]}") ;;
    planted) cmd=(python3 benchmarks/timing_fidelity.py --skip-fidelity "${reuse[@]}") ;;
    ops) cmd=(python3 benchmarks/verify_ops_gpu.py) ;;
    ecosystem) cmd=(python3 benchmarks/verify_ecosystem_gpu.py --repos .ext) ;;
    entries) cmd=(python3 benchmarks/verify_entries_gpu.py) ;;
    challenge) cmd=(python3 benchmarks/verify_challenge_gpu.py --ext .ext/reference-kernels) ;;
    challenge_drafted) cmd=(python3 benchmarks/verify_challenge_gpu.py --drafted --ext .ext/reference-kernels) ;;
    modes) cmd=(python3 benchmarks/verify_modes_gpu.py --repos .ext) ;;
    modes_liger) cmd=(python3 benchmarks/verify_modes_gpu.py --repos .ext --steps liger) ;;
    modes_planted) cmd=(python3 benchmarks/verify_modes_gpu.py --steps planted) ;;
    ecosystem_drafted) cmd=(python3 benchmarks/verify_ecosystem_gpu.py --repos .ext --drafted) ;;
    ecosystem_refs) cmd=(python3 benchmarks/verify_ecosystem_gpu.py --repos .ext --only Liger-Kernel --only extension-cpp) ;;
    ecosystem_refs_test) cmd=(python3 benchmarks/verify_ecosystem_gpu.py --repos .ext --only Liger-Kernel --only extension-cpp
                              --variant liger_attn_res --variant liger_mhc_coeffs --variant liger_fused_neighborhood_attention
                              --variant liger_rms_norm) ;;
    ecosystem_liger_repository) cmd=(python3 benchmarks/verify_ecosystem_gpu.py --repos .ext --only Liger-Kernel
                                     --only extension-cpp --reference repository) ;;
    ecosystem_liger_builtin) cmd=(python3 benchmarks/verify_ecosystem_gpu.py --repos .ext --only Liger-Kernel
                                  --reference builtin) ;;
    sizes_draft) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part draft) ;;
    sizes_run) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part run) ;;
    sizes_extcpp) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part extcpp) ;;
    sizes) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part all) ;;
    sizes_carried) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part run --drafts .ext/sizes_draft --no-scripts) ;;
    sizes_carried_scripts) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part run --drafts .ext/sizes_draft
                                --scripts-first) ;;
    sizes_rescaled) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part run --drafts .ext/sizes_draft2 --no-scripts
                         --variant liger_mhc_coeffs --variant liger_mhc_pre --variant liger_mhc_post_res
                         --variant liger_multi_token_attention --variant liger_fused_linear_jsd
                         --variant liger_fused_neighborhood_attention --variant liger_attn_res
                         --variant liger_group_norm --variant liger_mhc_apply) ;;
    sizes_ratio) cmd=(python3 benchmarks/verify_sizes_gpu.py --ext .ext --part run --drafts .ext/sizes_draft
                      --scripts-first --no-largest) ;;
    modes_drafted) cmd=(python3 benchmarks/verify_modes_gpu.py --repos .ext --steps liger --drafts .ext/sizes_draft) ;;
    joined_cluster) cmd=(python3 benchmarks/joined_cluster.py) ;;
    scaling_unpinned) cmd=(env FLOPWATCH_PIN_CPUS=0 FLOPWATCH_RAY_REUSE=0 python3 benchmarks/throughput.py
                           --scaling-again --gpus all --gpus 1) ;;
    spare_prep) cmd=(python3 benchmarks/spare_prep.py) ;;
    settled) cmd=(python3 benchmarks/timing_fidelity.py --skip-planted --ops gemm,copy --settled 3 "${reuse[@]}") ;;
    settling) cmd=(python3 benchmarks/gpu_settling.py) ;;
    scaling) cmd=(python3 benchmarks/throughput.py --scaling --gpus 1 --gpus all) ;;
    scaling124) cmd=(python3 benchmarks/throughput.py --scaling --gpus 1 --gpus 2 --gpus all) ;;
    scaling14_context) cmd=(python3 benchmarks/throughput.py --scaling --gpus 1 --gpus all --ab context) ;;
    scaling_again) cmd=(python3 benchmarks/throughput.py --scaling-again --gpus 1 --gpus all) ;;
    scaling_threads8) cmd=(python3 benchmarks/throughput.py --scaling-threads 8 --gpus 1 --gpus all) ;;
    report_profile) cmd=(python3 -c 'import cProfile, pstats, time
from pathlib import Path
t0 = time.perf_counter()
from pipeline.commands import publish
from pipeline.store import Store
t1 = time.perf_counter()
store = Store(Path("/tmp/bench/scaling.db"))
print("results", store.count_results(), "import", round(t1 - t0, 3), "s")
t = time.perf_counter(); publish.prepare(); print("prepare (templates)", round(time.perf_counter() - t, 3), "s")
for _ in range(2):
    t = time.perf_counter(); publish.write_site(store, Path("/tmp/bench/site_profile")); print("write_site", round(time.perf_counter() - t, 3), "s")
cProfile.run("publish.write_site(store, Path(\"/tmp/bench/site_profile\"))", "/tmp/bench/report.prof")
pstats.Stats("/tmp/bench/report.prof").sort_stats("cumulative").print_stats(25)') ;;
    driver_profile) cmd=(python3 benchmarks/driver_profile.py --reuse) ;;
    hog) cmd=(python3 benchmarks/throughput.py --hog) ;;
    planted_scaling) cmd=(python3 benchmarks/timing_fidelity.py --skip-fidelity --default-only --reuse --db scaling.db) ;;
    table_gpus) cmd=(python3 benchmarks/throughput.py --gpus 1 --gpus all) ;;
    multi) cmd=(python3 benchmarks/throughput.py --gpu-verify) ;;
    hostile) cmd=(python3 benchmarks/verify_gpu.py hostile) ;;
    sweep) cmd=(python3 benchmarks/verify_sweep_gpu.py) ;;
    sweep_runs) cmd=(python3 benchmarks/verify_sweep_gpu.py --steps runs) ;;
    sweep_history) cmd=(python3 benchmarks/verify_sweep_gpu.py --steps compare,bisect,best) ;;
    sweep_pairs) cmd=(python3 benchmarks/verify_sweep_gpu.py --steps pairs,compare) ;;
    profile) cmd=(python3 benchmarks/verify_gpu.py suite --shape 4096x4096x4096 --budget 0.5) ;;
    *) echo "unknown benchmark $name" >&2; return 2 ;;
  esac
  dest=$work
  case $name in sizes*|modes*|challenge*) dest=$OUT/$name; mkdir -p "$dest" ;; esac  # direct
  if [ "${DEADLINE_S:-0}" -gt 0 ]; then
    left=$(( DEADLINE_S - SECONDS ))
    if [ $left -lt 20 ]; then echo "== $name: not started, ${left} s left before the deadline" | tee "$OUT/$name.txt"; return 124; fi
    cmd=(timeout -s INT -k 15 "$left" "${cmd[@]}")
  fi
  echo "== $name: ${cmd[*]}  ($(date -u +%H:%M:%S))"
  OUT=$dest "${cmd[@]}" > "$OUT/$name.txt" 2>&1
  rc=$?
  echo "exit $rc" >> "$OUT/$name.txt"
  (cd "$work" && find . -maxdepth 1 \( -name '*.json' -o -name '*.log' -o -name '*.txt' \) -print0 \
     | xargs -0 -r tar -czf "$OUT/$name.tar.gz")
  tail -n 40 "$OUT/$name.txt"
  return $rc
}

# NAME@bg runs beside the cases after it (for work whose figures a shared GPU does not change:
# correctness, peak memory); the call waits for it before it ends.
status=0
background=()
for arg in "$@"; do
  if [[ $arg == *@bg ]]; then
    run_case "${arg%@bg}" &
    background+=($!)
  else
    run_case "$arg" || status=$?
  fi
done
for pid in "${background[@]}"; do wait "$pid" || status=$?; done
exit $status
