"""Plain records passed between stages (driver ↔ Ray tasks ↔ sandboxed child).

Every record is a frozen dataclass that round-trips through JSON (`to_dict` / `from_dict`), so it
can cross process and node boundaries without pickling project classes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


_SCALARS = (str, int, float, bool, type(None))


def _plain(obj: Any) -> Any:
    if isinstance(obj, _SCALARS):  # first: most values are (samples, maps), and the checks below cost more
        return obj
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    return obj


class Record:
    """Mixin: JSON round-trip for frozen dataclasses whose fields are plain values."""

    def to_dict(self) -> dict:
        return _plain(self)

    @classmethod
    def from_dict(cls, data: dict):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Shape(Record):
    """Problem size of one op call, e.g. {"M": 512, "N": 512, "K": 512} for gemm."""

    dims: dict[str, int]

    @property
    def key(self) -> str:
        """Stable text form used in the store and on pages: `M=512,N=512,K=512`."""
        return ",".join(f"{k}={v}" for k, v in self.dims.items())

    @property
    def label(self) -> str:
        return "×".join(str(v) for v in self.dims.values())

    @classmethod
    def from_key(cls, key: str) -> Shape:
        dims = {}
        for part in key.split(","):
            name, _, value = part.partition("=")
            dims[name.strip()] = int(value)
        return cls(dims)


@dataclass(frozen=True)
class Binding(Record):
    """How the harness calls a built variant.

    kind: `c` (extern "C" entry point), `python` (a function or nn.Module class of a file or
    module, or a torch.library op, taking tensors), `triton` (like `python`: a launcher of a
    Triton kernel, compiled by Triton's JIT on the device), `pybind11` (a function of a module
    built from the sources, taking tensors), `raw` (a __global__ kernel launched with grid/block
    expressions of the shape), `builtin` (the op's own torch peer, added by flopwatch when the
    repository declares no peer).

    `returns`: the entry returns its output (`O = f(Q, K, V)`) instead of writing into one the
    harness hands it; `args` orders its positional arguments by name, `kwargs` are constant
    keyword arguments.
    """

    kind: str
    entry: str
    module: str = ""
    grid: tuple = ()
    block: tuple = ()
    args: tuple = ()  # argument order by name (A, B, C, M, N, K, alpha, beta, the op's scalars)
    returns: bool = False
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Variant(Record):
    """One kernel variant as declared by its `variant.toml` (validated).

    `files` lists every file of the variant folder relative to it; `sources` are the ones
    compiled. `shapes` is the resolved list (named shape sets are expanded at load time);
    an empty tuple with `peer=True` means "every shape the other variants of the op use".
    """

    name: str
    op: str
    backend: str
    folder: str  # repository-relative folder of the variant
    sources: tuple[str, ...]
    binding: Binding
    dtypes: tuple[str, ...]
    shapes: tuple[Shape, ...]
    layout: str = "nt"
    alpha_beta: bool = False
    arches: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    openmp: bool = False
    peer: bool = False
    devices: tuple[str, ...] = ()
    timeout_s: float = 120.0
    rtol: float | None = None
    atol: float | None = None
    launch: dict = field(default_factory=dict)
    makefile: str = ""
    description: str = ""
    triton: dict = field(default_factory=dict)  # triton back end: the `[triton]` table (kernel, signature, ...)
    # The dtype the kernel writes its output in, where it is not the op's (a HipKittens GEMM
    # writes bf16 C; the gemm op's own output is fp32). Empty: the op's.
    output_dtype: str = ""
    # An op declared by the benchmarked repository (`workers.ops.repo.RepoOp` as a dict, its
    # source included; or a problem file, `workers.ops.problem.ProblemOp`): it travels with the
    # variant to the job's child. Empty: a built-in op.
    repo_op: dict = field(default_factory=dict)
    # Torch extensions the variant calls (`workers.torch_ext.spec.ExtensionSpec` as dicts), read
    # from the repository's setup.py / load() / load_inline() call; built with the variant.
    extensions: tuple[dict, ...] = ()
    # Repository-relative files outside the variant folder that its build ships: sources that
    # lead up into the repository, the problem file, the extensions' sources.
    extra_files: tuple[str, ...] = ()
    # A point of a swept variant: its value per axis (`[params]`; the name is
    # `family[A=1,B=2]`, `workers.core.params`). Empty for a variant without axes.
    params: dict = field(default_factory=dict)
    # A swept variant before `pipeline.project.sweep.expand` makes one record per point: the points.
    points: tuple[dict, ...] = ()
    # Shapes that are only checked, never timed (`[[check]]`, a challenge's tests:): each
    # {"dims", "rtol", "atol", "where"}; run once per variant, dtype and device in the job's
    # process (`workers.job.check_points`), beside the timed `shapes`.
    check_points: tuple[dict, ...] = ()
    # The passes the manifest asks for (`modes`: forward, backward, full); empty: forward only.
    # `expand` makes one record per pass, each with its `mode` (`workers.core.params`: a pass
    # other than forward is an axis of the record's name).
    modes: tuple[str, ...] = ()
    mode: str = "forward"

    @property
    def family(self) -> str:
        """The name of the manifest a point comes from (a variant without axes: its own)."""
        from workers.core.params import family_of

        return family_of(self.name) if self.params else self.name

    @classmethod
    def from_dict(cls, data: dict) -> Variant:
        data = dict(data)
        binding = dict(data["binding"])
        for key in ("grid", "block", "args"):
            binding[key] = tuple(binding.get(key, ()))
        data["binding"] = Binding(**binding)
        data["shapes"] = tuple(Shape(**s) if isinstance(s, dict) else s for s in data.get("shapes", ()))
        for key in ("sources", "dtypes", "arches", "flags", "include_dirs", "devices", "extensions", "extra_files",
                    "points", "check_points", "modes"):
            if key in data:
                data[key] = tuple(data[key])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class InvalidVariant(Record):
    """A variant folder whose manifest could not be loaded; carries the exact complaint."""

    folder: str
    manifest: str
    error: str

    @property
    def name(self) -> str:
        return self.folder.rstrip("/").split("/")[-1]


@dataclass(frozen=True)
class DeviceInfo(Record):
    """What a run node measures on: kind `cpu`, `cuda` or `rocm`, plus identity for the record."""

    kind: str
    name: str
    arch: str = ""
    uuid: str = ""
    driver: str = ""
    runtime: str = ""
    node: str = ""
    extra: dict = field(default_factory=dict)
    pci_bus_id: str = ""
    # CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES as the job's process saw them
    visible: dict = field(default_factory=dict)
    ray_node_id: str = ""
    slot: str = ""  # the device slot of the run (`cuda/1`): which warm runner measured it
    cpus: str = ""  # the CPUs the job's processes were pinned to ("0-7,64-71"); "" where not pinned

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class BuildResult(Record):
    """Outcome of building one variant. `artifact` maps file name → bytes travel via Ray."""

    variant: str
    build_hash: str
    ok: bool
    toolchain: str
    log: str = ""
    first_errors: str = ""
    analysis: dict = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    skip_reason: str = ""
    # Processes the build's steps left behind, killed when it ended (`workers.isolation.containment`).
    left_behind: int = 0


@dataclass(frozen=True)
class Job(Record):
    """One check+time of a variant at one shape and dtype on one device kind."""

    variant: str
    op: str
    shape: Shape
    dtype: str
    device_kind: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.variant, self.shape.key, self.dtype)

    @classmethod
    def from_dict(cls, data: dict) -> Job:
        data = dict(data)
        data["shape"] = Shape(**data["shape"]) if isinstance(data["shape"], dict) else data["shape"]
        return cls(**data)


@dataclass(frozen=True)
class Result(Record):
    """The outcome of one job: stats or an error, never neither (a failure is a status).

    Invariants: a measured status (`status.MEASURED`: ok, unchecked) implies `median_s` and
    `samples_s` are set; any other status carries a `diagnostic` a developer can act on. `correctness` holds the error figures and the
    per-tile max-abs-error map; `timing` the CI and settings; `counters` profiler metrics under
    flopwatch's short names; `resources` the static analysis of the build.

    `launch_floor_s` is the median of the same call path at its floor (`workers.measure.launch_floor`:
    the entry at its smallest valid size, or an empty launch), measured for GPU results (None
    where it was not); `workers.core.launch.launch_bound` says whether `median_s` sits on it.
    `peak_mem_bytes` is the timed call's peak device allocation above what was allocated before
    it (`workers.measure.memory`; None on a CPU, which has no allocator counters); how both were
    measured is in `timing["launch_floor"]` and `timing["memory"]`.
    """

    variant: str
    op: str
    backend: str
    shape: str
    dtype: str
    device: str
    status: str
    build_hash: str = ""
    toolchain: str = ""
    diagnostic: str = ""
    median_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    samples_s: tuple[float, ...] = ()
    flops: float = 0.0
    bytes_moved: float = 0.0
    peer: bool = False
    correctness: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    counters: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)
    device_info: dict = field(default_factory=dict)
    stderr_tail: str = ""
    # Where the job's wall time went, in seconds: queue_s, start_s, load_s, correctness_s,
    # warmup_s, timing_s, profile_s (see `workers.phases`).
    phases: dict = field(default_factory=dict)
    # Hash of everything that can move this series' number (`pipeline.run.identity`): results with
    # equal identities measured the same thing.
    identity: str = ""
    launch_floor_s: float | None = None
    peak_mem_bytes: int | None = None

    @property
    def flops_per_s(self) -> float | None:
        if self.median_s and self.flops:
            return self.flops / self.median_s
        return None
