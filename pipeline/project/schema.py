"""The formats of `variant.toml` and `flopwatch.toml`, declared once as pydantic models.

The models check structure and types (strict: `true` is not a size, `"false"` is not a
boolean, an unknown key is an error); `pipeline.project.manifest` and `pipeline.project.config` add what a
type cannot say (a source file exists, a binding fits its back end, a shape has the op's
number of sizes). The same models give the JSON Schema published in `docs/schema/` (what
editors that understand TOML schemas use to complete and check the files) and the key tables
of docs/variants.md: `python -m pipeline.project.schema_docs --write` regenerates both, and a test fails
when they are stale.

`problems(error)` turns pydantic's complaints into (key, message) pairs, one per key: the dotted
key, what was expected and the value found, with a "did you mean" for a misspelt key or choice;
`problem(error)` is the first of them.
"""

from __future__ import annotations

import difflib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, WithJsonSchema

from pipeline.project.defaults import DEFAULT_BUDGET_S, DEFAULT_TIMEOUT_S
from workers.core.params import MODES
from workers.ops import DTYPES, OPS
from workers.ops.kernelbench import FP64, RULES

BACKENDS = ("cpp", "cuda", "hip", "python", "triton", "torch")
BINDING_KINDS = ("c", "raw", "pybind11", "python", "triton")
DEVICE_KINDS = ("cpu", "cuda", "rocm")

PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveSeconds = Annotated[float, Field(gt=0)]
NonEmptyStr = Annotated[str, Field(min_length=1, pattern=r"\S")]


# Every union below picks its branch by the value's TOML type (`_kind`), so a complaint comes
# from the one branch that fits (a list is checked as a list of shapes, never also as a
# shape-set name) and names the value's own position, not pydantic's branch labels.
_KINDS = ((bool, "<bool>"), (int, "<int>"), (float, "<float>"), (str, "<str>"), (list, "<list>"), (dict, "<table>"))
_TAGS = {tag for _, tag in _KINDS}


def _kind(value: Any) -> str | None:
    return next((tag for kind, tag in _KINDS if isinstance(value, kind)), None)


def _by_kind(name: str, expected: str, *branches: tuple[Any, str]):
    """A union of `(type, tag)` branches chosen by the value's kind; else "expected <expected>"."""
    members = tuple(Annotated[kind, Tag(tag)] for kind, tag in branches)
    union = members[0]
    for member in members[1:]:
        union = union | member
    return Annotated[union, Discriminator(_kind, custom_error_type=name, custom_error_message=expected)]


# One shape: sizes in the op's order (`[512, 512, 512]`) or by name (`{M = 256, N = 128, K = 64}`).
ShapeEntry = _by_kind("shape", "a list of sizes or a table of sizes",
                      (list[PositiveInt], "<list>"), (dict[str, PositiveInt], "<table>"))
Shapes = _by_kind("shapes", "a shape-set name or a non-empty list of shapes",
                  (NonEmptyStr, "<str>"), (Annotated[list[ShapeEntry], Field(min_length=1)], "<list>"))
Dimension = _by_kind("dimension", "a positive integer or an expression of the sizes",
                     (PositiveInt, "<int>"), (NonEmptyStr, "<str>"))
# In JSON Schema an integer is also a number, so the generated "oneOf" would reject 128.
Constexpr = Annotated[_by_kind("constexpr", "a number, a boolean or a string",
                               (bool, "<bool>"), (int, "<int>"), (float, "<float>"), (str, "<str>")),
                      WithJsonSchema({"type": ["boolean", "number", "string"]})]
Folders = _by_kind("folders", "a folder or a list of folders", (NonEmptyStr, "<str>"), (list[NonEmptyStr], "<list>"))


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BindingTable(_Table):
    """How the harness calls the built variant."""

    kind: Literal[BINDING_KINDS] = Field(
        description="c | raw | pybind11 (cuda, hip, torch) | python | triton; which ones a back end allows: "
                    "docs/variants.md")
    entry: NonEmptyStr = Field(description='extern "C" symbol; pybind11: the module\'s function; python, triton, torch: '
                                           '"file.py:name", "package.module:name" or "torch.ops.ns.name" '
                                           "(a function, or an nn.Module class)")
    module: str = Field("", description="pybind11: the module name (tk_kernel.dispatch_micro(A, B, C))")
    returns: bool = Field(False, description="the entry returns its output (O = f(Q, K, V)) instead of writing into "
                                             "one it is given; the allocation is timed with the call")
    grid: list[Dimension] = Field([], description="raw: 1 to 3 launch-grid expressions of the sizes (ceil, min, max)")
    block: list[Dimension] = Field([], description="raw: 1 to 3 block dimensions")
    args: list[NonEmptyStr] = Field([], description="argument order by name: raw kernels' parameters (A, B, C, M, N, "
                                                    "K, alpha, beta); tensor entries' positional arguments (default: "
                                                    "inputs then output, or inputs then the op's scalars with returns)")
    kwargs: dict[str, Constexpr] = Field({}, description="tensor entries: constant keyword arguments, e.g. "
                                                         'casting_mode = "llama"')


class BuildTable(_Table):
    """Compiler inputs beyond the sources."""

    flags: list[str] = Field([], description="extra compiler flags")
    openmp: bool = Field(False, description="cpp: compile and link with -fopenmp")
    include_dirs: list[NonEmptyStr] = Field(
        [], description="node-side include folders: ${SOMETHING_ROOT}/sub/folder (see below)")
    makefile: str = Field("", description="the upstream Makefile this variant mirrors (recorded in the build hash; not run)")


class ToleranceTable(_Table):
    """Overrides of the op's dtype-aware defaults."""

    rtol: Annotated[float, Field(ge=0)] | None = Field(None, description="relative Frobenius error ‖C − ref‖ / ‖ref‖")
    atol: Annotated[float, Field(ge=0)] | None = Field(None, description="max abs error, relative to max |ref|")


class LaunchTable(_Table):
    """What the compiler cannot see, for the occupancy and shared memory figures."""

    block_threads: PositiveInt | None = Field(None, description="threads per block of the launch")
    dynamic_lds_bytes: NonNegativeInt | None = Field(None, description="hip: LDS requested at launch time")
    dynamic_smem_bytes: NonNegativeInt | None = Field(None, description="cuda: shared memory requested at launch time")


class ProblemTable(_Table):
    """A KernelBench-style problem file: its `Model` is the reference and the peer, its
    `get_inputs()` / `get_init_inputs()` make the inputs."""

    file: NonEmptyStr = Field(description="the problem file (class Model, get_inputs(), get_init_inputs()), from "
                                          "the variant folder; its integer globals are the sizes of a shape")
    flops: NonEmptyStr | None = Field(None, description="FLOPs of one call, an expression of those sizes "
                                                        "(e.g. 2*N*N*N); without it rows show time and speed-up")
    rule: Literal[RULES] = Field(FP64, description='what a row is judged by: "fp64" (the Model in fp64, the '
                                                   'problem\'s tolerances), "kernelbench" (KernelBench today: '
                                                   'allclose to the Model in the job\'s dtype, atol=rtol=1e-4 fp32, '
                                                   '1e-2 fp16/bf16) or "kernelbench-v0" (1e-2 for all); the others\' '
                                                   'verdicts are kept, and shown where they differ')


class CheckTable(_Table):
    """Shapes that are only checked: never timed, no series of their own, run once per variant,
    dtype and device beside the timed `shapes` (which are each checked as well); a failure at one
    makes the variant's rows `incorrect`, naming the shape."""

    shapes: Shapes = Field(description="a shape set of flopwatch.toml, or a list of shapes, as `shapes` writes them "
                                       "(e.g. the test's own [[4, 8]])")
    rtol: Annotated[float, Field(ge=0)] | None = Field(None, description="these shapes' own relative Frobenius error "
                                                                         "limit (default: the variant's, [tolerance])")
    atol: Annotated[float, Field(ge=0)] | None = Field(None, description="these shapes' own max abs error limit, "
                                                                         "relative to max |ref| (default: the "
                                                                         "variant's)")


class ChallengeTable(_Table):
    """A problem folder in the kernel-challenge format: `reference.py` (generate_input, ref_kernel,
    optional check_implementation), `task.yml` (tests: and benchmarks:), `task.py` and the files
    task.yml lists; the entry is the submission's `custom_kernel(data)`."""

    folder: NonEmptyStr = Field(description="the problem folder (reference.py, task.yml), from the variant folder; "
                                            "its benchmarks: are the shapes, its tests: the check points")
    flops: NonEmptyStr | None = Field(None, description="FLOPs of one call, an expression of the task's keywords "
                                                        "(e.g. 2*m*n*k); without it rows show bytes per second")


# One size of a [reference] input's shape: a size's name (a shape's dimension) or a fixed length.
ShapeSize = _by_kind("size", "a size name or a positive integer", (PositiveInt, "<int>"), (NonEmptyStr, "<str>"))
REFERENCE_INT_DTYPES = ("int64", "int32", "bool")
# A floating input the test makes in a dtype of its own (fp32 coefficients beside fp16 data).
REFERENCE_FLOAT_DTYPES = ("fp32", "fp16", "bf16", "fp64")


class ReferenceInput(_Table):
    """One argument of a call: a tensor (shape, dtype), a constant (value), or the buffer an
    entry writes its result into (output)."""

    name: NonEmptyStr = Field(description="the argument's name (binding.args may order the entry's arguments by it)")
    shape: list[ShapeSize] = Field([], description='sizes in order: size names ("B") or fixed lengths; [] with '
                                                   "no value: a 0-d tensor")
    dtype: Literal[REFERENCE_INT_DTYPES + REFERENCE_FLOAT_DTYPES] | None = Field(
        None, description="int64 | int32 | bool (drawn in [0, high)); fp32 | fp16 | bf16 | fp64: randn in that dtype "
                          "whatever the job's; default: the job's floating dtype, randn")
    high: PositiveInt | None = Field(None, description="integers: the exclusive upper bound of their values "
                                                       "(default 2 for bool, else 100)")
    value: Constexpr | None = Field(None, description="a constant argument: number, boolean or string (no shape)")
    output: bool = Field(False, description="the entry writes its result into this buffer (the reference "
                                            "is called without it and returns the expected result)")


class ReferencePeer(_Table):
    """A built-in op timed as the op's peer instead of the reference itself (written by
    `flopwatch new` where the op agrees with the repository's reference on the test's inputs)."""

    op: NonEmptyStr = Field(description="a built-in op with a torch peer returning its output (docs/ops.md)")
    inputs: dict[str, NonEmptyStr] = Field(description="each [reference] input the op takes → the op's input it is "
                                                       '(e.g. { a = "A", b = "B" })')


class ReferenceTable(_Table):
    """The repository's own reference for a variant whose op is none of the built-ins: the
    callable its output is checked against (and timed as the op's peer), or check = "none"."""

    call: str = Field("", description='the reference callable, as binding.entry writes it: "file.py:name" (from the '
                                      'variant folder), "package.module:name", "torch.ops.ns.name", a torch '
                                      'function ("torch.add", "torch.nn.functional:gelu"); not with check = "none"')
    found: Literal["convention", "test", "hand"] = Field("hand", description="how it was found (shown): a name "
                                                                             "beside the entry, a test, by hand")
    where: str = Field("", description="where it is written, file:line (shown)")
    check: Literal["reference", "none"] = Field("reference", description='"none": no reference; measured with '
                                                                         "status unchecked, the output's digest "
                                                                         "kept per commit")
    sizes: dict[str, PositiveInt] = Field({}, description="default sizes (the shape when shapes is absent; sizes a "
                                                          "shape leaves out)")
    inputs: list[ReferenceInput] = Field(min_length=1, description="the arguments of one call, in order")
    flops: NonEmptyStr | None = Field(None, description="FLOPs of one call, an expression of the sizes")
    kwargs: dict[str, Constexpr] = Field({}, description="constant keyword arguments of the reference")
    peer: ReferencePeer | None = Field(None, description="a built-in op timed as the peer instead of the reference "
                                                         "in the job's dtype")


class ExtensionTable(_Table):
    """A torch C++/CUDA extension, built once per node with torch.utils.cpp_extension as the
    repository builds it (never inside a timed job)."""

    from_: str = Field("", alias="from", description="the file whose build call defines it, from the variant "
                                                    "folder: a setup.py (CUDAExtension, CppExtension) or a "
                                                    "Python file calling load() / load_inline()")
    name: str = Field("", description="which of the file's extensions (default: every one it builds); with "
                                      "sources: the extension's module name")
    sources: list[NonEmptyStr] = Field([], description="instead of from (a build flopwatch cannot read without "
                                                       "running it): the files, from the variant folder")
    extra_cflags: list[str] = Field([], description="with sources: host compiler flags")
    extra_cuda_cflags: list[str] = Field([], description="with sources: nvcc (hipcc) flags")
    extra_ldflags: list[str] = Field([], description="with sources: linker flags")
    include_dirs: list[NonEmptyStr] = Field([], description="with sources: include folders, from the variant folder")


class TritonTable(_Table):
    """The kernel compiled ahead of time (optional: without it the JIT's kernels are analysed
    at run time), and what Triton's JIT would learn from the call."""

    kernel: NonEmptyStr = Field(description="the @triton.jit / @triton.autotune function in the entry file")
    signature: dict[str, NonEmptyStr] = Field({}, description='pointer and scalar types, e.g. a_ptr = "*{dtype}"; '
                                                             "unlisted runtime parameters: i32")
    constexprs: dict[str, Constexpr] = Field({}, description="constexpr values (autotuned kernels: from their configs)")
    num_warps: PositiveInt | None = Field(None, description="launch option")
    num_stages: PositiveInt | None = Field(None, description="launch option")
    num_ctas: PositiveInt | None = Field(None, description="launch option")
    maxnreg: PositiveInt | None = Field(None, description="launch option")
    divisible_by_16: list[NonEmptyStr] = Field([], description="parameters the call guarantees are multiples of 16")


# One value of a parameter axis: what a compiler define, a template argument or a Triton
# constexpr can take (a table or a list is not one).
AxisValue = Annotated[_by_kind("axis value", "a number, a boolean or a string",
                               (bool, "<bool>"), (int, "<int>"), (float, "<float>"), (str, "<str>")),
                      WithJsonSchema({"type": ["boolean", "number", "string"]})]
Axis = Annotated[list[AxisValue], Field(min_length=1)]


class SweepTable(_Table):
    """Which points of the `[params]` product run, beyond the product itself."""

    points: list[dict[str, AxisValue]] = Field([], description="points added to the product, every axis set "
                                                               "(e.g. {BLOCK_M = 256, STAGES = 2})")
    exclude: list[dict[str, AxisValue]] = Field([], description="combinations left out: a table drops every "
                                                                "point having all its values "
                                                                "(e.g. {BLOCK_M = 256, STAGES = 4})")


class VariantManifest(_Table):
    """A variant's `variant.toml`."""

    model_config = ConfigDict(title="flopwatch variant.toml", extra="forbid", strict=True, frozen=True)

    name: NonEmptyStr = Field(description="unique in the suite: letters, digits, . _ - (shown on every page)")
    op: NonEmptyStr = Field(description=f"what it computes: {' | '.join(OPS)} (workers/ops/), an op the "
                                         "repository declares in an op.py (docs/ops.md), or the problem of "
                                         "[problem], or the variant's own name with [reference]")
    backend: Literal[BACKENDS] = Field(description="how it is built (docs/triton.md for triton; torch: extensions "
                                                   "built with torch.utils.cpp_extension)")
    description: str = Field("", description="shown in listings")
    sources: list[NonEmptyStr] = Field([], description="files compiled (python, triton, torch: imported), from "
                                                       "the variant folder; a path may lead up into the rest of "
                                                       "the repository (\"../../flash.cu\"); python, triton and "
                                                       "torch may leave it out")
    layout: NonEmptyStr | None = Field(None, description="one of the op's layouts, default its first; gemm: nt "
                                                         "(A[M,K], B[N,K], C = A·Bᵀ) | nn (B[K,N])")
    alpha_beta: bool = Field(False, description="the entry takes alpha, beta: C = α·A·B + β·C")
    dtypes: list[Literal[DTYPES]] = Field(min_length=1, description="input dtypes, one job each")
    output_dtype: Literal[DTYPES] | None = Field(None, description="the dtype the kernel writes its output in, "
                                                                   "when not the op's (gemm: fp32)")
    shapes: Shapes | None = Field(None, description="a shape set of flopwatch.toml, or a list of shapes "
                                                    "([512, 512, 512] or {M = 256, N = 128, K = 64}); "
                                                    "a peer may leave it out, a [problem] variant too (the "
                                                    "file's own sizes), a [reference] one ([reference] sizes)")
    arches: list[NonEmptyStr] = Field([], description='cuda: sm_XX[a] or "native"; hip: gfx942, gfx950; '
                                                      "triton: both kinds")
    devices: list[Literal[DEVICE_KINDS]] = Field([], description="default from the backend: cpp/python → cpu, "
                                                                 "cuda → cuda, hip → rocm, triton → cuda + rocm, "
                                                                 "torch → cuda + rocm (CUDA sources) or cpu")
    timeout_s: PositiveSeconds | None = Field(None, description="per job; a hang is killed here "
                                                                "(default: flopwatch.toml's)")
    peer: bool = Field(False, description="the reference everything else is compared with")
    binding: BindingTable
    build: BuildTable = BuildTable()
    tolerance: ToleranceTable = ToleranceTable()
    launch: LaunchTable = LaunchTable()
    triton: TritonTable | None = None
    problem: ProblemTable | None = None
    reference: ReferenceTable | None = None
    challenge: ChallengeTable | None = None
    check: list[CheckTable] = Field([], description="[[check]]: shapes only checked, each set with an optional "
                                                    "tolerance of its own")
    extensions: list[ExtensionTable] = Field([], description="[[extensions]]: torch extensions the variant calls")
    params: dict[str, Axis] = Field({}, description="parameter axes, name = [values]: every combination is a point, "
                                                    "run and tracked as a variant of its own, NAME[AXIS=value,...]; "
                                                    "a point is passed as -DAXIS=value (C/C++/CUDA/HIP), as template "
                                                    "arguments a raw entry names (\"k<AXIS>\"), as keyword arguments of "
                                                    "a python or triton entry and as the [triton] kernel's constexprs")
    sweep: SweepTable = SweepTable()
    modes: list[Literal[MODES]] = Field([], min_length=1, description=(
        "the passes measured, each a series of its own: forward (the call, gradients off; the default), "
        "backward (the forward once, then backward(dy) timed, gradients reset between samples), full (forward "
        "and backward per sample); backward and full need an entry that returns an output of an autograd graph "
        "(binding.returns) and check its gradients against the reference's; a point measured in them is named "
        "NAME[mode=backward] (docs/variants.md)"))


class DefaultsTable(_Table):
    """Defaults of every variant of the repository."""

    timing_budget_s: PositiveSeconds = Field(DEFAULT_BUDGET_S, description="timing time per job, after warm-up")
    timeout_s: PositiveSeconds = Field(DEFAULT_TIMEOUT_S, description="per job, where a manifest gives none")


class ProjectFile(_Table):
    """`flopwatch.toml` (or `[tool.flopwatch]` of pyproject.toml)."""

    model_config = ConfigDict(title="flopwatch flopwatch.toml", extra="forbid", strict=True, frozen=True)

    kernels: Folders = Field(["kernels"], description="folders searched for variant.toml (repository-relative)")
    include_dirs: list[NonEmptyStr] = Field([], description="shared headers, shipped and hashed with every build")
    shape_sets: dict[str, Annotated[list[ShapeEntry], Field(min_length=1)]] = Field(
        {}, description="name = [shapes], used by manifests' shapes")
    defaults: DefaultsTable = DefaultsTable()


# -- what went wrong, in a manifest writer's words ---------------------------------------------

def problem(error: ValidationError, model: type[BaseModel]) -> tuple[str, str]:
    """(key, message) for the first complaint of `error`, raised validating `model`."""
    return problems(error, model)[0]


def problems(error: ValidationError, model: type[BaseModel]) -> list[tuple[str, str]]:
    """(key, message) for every mistake `error` found validating `model`, an unknown key first:
    one per key (a value no member of a union accepts is one mistake, not one per member)."""
    errors = error.errors(include_url=False)
    unknown = [x for x in errors if x["type"] == "extra_forbidden"]
    # A misspelt key is the cause of the "missing" complaint about the key it was meant to be.
    misspelt_in = {tuple(_loc(x)[:-1]) for x in unknown}
    rest = [x for x in errors if x["type"] != "extra_forbidden"
            and not (x["type"] == "missing" and tuple(_loc(x)[:-1]) in misspelt_in)]
    found: dict[str, str] = {}
    for e in unknown + rest:
        key, message = _complaint(e, model)
        found.setdefault(key, message)
    return list(found.items())


def _loc(e: dict) -> list:
    return [part for part in e["loc"] if not (isinstance(part, str) and part in _TAGS)]


def _complaint(e: dict, model: type[BaseModel]) -> tuple[str, str]:
    loc = _loc(e)
    key = _key(loc)
    kind, value, ctx = e["type"], e.get("input"), e.get("ctx") or {}
    if kind == "extra_forbidden":
        known = sorted(_fields_at(model, loc[:-1]))
        hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
        where = f"[{_key(loc[:-1])}]" if len(loc) > 1 else "the top level"
        return key, ("unknown key" + (f"; did you mean {hint[0]!r}?" if hint else "")
                     + f" (known in {where}: {', '.join(known)})")
    if kind == "missing":
        return key, "missing"
    if kind == "literal_error":
        options = [o.strip().strip("'") for o in str(ctx.get("expected", "")).replace(" or ", ", ").split(",")]
        hint = difflib.get_close_matches(str(value), options, n=1) if isinstance(value, str) else []
        return key, (f"expected one of {', '.join(options)}, got {_toml(value)}"
                     + (f"; did you mean {hint[0]!r}?" if hint else ""))
    return key, f"expected {_expected(kind, ctx, e['msg'])}, got {_toml(value)}"


_EXPECTED = {
    "int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
    "string_type": "a string", "list_type": "a list", "dict_type": "a table", "model_type": "a table",
    "model_attributes_type": "a table",
}


def _expected(kind: str, ctx: dict, msg: str) -> str:
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    if kind == "greater_than":
        return f"a number greater than {ctx['gt']:g}"
    if kind == "greater_than_equal":
        return f"a number of at least {ctx['ge']:g}"
    if kind == "too_short":
        return "a non-empty list" if ctx.get("min_length") == 1 else f"at least {ctx.get('min_length')} items"
    if kind == "string_too_short" or kind == "string_pattern_mismatch":
        return "a non-empty string"
    if kind in ("shape", "shapes", "dimension", "constexpr", "folders", "axis value", "size"):
        return msg
    return msg[0].lower() + msg[1:] if msg else kind


def _toml(value: Any) -> str:
    """A value as the manifest wrote it, with its TOML type where that is the mistake."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, str):
        return f"{json.dumps(value)[:120]} (a string)"
    if isinstance(value, dict):
        return "a table"
    text = json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _key(loc: list) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _fields_at(model: type[BaseModel], loc: list) -> set[str]:
    """Field names of the table at `loc` inside `model` (for "did you mean")."""
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list of tables ([[check]], [[extensions]]): the table below
        by_key = {f.alias or name: f for name, f in model.model_fields.items()}
        annotation = by_key[part].annotation if part in by_key else None
        nested = _nested_model(annotation)
        if nested is None:
            return set()
        model = nested
    return {f.alias or name for name, f in model.model_fields.items()}


def _nested_model(annotation) -> type[BaseModel] | None:
    """The table model inside an annotation (`Table`, `Table | None`, `list[Table]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


# -- published forms ---------------------------------------------------------------------------

SCHEMAS = {"variant": VariantManifest, "flopwatch": ProjectFile}


def json_schema(which: str) -> dict:
    """The JSON Schema of `variant.toml` ("variant") or `flopwatch.toml` ("flopwatch")."""
    schema = SCHEMAS[which].model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
