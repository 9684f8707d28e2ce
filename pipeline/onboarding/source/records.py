"""The plain frozen records the onboarding stages pass: what the readers find in the repository
(kernels, launches, tensors, calls, tests' comparisons, extensions' operators, entries,
problems), what the decisions make of them (the op and dtype `Guess`, the `Evidence` of a
kernel, the `Reference` an entry is checked against, its `Inputs`) and the `Draft` written.
Records only: no logic beyond what a field's own words say."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# -- C/C++/CUDA/HIP sources ---------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One kernel parameter: `const float* __restrict__ A` → type `const float*`, name `A`."""

    type: str
    name: str

    @property
    def pointer(self) -> bool:
        return "*" in self.type

    @property
    def element(self) -> str:
        """The pointed-to or plain type without qualifiers: `float`, `__half`, `int`."""
        split = [w for w in re.split(r"[\s*&]+", self.type) if w]
        words = [w for w in split if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict", "struct",
                                               "unsigned", "signed")]
        base = " ".join(words) or "int"
        return ("unsigned " + base) if "unsigned" in split else base


@dataclass(frozen=True)
class Kernel:
    """A `__global__` kernel definition (kind `global`) or a function a pybind11 module exports
    (kind `pybind11`, `entry` its Python name, `module` the module's)."""

    name: str
    params: tuple[Param, ...]
    file: str
    line: int
    kind: str = "global"
    template: str = ""  # the text inside `template <...>`, empty if none
    extern_c: bool = False
    body: str = ""
    entry: str = ""
    module: str = ""
    doc: str = ""  # pybind11: the docstring given to m.def
    returns: str = ""  # pybind11: the C++ return type (`torch::Tensor`, `void`), "" if not seen


@dataclass(frozen=True)
class Launch:
    """A launch of `kernel` in host code, its configuration as written there (expressions in
    the host's names, local constants already substituted where they are plain numbers)."""

    kernel: str
    template_args: tuple[str, ...]
    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str
    args: tuple[str, ...]
    file: str
    line: int
    constants: dict = field(default_factory=dict)
    caller: str = ""  # the host function the launch is written in ("" at file level or unknown)
    # host variable → (tensor variable, dimension): `const int B = Q.size(0);` gives B → (Q, 0)
    tensor_sizes: dict = field(default_factory=dict)
    # host variable → the expression it is set to in the launching function, before the launch:
    # `long long blocks = (n + 255) / 256;` gives blocks → "(n + 255) / 256"
    locals: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TypeAliases:
    """`typedef __half fw_half;` and `using fw_half = __half;` of one file: alias → target."""

    file: str
    aliases: dict


# -- Python scripts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PyLaunch:
    """A launch of a compiled kernel from Python.

    kernel: the kernel's name as the script looks it up ("" when it cannot be told);
    template_args: the arguments of a name expression (`"gemm<128, 64>"` → ("128", "64"));
    grid, block: one to three expressions each, in flopwatch's launch syntax over the script's
    names, trailing 1s dropped; shared: the dynamic shared memory (LDS) in bytes, an expression
    ("0" when none); args: each kernel argument's expression with its wrapper taken off
    (`ctypes.c_int(M)` → "M", `A.data_ptr()` → "A"); sources: repository-relative glob
    patterns of the kernel source files compiled for it (a relative path is tried from the
    script's folder and from the repository root, so both forms may appear), empty when the
    source is written in the script (`inline`) or cannot be followed; api: cupy | hip | cuda;
    file, line: where the launch is.
    """

    kernel: str
    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str
    args: tuple[str, ...]
    file: str
    line: int
    api: str
    sources: tuple[str, ...] = ()
    inline: str = ""
    template_args: tuple[str, ...] = ()
    constants: dict = field(default_factory=dict)  # launch records share this key with C++ launches


@dataclass(frozen=True)
class TensorMade:
    """A tensor a script creates: `A = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")`.

    name: the variable it is assigned to ("" when none; `self.w` for an attribute); shape: one
    entry per dimension, an int where the expression has one value, else its text ("M",
    "args.m"); dtype: fp32 | fp16 | bf16, torch's name for another (int64, float64, int8), "" when
    it cannot be told; explicit: the script names the dtype (an argument or a conversion such as
    `.half()`), rather than getting the library's default; factory: the call that makes it
    (`torch.randn`, `numpy.random.randn`); line. A dtype given through a variable with several
    values (a loop over dtypes) gives one record per value.
    """

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    explicit: bool
    factory: str
    line: int


@dataclass(frozen=True)
class PyCall:
    """A call of a module's function: `tk_kernel.dispatch_micro(A, B, C)` → callee
    "tk_kernel.dispatch_micro" (imports resolved: `import tk_kernel as tk` still gives
    tk_kernel), args ("A", "B", "C") as source text, kwargs name → text, line."""

    callee: str
    args: tuple[str, ...]
    kwargs: dict
    line: int


@dataclass(frozen=True)
class ScriptSizes:
    """The integers a script gives names (`M, N, K = 4096, 4096, 4096`, loops over literals,
    argparse defaults, its functions' defaults and call arguments): name → values, first seen
    first."""

    file: str
    sizes: dict


@dataclass(frozen=True)
class Sweep:
    """Sizes a repository runs an entry at to benchmark it, wherever a reader found them (a
    `triton.testing.Benchmark`, a benchmark script's loop or argparse defaults, a problem's
    `benchmarks:` list): the callee as the file calls it, each size name's values in the order
    written, and where (`file:line`), so a draft can name it. `pipeline.onboarding.decide.sizes`
    takes a sweep whichever reader made it."""

    file: str
    line: int
    callee: str
    sizes: dict  # size name → values, in order
    dtype: str = ""
    reader: str = ""  # the convention module that read it
    # Each point the sweep runs at (size name → value; the sizes above are their union) and the
    # call's arguments, a tensor's dimensions in those names or in numbers (a recorded call).
    points: tuple = ()
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    how: str = "read"  # read (from the text) | recorded (the script run under the recorder)


def sizes_of(points) -> dict[str, list]:
    """A sweep's `sizes` from its points: each size name's values, each once, in the order the
    points first give them."""
    sizes: dict[str, list] = {}
    for p in points:
        for k, v in p.items():
            values = sizes.setdefault(k, [])
            if v not in values:
                values.append(v)
    return sizes


@dataclass(frozen=True)
class BenchScript:
    """A benchmark script (under a `benchmark*/` folder, or named `bench*.py`): the words it
    writes and the packages it imports (which entries it may reach), and whether it runs as a
    script (a `__main__` block or top-level calls)."""

    file: str
    words: frozenset
    runnable: bool
    imports: frozenset = frozenset()  # the top-level packages it imports (`liger_kernel`, `torch`)


@dataclass(frozen=True)
class RunSizes:
    """What running the repository's benchmark scripts gave one entry: the calls recorded (one
    `Sweep` each, how = "recorded"), or why none were taken from a script that reaches it (it
    needs a GPU this node lacks, the script ended before calling it)."""

    entry: str
    sweeps: tuple = ()
    note: str = ""


@dataclass(frozen=True)
class Definition:
    """A top-level class or function of a package module and the words its body writes: a
    script calling `LigerRMSNorm` reaches `LigerRMSNormFunction` through it."""

    file: str
    name: str
    words: frozenset


# -- tests ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """One argument of a call in a test, as far as the test tells it.

    text: the expression as written; value: a constant (number, bool, string) when it is one;
    shape: a tensor's dimensions (an int, or a size name the test binds: "B"); sizes: the size
    names' values (from the parametrize row); dtype: fp32 | fp16 | bf16 | int64 ... ("" unknown);
    tensor: whether it is a tensor the test makes; varied: the size names the test's parametrize
    rows take several values of."""

    text: str
    value: object = None
    shape: tuple = ()
    sizes: dict = field(default_factory=dict)
    dtype: str = ""
    tensor: bool = False
    varied: tuple = ()

    @property
    def known(self) -> bool:
        return self.tensor or self.value is not None


@dataclass(frozen=True)
class Comparison:
    """A test comparing a call of the entry with a call of another callable.

    file, line: the comparison; test: the test function; compared_by: the comparison's name;
    entry_call: the dotted callee of the entry-side call as written; other: the other callable
    as the test names it (dotted, imports resolved: "torch.add", "test_local_fn",
    "pkg.mod.fn"); other_local: it is a function of the test file itself; entry_args / other_args:
    the calls' arguments (positional, in order; keyword arguments under their names in kwargs);
    output_index: the entry argument that is the compared output buffer (an entry writing its
    result), else None."""

    file: str
    line: int
    test: str
    compared_by: str
    entry_call: str
    other: str
    other_local: bool
    entry_args: tuple[Arg, ...]
    entry_kwargs: dict
    other_args: tuple[Arg, ...]
    other_kwargs: dict
    output_index: int | None = None
    tolerance: dict = field(default_factory=dict)  # the comparison's own rtol / atol, where constants


@dataclass(frozen=True)
class Calls:
    """A call of the entry in a test (compared or not): its arguments, for shapes where no
    comparison names a reference."""

    file: str
    line: int
    test: str
    args: tuple[Arg, ...]
    kwargs: dict
    callee: str = ""


@dataclass(frozen=True)
class TestNames:
    """The words of a test file (every identifier it writes): which tests may call an entry,
    before any is read closely."""

    file: str
    names: frozenset


@dataclass(frozen=True)
class Compared:
    """A comparison (`torch.testing.assert_close`, `torch.allclose`, ...) inside a test function."""

    file: str
    line: int
    test: str
    by: str


@dataclass(frozen=True)
class Sliced:
    """One comparison of the entry with a value the test computes: the record the draft's
    inputs are read from (`comparison`, its `other` being the slice) and what the generated
    function needs (`pipeline.onboarding.decide.sliced_reference` writes it)."""

    comparison: Comparison
    by_param: dict  # entry parameter → the test's expression passed for it
    outputs: tuple  # per output of the entry (one, or each element of a tuple it returns): the compared value
    statements: tuple  # (statement, the `with` statements around it), in the test's order
    needed: frozenset  # names the statements and outputs read that the test binds before them
    module: str  # the test module, dotted from the repository's root
    stops: dict  # a test name → the entry parameter whose tensor it holds (a copy of the entry's argument)
    positional: tuple  # the entry parameter each positional argument of the call is ("" for none)
    file: object = field(repr=False, default=None)  # the test file (`source.test_file.TestFile`)
    fn: object = field(repr=False, default=None)  # the test function (ast)


# -- Python modules and their entries ---------------------------------------------------------------


@dataclass(frozen=True)
class Forwarded:
    """What an entry only forwards to: `return LigerDyTFunction.apply(x, alpha, gamma, beta)`:
    callee ("LigerDyTFunction", "apply") and, per argument of that call, the entry parameter it
    is (so a test calling the callee calls the entry)."""

    callee: tuple[str, ...]
    params: tuple[str, ...]


@dataclass(frozen=True)
class Forwarder:
    """A top-level function of a package module that only forwards to another callable."""

    file: str
    name: str
    forwarded: Forwarded
    params: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """A public function of a module measured as an entry (a name bound to an autograd
    Function's `apply` is the function it is: the Function's `forward` less `ctx`).

    params: the positional parameters in order; keywords: the keyword-only ones; required: how
    many positional ones have no default; returns: it returns a value; output: the parameter it
    writes its result into where it returns nothing; any_keywords: it takes `**kwargs`;
    forwards: what it only forwards to, if that is all it does; applies: the names whose
    `.apply` its body calls (`LigerCrossEntropyFunction`: an autograd Function, perhaps)."""

    file: str
    name: str
    line: int
    params: tuple[str, ...]
    keywords: tuple[str, ...] = ()
    required: int = 0
    returns: bool = False
    output: str = ""
    any_keywords: bool = False
    forwards: Forwarded | None = None
    applies: tuple[str, ...] = ()


@dataclass(frozen=True)
class PyClass:
    """A top-level class where a file defines it: its bases (dotted, through the module's imports
    where it imports them: `torch.autograd.Function`), the line of its `backward` (0: none)."""

    file: str
    name: str
    line: int
    bases: tuple[str, ...] = ()
    backward: int = 0


@dataclass(frozen=True)
class AutogradFunction:
    """A class deriving from `torch.autograd.Function`, directly or through the repository's
    own classes (Liger's `LigerFusedLinearORPOFunction`, a `LigerFusedLinearPreferenceBase`);
    backward: where its backward is written, file:line ("" where none is)."""

    file: str
    name: str
    line: int
    backward: str = ""


@dataclass(frozen=True)
class Skipped:
    """A public function not drafted, and why (one line)."""

    entry: str
    reason: str


@dataclass(frozen=True)
class RefName:
    """A top-level function or class named as a reference may be (`X_ref`, `torch_X`, a class
    `Torch<X>`), where a file defines it; `bare`: a class built with no arguments."""

    file: str
    name: str
    line: int
    kind: str  # function | class
    bare: bool = False


@dataclass(frozen=True)
class Problem:
    """A KernelBench problem file (`class Model`, `get_inputs()`): its op, named after the file,
    and what its Model is built with (for pairing solutions): how many arguments
    `get_init_inputs()` returns (None where that cannot be read) and `Model.__init__`'s
    (names, required, most accepted), None where it cannot be told."""

    file: str
    op: str
    init_arity: int | None
    init_params: tuple | None


@dataclass(frozen=True)
class Solution:
    """A KernelBench solution file (`class ModelNew`) and `ModelNew.__init__`'s (names,
    required, most accepted), None where it cannot be told."""

    file: str
    init_params: tuple | None


# -- the kernel-challenge problem format (conventions/competition.py) ----------------------------------


@dataclass(frozen=True)
class ChallengeProblem:
    """A problem folder of the kernel-challenge format (reference.py with `generate_input` and
    `ref_kernel`, task.yml): its folder; the keywords of a shape (task.yml's benchmarks[0], the
    seed aside); the dtypes generate_input names, in its order, as (word, line) (`fp16`, `bf16`,
    `fp32`, `fp64`, `uint8`, `float8_e4m3fnuz`, …); where the problem's own code names the CUDA
    device (`reference.py:25`, "" for nowhere: code that asks whether CUDA is available chooses
    its device); whether reference.py has a `check_implementation` of its own; and why task.yml
    or reference.py cannot be read ("" when they can)."""

    folder: str
    keywords: tuple[str, ...] = ()
    dtypes: tuple[tuple[str, int], ...] = ()
    cuda_at: str = ""
    checks_itself: bool = False
    error: str = ""


@dataclass(frozen=True)
class ChallengeSubmission:
    """A file defining `custom_kernel(data)` for the problem in `folder` (its submission.py, or
    another submission in the folder or its solutions/ or submissions/ subfolders); where its
    code names the CUDA device ("" for nowhere)."""

    file: str
    folder: str
    cuda_at: str = ""


@dataclass(frozen=True)
class ChallengeHarness:
    """A file of the problems' own harness (reference.py, task.py, utils.py, eval.py,
    template*.py, the files task.yml lists): what the problems in `folders` run a submission
    with, never an entry of its own."""

    file: str
    folders: tuple[str, ...]


@dataclass(frozen=True)
class Extensions:
    """The torch extensions one file builds (`workers.torch_ext.spec.ExtensionSpec`s), read once;
    `error`: why they could not be read ("" when they were)."""

    file: str
    specs: tuple = ()
    error: str = ""


@dataclass(frozen=True)
class SchemaArg:
    """One argument of an operator schema (`Tensor(a!) out`, `float c`)."""

    name: str
    type: str

    @property
    def tensor(self) -> bool:
        return self.type.startswith("Tensor") and not self.type.startswith("Tensor[")

    @property
    def written(self) -> bool:
        """`Tensor(a!)`: the operator writes this argument (an output it is handed)."""
        return "!" in self.type


@dataclass(frozen=True)
class LibraryDef:
    """An operator a TORCH_LIBRARY block of one file defines (`m.def("name(args) -> returns")`),
    where (`path:line`), and whether the `def` names its function (a kernel for every device)."""

    ns: str
    name: str
    args: tuple[SchemaArg, ...]
    returns: str
    origin: str
    with_function: bool


@dataclass(frozen=True)
class LibraryImpl:
    """A kernel a TORCH_LIBRARY_IMPL block of one file registers for an operator, on a device kind."""

    ns: str
    name: str
    device: str


@dataclass(frozen=True)
class LibraryOp:
    """An operator a TORCH_LIBRARY block defines: `ns::name(args) -> returns`, where it is
    defined (`path:line`), and the device kinds of the TORCH_LIBRARY_IMPL blocks with a kernel
    for it (a `def` with a function is a kernel for every device)."""

    ns: str
    name: str
    args: tuple[SchemaArg, ...]
    returns: str
    origin: str
    devices: tuple[str, ...]

    @property
    def qualname(self) -> str:
        return f"torch.ops.{self.ns}.{self.name}"


@dataclass(frozen=True)
class Exported:
    """A C++ function an extension exports to Python: its Python name, parameters, whether it
    returns a tensor, and the text of the sources it is defined and launched in."""

    py_name: str
    params: tuple[Param, ...]
    returns: bool
    body_text: str


# -- decisions ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Guess:
    """What the signature says: the op and, per kernel parameter, the op argument it is.

    args: op argument names in parameter order (parameters that are none are left out when
    the op is a guess); guesses: (field, why) for each manifest field that is flopwatch's best
    guess; returns: a module function that returns its output (`torch::Tensor f(q, k, v)`).
    """

    op: str
    args: tuple[str, ...] = ()
    dtype: str = ""
    output_dtype: str = ""
    layout: str = ""
    reason: str = ""  # why no op fits exactly (when op is a guess)
    notes: tuple[str, ...] = ()
    guesses: tuple[tuple[str, str], ...] = ()
    returns: bool = False
    explicit_args: bool = False  # pybind11: write args although they could be left to the default
    dtype_origin: str = ""  # where a dtype the element type does not give comes from (a script's tensors)
    per_param: tuple[str | None, ...] = ()  # the op argument of each parameter, None for one that is none


@dataclass(frozen=True)
class Evidence:
    """What the rest of the repository says about a kernel, beyond its own file.

    script: the Python file the facts below come from ("" when none); tensors, sizes: what
    the script's tensors and sizes readings found there; call_args: the arguments that
    script passes to the kernel or module function (tensor variable names among them);
    type_aliases: `typedef __half fw_half` and friends of the repository's headers; launched:
    the kernels a module function launches (their element types give its dtype); includes:
    further repository files a pybind11 draft must compile (the file defining the exported
    function, when the module only declares it); module: the module name the scripts import
    (for a module named TORCH_EXTENSION_NAME in its source); backend: `hip` or `cuda` when a
    script compiles the kernel's file with hiprtc / NVRTC (a kernel of that file it does not
    launch is built the same way).
    """

    script: str = ""
    tensors: tuple[TensorMade, ...] = ()
    sizes: dict = field(default_factory=dict)
    call_args: tuple[str, ...] = ()
    type_aliases: dict = field(default_factory=dict)
    launched: tuple[Kernel, ...] = ()
    includes: tuple[str, ...] = ()
    module: str = ""
    backend: str = ""  # how the repository compiles the kernel's file, where a script tells (hiprtc: hip)


@dataclass(frozen=True)
class HostCode:
    """What the repository's host code and scripts say about its kernels, read once for every
    kernel draft: each kernel's launches (the first found first: a big-shape branch), the
    scripts' launches (`(script, PyLaunch)`), the functions pybind11 modules export (by C++
    name) and the type aliases of the headers (those defined two ways left out)."""

    launches: dict
    py_launches: tuple
    exported: dict
    type_aliases: dict


@dataclass(frozen=True)
class Reference:
    """How an entry is checked.

    kind: builtin | convention | test | none; op: the built-in op (builtin) with `mapped`, the
    op argument of each parameter; file, name, line: where the reference is defined (convention)
    or compared (test); module: its dotted module where it is imported by one ("" for a file of
    the repository taken by path, or a torch function given whole in `name`); comparison: the
    test's comparison (test); note: why a candidate was passed over; sliced: the module text of
    a reference made of the test's own statements."""

    kind: str
    op: str = ""
    mapped: tuple[str, ...] = ()
    file: str = ""
    name: str = ""
    line: int = 0
    module: str = ""
    compared_by: str = ""
    comparison: Comparison | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    sliced: str = ""


@dataclass(frozen=True)
class Equivalent:
    """A callee whose call is a call of the entry: the entry itself, what it forwards to
    (`LigerDyTFunction.apply`), or another function of the package forwarding to the same
    (Liger's `liger_multimodal_rotary_pos_emb` and `liger_qwen2vl_mrope` both return
    `LigerQwen2VLMRopeFunction.apply(...)`). positional: the entry parameter each positional
    argument is ("" for none); keywords: keyword → entry parameter."""

    callee: tuple[str, ...]
    positional: tuple[str, ...]
    keywords: dict
    origin: str = ""  # where the callee's first name comes from, as the entry's module imports it

    def params_of(self, args: tuple, kwargs: dict) -> dict:
        out = {}
        for a, p in zip(args, self.positional):
            if p:
                out[p] = a
        for k, v in kwargs.items():
            if k in self.keywords:
                out[self.keywords[k]] = v
        return out


@dataclass(frozen=True)
class Inputs:
    """The entry's arguments of one call: parameter names in order, their Args, the output's
    index (or None), whether they are a guess (no test calls the entry), and the test's call
    they were read from (`file:line`, "" where none)."""

    names: tuple[str, ...]
    args: tuple[Arg, ...]
    output: int | None
    guessed: bool = False
    where: str = ""


@dataclass(frozen=True)
class InputRow:
    """One input of a `[reference]` table: a tensor (`shape`: its dimensions by size name; a
    `dtype` of its own where it has one; `high` for integers; `output`: the buffer the entry
    writes) or a constant (`value`, where `shape` is None)."""

    name: str
    shape: tuple | None = None
    dtype: str = ""
    high: int | None = None
    output: bool = False
    value: object = None


@dataclass(frozen=True)
class Where:
    """Where an entry lives and how it is imported and run."""

    rel: str
    entry: str  # binding.entry
    backend: str  # python | triton | torch
    devices: tuple[str, ...]
    include_dir: str
    extension_from: str = ""  # a setup.py building the extension the package loads


@dataclass(frozen=True)
class Draft:
    """One drafted variant: its folder (repository-relative), files and what is left to do;
    guessed: the manifest fields written as best guesses (`op`, `dtypes`, `binding.grid` ...);
    entry: what its `binding.entry` calls ("" for none); reference: what it is checked against,
    in the words of its first line ("" for a kernel, whose op is its reference)."""

    name: str
    folder: str
    files: dict  # file name in the folder → text
    include_dir: str  # the kernel's folder, a shared include folder of flopwatch.toml
    op: str
    todo: tuple[str, ...] = field(default_factory=tuple)
    guessed: tuple[str, ...] = ()
    extra_include_dirs: tuple[str, ...] = ()  # folders of further files the draft includes
    entry: str = ""
    reference: str = ""
    sizes: str = ""  # where its timed sizes come from, in words ("" for a kernel's launch sizes)
    peer: str = ""  # the built-in op timed as its peer beside the repository's reference ("" for none)

    @property
    def include_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.include_dir, *self.extra_include_dirs)))


@dataclass(frozen=True)
class Plan:
    """What `new` / `init` drafts: one draft per kernel, module function or entry; one line for
    each thing measured through another draft or not read (`notes`); the public functions not
    drafted, and why (`skipped`); the files asked about (`files`, repository-relative)."""

    drafts: tuple[Draft, ...]
    notes: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    files: tuple[str, ...] = ()
