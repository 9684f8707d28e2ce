"""The CPU-runnable parts of benchmarks/verify_modes_gpu.py, so that its one GPU run does not
fail on them: Liger's autograd entries read from its source, the drafts' edits valid manifests,
Liger's benchmark output parsed, its version found without an install, the checks judged from
rows, and the planted history a repository whose entry passes its checks in every mode."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
from contextlib import redirect_stdout

import pytest

from benchmarks import verify_modes_gpu as vm
from pipeline.project.schema import VariantManifest

# A functional module as Liger writes its entries (src/liger_kernel/transformers/functional.py).
FUNCTIONAL = """
from liger_kernel.ops.rms_norm import LigerRMSNormFunction


def liger_rms_norm(X, W, eps, offset: float = 0.0, casting_mode: str = "llama", in_place: bool = True):
    return LigerRMSNormFunction.apply(X, W, eps, offset, casting_mode, in_place)


def liger_cross_entropy(input, target, ignore_index: int = -100):
    loss, z_loss, token_accuracy, predicted_tokens = LigerCrossEntropyFunction.apply(input, target, None, ignore_index)
    return loss


def liger_mhc_apply(x, f_out, h_pre, h_post, h_res, *, return_x_in: bool = False):
    x_in = liger_mhc_pre(x, h_pre)
    return x_in


def _helper(x):
    return Fn.apply(x)
"""
DRAFT = """# reference: built-in op layer_norm
# Drafted by `flopwatch new` from src/liger_kernel/transformers/functional.py (function liger_layer_norm).
name = "liger_layer_norm"
op = "layer_norm"
backend = "triton"
dtypes = ["fp32"]  # TODO (guess)
shapes = [[16, 64]]  # TODO (guess): sizes ['M', 'N']

[binding]
kind = "triton"
entry = "liger_kernel.transformers.functional:liger_layer_norm"
returns = true
"""


def test_the_autograd_entries_are_those_calling_a_functions_apply(tmp_path):
    (tmp_path / "functional.py").write_text(FUNCTIONAL)
    assert vm.autograd_entries(tmp_path / "functional.py") == ["liger_rms_norm", "liger_cross_entropy"]


def test_the_drafts_edits_are_valid_manifests():
    with_modes = tomllib.loads(vm.with_modes(DRAFT, vm.MODES))
    assert VariantManifest.model_validate(with_modes).modes == vm.MODES
    sized = tomllib.loads(vm.sized_copy(DRAFT, "memratio_layer_norm", [[1024, 4096], [2048, 4096]], "bf16", ["full"]))
    m = VariantManifest.model_validate(sized)
    assert (m.name, m.dtypes, m.modes) == ("memratio_layer_norm", ["bf16"], ["full"])
    assert m.shapes == [[1024, 4096], [2048, 4096]] and m.binding.entry.endswith(":liger_layer_norm")
    # a draft given all three modes first (run_liger rewrites the autograd drafts before copying them):
    # the copy still measures the full pass only
    moded = tomllib.loads(vm.sized_copy(vm.with_modes(DRAFT, vm.MODES), "memratio_layer_norm", [[1024, 4096]], "bf16",
                                        ["full"]))
    assert VariantManifest.model_validate(moded).modes == ["full"]
    with pytest.raises(ValueError, match="no top-level name"):
        vm.with_modes("[binding]\n", vm.MODES)


def _printed(records: list[dict]) -> str:
    """What Liger's `print_benchmark_data` prints for `records`, amid a script's other output."""
    return "BENCHMARKING MEMORY\n********** Benchmark Data **********\n" + json.dumps(records, indent=2) + "\nbye\n"


def _record(provider: str, mode: str, metric: str, ys: list[float]) -> dict:
    return {"kernel_name": "layer_norm", "kernel_provider": provider, "metric_name": metric, "metric_unit": "MB",
            "x_values": [1024, 2048], "y_values_50": ys, "y_values_20": ys, "y_values_80": ys,
            "kernel_operation_mode": mode,
            "extra_benchmark_config_str": json.dumps({"hidden_size": 4096, "dtype": "torch.bfloat16", "eps": 1e-6})}


def test_liger_scripts_output_is_read_for_the_full_passs_memory():
    out = _printed([_record("liger", "forward", "speed", [0.1, 0.2])]) + _printed(
        [_record("liger", "full", "memory", [40.0, 80.0]), _record("torch", "full", "memory", [50.0, 100.0])])
    points = vm.script_points(vm.benchmark_data(out))
    assert points == {1024: {"config": {"hidden_size": 4096, "dtype": "torch.bfloat16", "eps": 1e-6},
                             "liger": 40.0, "peer": 50.0},
                      2048: {"config": {"hidden_size": 4096, "dtype": "torch.bfloat16", "eps": 1e-6},
                             "liger": 80.0, "peer": 100.0}}
    assert vm.script_points(vm.benchmark_data("Traceback: no GPU\n")) == {}


def test_the_checkouts_version_is_found_without_an_install(tmp_path):
    folder = vm.fake_distribution(tmp_path / "dist", "0.8.2")
    got = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; print(m.version('liger-kernel'))"],
                         env={**os.environ, "PYTHONPATH": str(folder)}, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "0.8.2"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "liger_kernel"\nversion = "0.8.2"\n')
    assert vm.project_version(tmp_path / "pyproject.toml") == "0.8.2"


def _row(variant: str, shape: str, peak: int | None, inputs: int, **extra) -> dict:
    return {"variant": variant, "shape": shape, "device": "cuda:NVIDIA H100 80GB HBM3", "status": "ok",
            "peak_mem_bytes": peak, "launch_floor_s": 1e-5, "launch_bound": True, "median_s": 1.2e-5,
            "timing": {"memory": {"peak_bytes": peak, "inputs_bytes": inputs, "upstream_bytes": inputs // 2,
                                  "gradient_bytes": inputs // 2}},
            "correctness": {"checks": [{"pass": "backward", "passed": True}]}, **extra}


def test_the_checks_are_judged_from_the_runs_rows():
    drafts = [{"variant": "liger_layer_norm", "guessed": []}, {"variant": "liger_kl_div", "guessed": ["shapes"]}]
    rows = [_row("liger_layer_norm", "M=16,N=64", 4096, 8192),
            _row("liger_layer_norm[mode=backward]", "M=16,N=64", 4096, 8192),
            _row("liger_layer_norm[mode=full]", "M=16,N=64", 4096, 8192),
            _row("liger_kl_div", "M=4096,V=32000", 1 << 20, 1 << 20, launch_bound=False),
            # a Triton draft's rocm row, skipped on an NVIDIA machine, after its cuda row
            _row("liger_layer_norm[mode=full]", "M=16,N=64", None, 0, device="rocm:AMD Instinct MI300X",
                 status="skipped")]
    outcome = vm.Outcome()
    with redirect_stdout(io.StringIO()) as printed:
        vm.judge_liger(rows, drafts, ["liger_layer_norm"], outcome)
    assert [c.ok for c in outcome.checks] == [True, True, True, True], outcome.checks
    assert "(guessed sizes, not held to) liger_kl_div" in printed.getvalue()
    broken = vm.Outcome()
    vm.judge_liger(rows[:2], drafts, ["liger_layer_norm"], broken)
    assert not broken.checks[-1].ok and "liger_layer_norm[mode=full] (not run)" in broken.checks[-1].detail

    shape = "M=1024,N=4096"
    mib = 1 << 20
    ratio_rows = [_row("memratio_layer_norm[mode=full]", shape, 24 * mib, 8 * mib),
                  _row("peer.layer_norm[mode=full]", shape, 30 * mib, 8 * mib)]
    # flopwatch in Liger's terms: (24 + 8 + 4 + 4) / (30 + 8 + 4 + 4) = 40/46; the script's 40/46 too
    scripts = {"layer_norm": {1024: {"config": {"hidden_size": 4096, "dtype": "torch.bfloat16"},
                                     "liger": 40.0, "peer": 46.0}}}
    judged = vm.Outcome()
    vm.judge_ratios(ratio_rows, scripts, judged)
    (ratio,) = judged.ratios
    assert ratio["within"] and ratio["flopwatch_ratio_liger_terms"] == pytest.approx(40 / 46)
    assert ratio["above_inputs_ratio"] == pytest.approx(24 / 30)
    assert not judged.checks[0].ok  # one op of the eight: at least six must hold
    with redirect_stdout(io.StringIO()) as table:
        vm.print_table(judged, {"liger": {"floor_s": 1.5, "results": 10, "busy_s": 30.0, "jobs_wall_s": 40.0}})
    assert "layer_norm" in table.getvalue() and "every check held: NO" in table.getvalue()


def test_the_planted_history_is_a_repository_whose_entry_passes_its_checks(tmp_path):
    from workers.core.records import Variant
    from workers.job import child
    from workers.measure import passes  # noqa: F401 - the passes the entry is run in

    shas = vm.planted_repo(tmp_path / "planted", device="cpu")
    assert len(shas) == len(vm.PLANTED_COMMITS) == 4
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tmp_path / "planted", capture_output=True, text=True,
                         check=True).stdout
    assert "planted +20% peak memory" in log and "backward-only slowdown" in log
    from pipeline.project.config import load_config
    from pipeline.project.discovery import discover

    root = tmp_path / "planted"
    variants, invalid = discover(root, load_config(root))
    assert not invalid and sorted(v.name for v in variants) == ["auto_rms", "auto_rms[mode=backward]",
                                                                  "auto_rms[mode=full]"]
    for v in variants:  # at a small size, on the CPU: checked and timed in its pass
        out = child.run({"variant": Variant.to_dict(v), "device_kind": "cpu", "dims": {"M": 64, "N": 128},
                         "dtype": "fp32", "artifact": str(root / "kernels" / "auto_rms"), "seeds": [1, 2],
                         "timing": {"budget_s": 0.05, "min_samples": 3, "warmup_s": 0.01}})
        assert out["status"] == "ok", (v.name, out.get("diagnostic"))


# A draft as `new` writes it now: benchmark sizes timed, the test's own size a check point.
SIZED_DRAFT = """# Drafted by `flopwatch new` from src/liger_kernel/transformers/functional.py (function liger_rms_norm).
name = "liger_rms_norm"
# the output carries an autograd graph: its backward and full passes are timed too
modes = ["forward", "backward", "full"]
op = "rms_norm"
backend = "triton"
dtypes = ["fp32"]
# sizes: scaled from test/transformers/test_rms_norm.py:229
shapes = [[16384, 8192]]

[binding]
kind = "triton"
entry = "liger_kernel.transformers.functional:liger_rms_norm"
returns = true

[[check]]
shapes = [{ B = 2, T = 4 }]  # the test's own size (test/transformers/test_rms_norm.py:229): checked, not timed
"""


def test_a_draft_is_timed_at_its_tests_own_size_and_keeps_the_modes_it_names():
    text = vm.with_modes(vm.at_test_sizes(SIZED_DRAFT), vm.MODES)
    m = tomllib.loads(text)
    assert m["shapes"] == [{"B": 2, "T": 4}] and "check" not in m
    assert m["modes"] == ["forward", "backward", "full"] and text.count("modes = ") == 1
    VariantManifest.model_validate(m)
    plain = SIZED_DRAFT.split("[[check]]")[0]
    assert vm.at_test_sizes(plain) == plain  # no check point: the draft's own sizes
