"""The benchmark-script recorder (workers/recorder/): a repository's benchmark script run in the
sandbox with its entries watched, on tests/recorder_repo/ (a plain-torch package laid out as
Liger-Kernel is, whose scripts compute their sizes at run time). Real child processes, the real
sandbox, the CPU."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from workers.recorder import bench_record
from workers.recorder.bench_record import Recording, RecordLimits, import_roots, record_calls
from workers.recorder.calls import Arg, CallRecord, call_site, quick_key, signature, summarize
from workers.recorder.distribution import read_distribution
from workers.recorder.entry_args import entry_arguments

REPO = Path(__file__).resolve().parent / "recorder_repo"
SCRIPTS = REPO / "benchmark" / "scripts"
NORM = ["toy_kernels.ops:NormFunction", "toy_kernels.modules:ToyNorm"]
CROSS_ENTROPY = ["toy_kernels.ops:CrossEntropyFunction", "toy_kernels.modules:ToyCrossEntropyLoss"]


def _line(script: str, text: str) -> str:
    """`benchmark/scripts/<script>:<line>` of the line holding `text`."""
    lines = (SCRIPTS / script).read_text().splitlines()
    (number,) = [i + 1 for i, line in enumerate(lines) if text in line]
    return f"benchmark/scripts/{script}:{number}"


@pytest.fixture(scope="module")
def norm_sizes():
    """The token counts bench_norm.py sweeps, computed by the script's own code (its probe
    included), in this process, with the package on the path as an installed one would be."""
    saved_path, saved = list(sys.path), set(sys.modules)
    sys.path[:0] = [str(SCRIPTS), str(REPO / "src")]
    try:
        import model_configs

        return model_configs.PROBE_TOKENS, model_configs.MODELS["tiny"]["hidden_size"], model_configs.norm_sweep("tiny")
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved:
            if name in ("model_configs", "bench_utils") or name.split(".")[0] == "toy_kernels":
                del sys.modules[name]


def _shapes(recording: Recording) -> list[tuple[str, tuple[int, ...]]]:
    return [(r.target.rpartition(":")[2], r.args[0].shape) for r in recording.records]


# -- whole runs ---------------------------------------------------------------------------------


def test_the_sizes_the_script_computes_at_run_time_each_first_call_once(norm_sizes):
    """bench_norm.py sizes its sweep from a model table and a probe that calls the kernel,
    asks importlib.metadata for the uninstalled toy-kernels, and times 200 calls per size in its
    forward and full modes, each at least 20 ms (KERNEL_S): over 45 s run for real. Recorded: the
    probe and every size once, the Module and the Function it forwards to, each with the line
    of the script it came from, in seconds; the checkout is not written to."""
    probe, hidden, sizes = norm_sizes
    assert len(sizes) >= 5
    data = REPO / "benchmark" / "data"
    assert not data.exists()
    rec = record_calls(REPO, "benchmark/scripts/bench_norm.py", [*NORM, "toy_kernels.missing:Nope"],
                       argv=["--reps", "200"], limits=RecordLimits(time_s=40))
    # finished within 40 s: the loops' forward calls alone would sleep 200 × 2 × 6 × 20 ms = 48 s
    assert (rec.ended, rec.detail) == ("finished", ""), rec
    expected = [("NormFunction", (probe, hidden))]
    for tokens in sizes:
        expected += [("ToyNorm", (tokens, hidden)), ("NormFunction", (tokens, hidden))]
    assert _shapes(rec) == expected
    first, module, function = rec.records[:3]
    assert first.site == _line("bench_norm.py", "sizes = norm_sweep(")
    assert module.site == function.site == _line("bench_norm.py", 'return time_loop(lambda: layer(x), reps)')
    assert (function.kind, function.params) == ("autograd", ("X", "W", "eps"))
    assert function.args[1] == Arg("tensor", "Parameter", shape=(hidden,), dtype="float32", device="cpu",
                                   requires_grad=True)
    assert function.args[2] == Arg("value", "float", value=1e-6)
    assert (module.kind, module.params, len(module.args)) == ("module", ("hidden_states",), 1)
    assert dict(module.state)["variance_epsilon"].value == 1e-6
    assert dict(module.state)["weight"].shape == (hidden,)
    assert "toy-kernels 0.3.1 (from pyproject.toml) stood in for the uninstalled distribution" in rec.notes
    assert any(n.startswith("toy_kernels.missing:Nope: not watched: ModuleNotFoundError") for n in rec.notes)
    assert not data.exists(), "the script wrote its results into the checkout"


def test_with_stop_on_wrap_the_script_ends_at_its_next_mode_every_size_recorded(norm_sizes):
    """bench_norm.py goes over its sizes in three modes: once it is back at the first size (the
    backward mode), every size is recorded, and the rest of the script is not run. A repeat of
    the last signatures (the Module, then the Function it calls, at one size) goes on."""
    probe, hidden, sizes = norm_sizes
    rec = record_calls(REPO, "benchmark/scripts/bench_norm.py", NORM, argv=["--reps", "200"],
                       limits=RecordLimits(time_s=40, stop_on_wrap=True))
    assert rec.ended == "swept", rec
    expected = [("NormFunction", (probe, hidden))]
    for tokens in sizes:
        expected += [("ToyNorm", (tokens, hidden)), ("NormFunction", (tokens, hidden))]
    assert _shapes(rec) == expected
    # one forward pass over the sizes, 20 ms per real call: far from the 45 s the whole script takes
    assert rec.script_seconds < 15


def test_do_bench_calls_the_function_once():
    """bench_cross_entropy.py times a model-config sweep with triton.testing.do_bench, which
    has no device to time on here; the recorder's do_bench calls the function once and returns
    the three quantiles the script unpacks."""
    rec = record_calls(REPO, "benchmark/scripts/bench_cross_entropy.py", CROSS_ENTROPY, argv=["--tokens", "64"],
                       limits=RecordLimits(time_s=60))
    assert (rec.ended, rec.detail) == ("finished", ""), rec
    shapes = [(r.target.rpartition(":")[2], r.args[0].shape) for r in rec.records]
    assert shapes == [(name, (64, vocab)) for vocab in (80, 112, 144)
                      for name in ("ToyCrossEntropyLoss", "CrossEntropyFunction")]
    function = rec.of("toy_kernels.ops:CrossEntropyFunction")[0]
    assert [a.text() for a in function.args] == ["Tensor[64, 80] float32", "Tensor[64] int64", "-100", "'mean'"]
    assert function.site == _line("bench_cross_entropy.py", "return logits, lambda: loss(logits, target)")


def test_a_function_bound_before_the_patch_is_watched_and_the_record_limit_stops_the_script():
    """bench_add.py imports `scaled_add` from the package, which bound it from ops before the
    recorder replaced ops.scaled_add; it passes `alpha=` by keyword. Six signatures, four
    kept: the fifth stops the script."""
    rec = record_calls(REPO, "benchmark/scripts/bench_add.py", ["toy_kernels.ops:scaled_add"], argv=["--reps", "1000"],
                       limits=RecordLimits(time_s=60, max_records=4))
    assert rec.ended == "record_limit", rec
    assert "beyond 4" in rec.detail
    assert [(r.args[0].shape, r.args[1].dtype, r.kwargs) for r in rec.records] == [
        ((8, 256), "float64", (("alpha", Arg("value", "float", value=0.5)),)),
        ((32, 256), "float64", (("alpha", Arg("value", "float", value=0.5)),)),
        ((128, 256), "float64", (("alpha", Arg("value", "float", value=0.5)),)),
        ((8, 256), "float64", (("alpha", Arg("value", "float", value=2.0)),))]
    assert rec.records[0].params == ("x", "y", "alpha")
    assert rec.records[0].argument("alpha").value == 0.5


def test_a_script_that_crashes_after_two_sizes_gives_those_two_and_its_exception(norm_sizes):
    probe, hidden, sizes = norm_sizes
    rec = record_calls(REPO, "benchmark/scripts/bench_norm.py", NORM, argv=["--reps", "5", "--crash-after", "2"],
                       limits=RecordLimits(time_s=60))
    assert rec.ended == "error"
    assert "RuntimeError: planted failure after 2 sizes" in rec.detail
    # the traceback's last lines, not only its message, paths as the repository's own
    assert 'File "benchmark/scripts/bench_utils.py", line' in rec.detail
    assert "flopwatch-record-" not in rec.detail
    assert _shapes(rec) == [("NormFunction", (probe, hidden)),
                            ("ToyNorm", (sizes[0], hidden)), ("NormFunction", (sizes[0], hidden)),
                            ("ToyNorm", (sizes[1], hidden)), ("NormFunction", (sizes[1], hidden))]


def test_a_hanging_script_is_stopped_at_its_time_limit_with_what_it_captured(norm_sizes):
    probe, hidden, sizes = norm_sizes
    limits = RecordLimits(time_s=8, startup_s=120)
    rec = record_calls(REPO, "benchmark/scripts/bench_norm.py", NORM, argv=["--reps", "5", "--hang-after", "1"],
                       limits=limits)
    assert (rec.ended, rec.detail) == ("time_limit", "stopped after 8 s (RecordLimits.time_s)"), rec
    assert 8 <= rec.script_seconds < 20
    assert _shapes(rec) == [("NormFunction", (probe, hidden)),
                            ("ToyNorm", (sizes[0], hidden)), ("NormFunction", (sizes[0], hidden))]


def test_a_script_deaf_to_the_time_limit_is_killed_and_its_records_kept(norm_sizes):
    """The script ignores SIGALRM and hangs after its first size: the sandbox kills it at
    time_s + startup_s; the records it made before are on disk already."""
    probe, hidden, sizes = norm_sizes
    limits = RecordLimits(time_s=2, startup_s=30)
    rec = record_calls(REPO, "benchmark/scripts/bench_norm.py", NORM,
                       argv=["--reps", "5", "--hang-after", "1", "--hang-deaf"], limits=limits)
    assert rec.ended == "time_limit"
    assert "killed after 32 s" in rec.detail
    assert _shapes(rec) == [("NormFunction", (probe, hidden)),
                            ("ToyNorm", (sizes[0], hidden)), ("NormFunction", (sizes[0], hidden))]


def test_a_daemon_and_writes_outside_the_sandbox_are_contained_as_a_builds(tmp_path, norm_sizes):
    """After its first size the script starts a daemon (double fork, setsid) and writes 200 MiB
    to a file outside its folder: it is stopped at the write limit with its records, and the
    daemon does not outlive it."""
    probe, hidden, sizes = norm_sizes
    pid_file, outside = tmp_path / "daemon.pid", tmp_path / "outside.bin"
    try:
        rec = record_calls(REPO, "benchmark/scripts/bench_norm.py", NORM,
                           argv=["--reps", "5", "--daemon-pid-file", str(pid_file), "--write-outside", str(outside),
                                 "--write-mib", "200"],
                           limits=RecordLimits(time_s=60, write_bytes=16 << 20))
        assert rec.ended == "write_limit", rec
        assert "more than 16 MiB" in rec.detail
        assert outside.stat().st_size < 100 << 20
        assert rec.left_behind >= 1
        assert not _alive(int(pid_file.read_text()))
        assert _shapes(rec)[:3] == [("NormFunction", (probe, hidden)),
                                    ("ToyNorm", (sizes[0], hidden)), ("NormFunction", (sizes[0], hidden))]
    finally:
        if pid_file.exists() and pid_file.read_text() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the daemon this test started


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


# -- the caller's mistakes ----------------------------------------------------------------------


def test_the_callers_own_mistakes_raise(tmp_path):
    with pytest.raises(ValueError, match="not a file inside"):
        record_calls(REPO, "../test_bench_record.py", NORM)
    with pytest.raises(ValueError, match="not a file inside"):
        record_calls(REPO, "benchmark/scripts/nothing.py", NORM)
    with pytest.raises(ValueError, match="package.module:name"):
        record_calls(REPO, "benchmark/scripts/bench_norm.py", ["toy_kernels/ops.py:NormFunction"])


# -- pure parts ---------------------------------------------------------------------------------


def test_a_signature_is_the_sizes_and_values_not_requires_grad_nor_the_site():
    torch = pytest.importorskip("torch")
    x, w = torch.randn(4, 8, requires_grad=True), torch.ones(8)
    a = tuple(summarize(v) for v in (x, w, 1e-6, "mean", None, (2, 3), object()))
    assert [v.kind for v in a] == ["tensor", "tensor", "value", "value", "value", "sequence", "other"]
    assert a[5].items == (Arg("value", "int", value=2), Arg("value", "int", value=3))
    b = tuple(summarize(v) for v in (x.detach(), w, 1e-6, "mean", None, (2, 3), object()))
    assert signature("t", a, ()) == signature("t", b, ())
    assert signature("t", a, ()) != signature("t", (summarize(torch.randn(4, 9)), *a[1:]), ())
    assert signature("t", a, ()) != signature("t", (a[0], a[1], summarize(1e-5), *a[3:]), ())
    assert signature("t", a, ()) != signature("u", a, ())
    assert signature("t", a[:1], (("k", summarize(1)),)) != signature("t", a[:1], (("k", summarize(True)),))
    # quick keys: equal ones mean equal signatures; a changed size or value changes them
    assert quick_key("t", (x, 1e-6), {}, None) == quick_key("t", (x.detach(), 1e-6), {}, None)
    assert quick_key("t", (x, 1e-6), {}, None) != quick_key("t", (x, 1e-5), {}, None)
    assert quick_key("t", (x, 1), {}, None) != quick_key("t", (x, True), {}, None)
    assert quick_key("t", (x, 1), {}, None) != quick_key("t", (x.double(), 1), {}, None)
    assert quick_key("t", ([x],), {}, None) is not None


def test_the_call_site_is_the_innermost_line_of_the_script_else_of_the_repository():
    frames = [("/r/src/pkg/ops.py", 10), ("/r/bench/utils.py", 40), ("/r/bench/b.py", 7), ("/r/bench/b.py", 90),
              ("/usr/lib/runpy.py", 1)]
    assert call_site(frames, "/r/bench/b.py", "/r", "/r/src/pkg/ops.py") == "bench/b.py:7"
    assert call_site(frames, "/r/bench/other.py", "/r", "/r/src/pkg/ops.py") == "bench/utils.py:40"
    assert call_site(frames[-1:], "/r/bench/b.py", "/r", "") == ""


def test_a_forwarded_call_is_read_back_as_the_entrys_arguments():
    """liger_cross_entropy(input, target, weight=None, ignore_index=-100, ...) forwards to
    LigerCrossEntropyFunction.apply(input, target, weight, ignore_index, ...); liger_rms_norm(X, W,
    eps) is LigerRMSNorm.forward(hidden_states) with the module's weight and eps."""
    t = Arg("tensor", "Tensor", shape=(4096, 128256), dtype="bfloat16", device="cuda:0", requires_grad=True)
    i = Arg("tensor", "Tensor", shape=(4096,), dtype="int64", device="cuda:0", requires_grad=False)
    apply = CallRecord("liger_kernel.ops.cross_entropy:LigerCrossEntropyFunction", "autograd", "b.py:3",
                       (t, i, Arg("value", "NoneType"), Arg("value", "int", value=-100)),
                       params=("_input", "target", "weight", "ignore_index", "lse_square_scale"))
    got = entry_arguments(apply, {"input": 0, "target": 1, "weight": 2, "ignore_index": "ignore_index",
                                  "lse_square_scale": 4})
    assert got == {"input": t, "target": i, "weight": Arg("value", "NoneType"),
                   "ignore_index": Arg("value", "int", value=-100)}
    w = Arg("tensor", "Parameter", shape=(4096,), dtype="bfloat16", device="cuda:0", requires_grad=True)
    forward = CallRecord("liger_kernel.transformers.rms_norm:LigerRMSNorm", "module", "b.py:9", (),
                         kwargs=(("hidden_states", t),), state=(("weight", w), ("variance_epsilon",
                                                                            Arg("value", "float", value=1e-6))),
                         params=("hidden_states",))
    assert entry_arguments(forward, {"X": 0, "W": "self.weight", "eps": "self.variance_epsilon"}) == {
        "X": t, "W": w, "eps": Arg("value", "float", value=1e-6)}


def test_the_distribution_is_read_from_the_packaging_files_never_run(tmp_path):
    assert read_distribution(REPO) == ("toy-kernels", "0.3.1", "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "dyn"\ndynamic = ["version"]\n')
    (tmp_path / "setup.py").write_text('import sys\nsys.exit("never run")\nsetup(name="dyn", version="2.0")\n')
    assert read_distribution(tmp_path) == ("dyn", "2.0", "pyproject.toml")
    (tmp_path / "setup.py").unlink()
    assert read_distribution(tmp_path) == ("dyn", "0+unknown", "pyproject.toml")
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = cfgpkg\nversion = attr: cfgpkg.__version__\n")
    assert read_distribution(tmp_path) == ("cfgpkg", "0+unknown", "setup.cfg")
    (tmp_path / "setup.cfg").unlink()
    assert read_distribution(tmp_path) is None


def test_import_roots_find_the_targets_packages(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "python" / "lib" / "other").mkdir(parents=True)
    (tmp_path / "tests" / "other").mkdir(parents=True)
    assert import_roots(tmp_path, ["pkg.ops:f", "other.m:g"], ("shared",)) == ["shared", "src", "python/lib", "."]
    assert import_roots(REPO, NORM) == ["src", "."]


def test_a_recording_crosses_json_unchanged():
    rec = Recording("b.py", ("--x", "1"), (CallRecord("p.m:f", "function", "b.py:2",
                                                      (Arg("sequence", "tuple", items=(Arg("value", "int", value=1),)),),
                                                      (("k", Arg("other", "Thing")),), params=("a",)),),
                    "error", "boom", ("note",), 1.5, 0.5, 2)
    assert Recording.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_the_end_is_told_from_the_childs_end_file_and_the_sandbox(tmp_path):
    from workers.isolation.sandbox import ChildOutcome

    limits = RecordLimits(time_s=10, startup_s=5, max_records=3)
    ok = ChildOutcome(0, "", False, 1.0, "usage: bench.py [-h]\nbench.py: error: unrecognized arguments: --bt", "")
    assert bench_record._ending({"ended": "finished"}, ok, limits) == ("finished", "")
    ended, detail = bench_record._ending({"ended": "error", "detail": "SystemExit: 2"}, ok, limits)
    assert ended == "error" and detail.endswith("unrecognized arguments: --bt")
    assert bench_record._ending({"ended": "record_limit"}, ok, limits)[1] == \
        "stopped at the first signature beyond 3 (RecordLimits.max_records)"
    died = ChildOutcome(-11, "SIGSEGV", False, 1.0, "Fatal Python error: Segmentation fault", "")
    assert bench_record._ending(None, died, limits) == (
        "crashed", "the recording process ended (SIGSEGV) before the script did:\nFatal Python error: Segmentation fault")
    killed = ChildOutcome(-9, "SIGKILL", True, 15.0, "", "")
    assert bench_record._ending(None, killed, limits)[0] == "time_limit"
