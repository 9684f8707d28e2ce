"""The recording child: runs one benchmark script as `__main__` with its targets replaced by
recording wrappers (`python -m workers.recorder.bench_child REQUEST.json`, in the sandbox of
`workers.recorder.bench_record`).

Per call of a target: the arguments are summarised (`workers.recorder.calls`); the first call of
each signature is written to the records file (one JSON line, flushed before the real call runs,
so a crash inside it keeps it) and then made for real, since scripts size what comes next from
what came before (a memory probe, an output's shape). A later call of a signature seen before is
not made: it gets the first call's output again, detached (a leaf that still requires grad where
the output did, so the script's `y.backward(dy)` works and costs nothing), while the outputs of
the last `KEPT_OUTPUTS` signatures are kept; an older signature is called for real again (its
output was let go, so the memory a script probes is not filled with old outputs) and its output
handed out detached all the same, so a backward loop over it costs nothing either. Only the
first call of a signature returns its real output, graph and all.
`triton.testing.do_bench` / `do_bench_cudagraph` call the function once and return the time of
that call in the form Triton returns. The run stops at the time limit (a SIGALRM in the script's
thread), or when a signature beyond the record limit arrives, or when the script ends; the way
it ended goes to the end file.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path

from workers.recorder.calls import CallRecord, call_site, module_state, quick_key, signature, summarize
from workers.recorder.distribution import read_distribution, write_dist_info
from workers.recorder.targets import install

# Outputs kept for calls of a signature seen before: a timing loop repeats one signature, and a
# script's modes (forward, backward, full) go over its sizes again in turn.
KEPT_OUTPUTS = 4
# Quick keys remembered (`workers.recorder.calls.quick_key` → signature), oldest let go first.
QUICK_KEYS = 256
# Lines of the script's exception kept in the end file.
TRACEBACK_LINES = 12


class Stop(BaseException):
    """Ends the script from inside (a BaseException: a script's `except Exception` lets it by)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Recorder:
    """The wrappers' hook: summarise, keep the first call of a signature, spare the others."""

    def __init__(self, records_path: Path, script: str, root: str, max_records: int, stop_on_wrap: bool = False):
        self.out = open(records_path, "a", buffering=1)  # noqa: SIM115 - open for the child's life
        self.script, self.root, self.max_records = script, root, max_records
        self.stop_on_wrap = stop_on_wrap
        self.seen: dict[str, int] = {}  # signature → the order it was first seen in
        self.outputs: OrderedDict[str, object] = OrderedDict()
        self.quick: dict[tuple, str] = {}
        self._owners: dict[tuple, object] = {}
        self._paths: dict[str, str] = {}
        self.active = True

    def __call__(self, target, kind, params, own_file, call, args, kwargs, owner):
        if not self.active:
            return call(*args, **kwargs)
        quick = quick_key(target, args, kwargs, owner)
        key = self.quick.get(quick) if quick is not None else None
        if key is not None and key in self.outputs:  # a timing loop's next call: the cheap path
            self._wrapped(key)
            self.outputs.move_to_end(key)
            return _fresh(self.outputs[key])
        try:
            a = tuple(summarize(v) for v in args)
            kw = tuple((k, summarize(v)) for k, v in kwargs.items())
            state = module_state(owner) if owner is not None else ()
            key = signature(target, a, kw, state)
        except Exception:  # noqa: BLE001 - an argument that cannot be described: not recorded
            return call(*args, **kwargs)
        if quick is not None:
            self.quick[quick] = key
            self._owners[quick] = owner  # held, so that its id is not reused while the key stands
            while len(self.quick) > QUICK_KEYS:
                oldest = next(iter(self.quick))
                del self.quick[oldest], self._owners[oldest]
        if key in self.outputs:
            self._wrapped(key)
            self.outputs.move_to_end(key)
            return _fresh(self.outputs[key])
        first = key not in self.seen
        if first:
            if len(self.seen) >= self.max_records:
                raise Stop("record_limit")
            self.seen[key] = len(self.seen)
            record = CallRecord(target, kind, call_site(self._stack(), self.script, self.root, own_file),
                                a, kw, state, tuple(params))
            self.out.write(json.dumps(record.to_dict()) + "\n")
        else:
            self._wrapped(key)
        result = call(*args, **kwargs)
        self.outputs[key] = _fresh(result)
        while len(self.outputs) > KEPT_OUTPUTS:
            self.outputs.popitem(last=False)
        # The first call's output keeps its graph (a memory probe's backward is part of what it
        # measures); a repeat made again, its output let go, is a repeat all the same.
        return result if first else _fresh(result)

    def _wrapped(self, key: str) -> None:
        """With `stop_on_wrap`, end the script at a repeat of a signature that two or more newer
        ones followed: the script has gone back to a size it recorded before (a sweep's next mode,
        or its memory pass, over the same sizes), so every size of the sweep is recorded. A
        repeat of one of the last two (the same size's next mode, a module and the Function it
        calls) goes on."""
        if self.stop_on_wrap and self.seen.get(key, len(self.seen)) <= len(self.seen) - 3:
            raise Stop("swept")

    def _stack(self) -> list[tuple[str, int]]:
        frames, frame = [], sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            path = self._paths.get(name)
            if path is None:
                path = self._paths[name] = os.path.realpath(name) if not name.startswith("<") else name
            frames.append((path, frame.f_lineno))
            frame = frame.f_back
        return frames


def _fresh(value):
    """`value` as a repeated call hands it out: tensors detached from the first call's graph (a
    leaf requiring grad where the output did), containers rebuilt around them."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        out = value.detach()
        return out.requires_grad_(True) if value.requires_grad else out
    if type(value) is tuple or type(value) is list:
        return type(value)(_fresh(v) for v in value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_fresh(v) for v in value))
    if type(value) is dict:
        return {k: _fresh(v) for k, v in value.items()}
    return value


def _statistics(times: list[float], quantiles, return_mode: str):
    """What `triton.testing.do_bench` returns for these times (its `_summarize_statistics`)."""
    if quantiles is not None:
        ret = [times[0] for _ in quantiles]
        return ret[0] if len(ret) == 1 else ret
    return list(times) if return_mode == "all" else times[0]


def _once(fn, grad_to_none=None) -> list[float]:
    if grad_to_none is not None:
        for x in grad_to_none:
            x.grad = None
    start = time.perf_counter()
    fn()
    return [(time.perf_counter() - start) * 1e3]


def patch_triton_bench() -> bool:
    """`triton.testing.do_bench` and `do_bench_cudagraph` call `fn` once; False where Triton
    cannot be imported."""
    try:
        from triton import testing
    except Exception:  # noqa: BLE001 - no Triton, or one that fails to import on this node
        return False

    def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean", **_):
        return _statistics(_once(fn, grad_to_none), quantiles, return_mode)

    def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean", **_):
        return _statistics(_once(fn, grad_to_none), quantiles, return_mode)

    testing.do_bench, testing.do_bench_cudagraph = do_bench, do_bench_cudagraph
    return True


def _alarm(_signum, _frame):
    raise Stop("time_limit")


def _last_lines(exc: BaseException, script: str, root: str) -> str:
    """The exception's last lines, its traceback from the script's own frame on (not the
    recorder's nor runpy's), paths relative to the repository."""
    tb = exc.__traceback__
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
    lines = text.replace(root + "/", "").rstrip().splitlines()
    return "\n".join(lines[-TRACEBACK_LINES:])


def run(request: dict) -> dict:
    """Run the request's script under the recorder; the end record ({"ended", "detail",
    "notes", "script_s"}). Records go to the request's records file as they are made."""
    root = os.path.realpath(request["root"])
    script = os.path.realpath(os.path.join(root, request["script"]))
    notes: list[str] = []
    # As `python script.py` would: the script's folder first; then the import roots. Not the
    # sandbox's folder, which `python -m` put first.
    if sys.path and os.path.realpath(sys.path[0] or ".") == os.path.realpath(os.getcwd()):
        del sys.path[0]
    sys.path[:0] = [os.path.dirname(script), *request["roots"]]
    dist = read_distribution(Path(root))
    if dist is not None:
        import importlib.metadata

        try:
            importlib.metadata.distribution(dist[0])
        except importlib.metadata.PackageNotFoundError:
            write_dist_info(Path(request["dist_dir"]), dist[0], dist[1])
            sys.path.append(request["dist_dir"])
            importlib.invalidate_caches()
            notes.append(f"{dist[0]} {dist[1]} (from {dist[2]}) stood in for the uninstalled distribution")
    try:
        import torch  # noqa: F401 - the targets are torch code; their kinds are told by torch's classes
    except ImportError:
        notes.append("torch cannot be imported here: only plain functions can be watched")
    if patch_triton_bench():
        notes.append("triton.testing.do_bench calls its function once")
    recorder = Recorder(Path(request["records"]), script, root, int(request["max_records"]),
                        bool(request.get("stop_on_wrap")))
    os.chdir(os.path.dirname(script))
    for target in request["targets"]:
        try:
            install(target, recorder, (root,))
        except BaseException as exc:  # noqa: BLE001 - the repository's import: reported, the others go on
            message = (str(exc).strip().splitlines() or [""])[0]
            notes.append(f"{target}: not watched: {type(exc).__name__}" + (f": {message}" if message else ""))
    sys.argv = [script, *request["argv"]]
    ended, detail = "finished", ""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, float(request["time_s"]))
    start = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    except Stop as stop:
        ended = stop.reason
    except SystemExit as exc:
        if exc.code not in (None, 0):
            ended, detail = "error", f"SystemExit: {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - the script's own failure is a result
        ended, detail = "error", _last_lines(exc, script, root)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        recorder.active = False
    return {"ended": ended, "detail": detail, "notes": notes, "script_s": round(time.perf_counter() - start, 3)}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    end = run(request)
    Path(request["end"]).write_text(json.dumps(end))
    sys.stdout.flush()
    sys.stderr.flush()
    # Not the interpreter's own exit: a thread the script left running would hold it up.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
