"""The dtype a draft measures at: a kernel's from the element type of its first input (the
repository's typedefs seen through), else from the tensors the launching script makes, else
from the words of its file; a module function's from the kernels it launches; an extension's
from its kernels' pointers; an entry's from the tensors its callers make; and the default where
nothing tells. Decisions over records; nothing is read here."""

from __future__ import annotations

import re
from collections import Counter

from pipeline.onboarding.conventions.cuda_kernels import find_kernels
from pipeline.onboarding.source.records import Evidence, Kernel, TensorMade

DTYPE_OF = {
    "float": "fp32", "float32_t": "fp32",
    "__half": "fp16", "half": "fp16", "_Float16": "fp16", "__fp16": "fp16", "half_t": "fp16", "fp16_t": "fp16",
    "float16_t": "fp16", "hip_half": "fp16", "__hip_half": "fp16",
    "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "__hip_bfloat16": "bf16", "hip_bfloat16": "bf16",
    "__bf16": "bf16", "bfloat16": "bf16", "bf16_t": "bf16", "bfloat16_t": "bf16",
}


INT_TYPES = ("int", "unsigned int", "unsigned", "uint", "uint32_t", "int32_t", "int64_t", "long", "size_t",
             "long long", "unsigned long", "uint64_t", "unsigned long long")


FLOAT_DTYPES = ("fp32", "fp16", "bf16")


def kind_of(param) -> str:
    """What a parameter carries: `tensor` (a pointer, a tensor), `int`, `float` or `other`."""
    if param.pointer or "Tensor" in param.type or "py::object" in param.type:
        return "tensor"
    el = param.element
    if el in INT_TYPES or el.endswith("int") or el in ("int64_t", "long"):
        return "int"
    if el in ("float", "double"):
        return "float"
    return "other"


def element_of(param, evidence: Evidence) -> str:
    """The parameter's element type with the repository's typedefs seen through."""
    element = param.element
    for _ in range(4):
        if element in DTYPE_OF or element not in evidence.type_aliases:
            break
        element = evidence.type_aliases[element]
    return element


def kernel_dtypes(kernel: Kernel, mapped: tuple[str | None, ...], module, file_text: str,
            evidence: Evidence) -> tuple[str, str, str, str]:
    """(dtype, output dtype when not the op's, where it comes from when not the element type,
    why it is a guess or ""). The op's first input gives the dtype; with no parameter for it
    (an op that is a guess), the first pointer the kernel reads that has a float type."""
    by_arg = {a: p for a, p in zip(mapped, kernel.params) if a}
    first = by_arg.get(module.INPUTS[0])
    if first is not None:
        dtype = DTYPE_OF.get(element_of(first, evidence), "")
    else:
        reads = [p for p in kernel.params if p.pointer and "const" in p.type] + \
                [p for p in kernel.params if p.pointer]
        dtype = next((DTYPE_OF[element_of(p, evidence)] for p in reads if element_of(p, evidence) in DTYPE_OF), "")
    note = guess = ""
    if not dtype:
        dtype, note, guess = _evidence_dtype(kernel, mapped, module, file_text, evidence, first)
    out = by_arg.get(module.OUTPUT)
    out_dtype = DTYPE_OF.get(element_of(out, evidence), "") if out else ""
    default_out = module.output_dtype(dtype) if dtype else ""
    return dtype, (out_dtype if out_dtype and out_dtype != default_out else ""), note, guess


def _evidence_dtype(kernel: Kernel, mapped: tuple[str | None, ...], module, file_text: str, evidence: Evidence,
                    first) -> tuple[str, str, str]:
    """The dtype the launching script's tensors have, else the file's text, else fp32 as a guess:
    (dtype, note, why it is a guess or "")."""
    element = element_of(first, evidence) if first is not None else "unknown"
    told = script_dtype(evidence, _arg_texts_for(kernel, mapped, module.INPUTS[0], evidence))
    if told:
        return told, f"the tensors {evidence.script} makes (the element type is {element!r})", ""
    dtype, _ = _dtype_from_text(kernel.body + file_text)
    if dtype:
        return dtype, "", f"the element type is {element!r}; {dtype} is the type the file names most"
    return "fp32", "", f"the element type {element!r} is no fp32, fp16 or bf16, and no script tells"


def _arg_texts_for(kernel: Kernel, mapped: tuple[str | None, ...], op_arg: str, evidence: Evidence) -> list[str]:
    """The script's expressions passed as the op's `op_arg` (first) and as the kernel's other
    pointers."""
    if not evidence.call_args:
        return []
    wanted = [i for i, a in enumerate(mapped) if a == op_arg]
    pointers = [i for i, p in enumerate(kernel.params) if kind_of(p) == "tensor"]
    return [evidence.call_args[i] for i in [*wanted, *pointers] if i < len(evidence.call_args)]


def script_dtype(evidence: Evidence, passed: list[str]) -> str:
    """fp32, fp16 or bf16 from the tensors a script makes: the one passed first (by variable
    name) if the script makes it, else the dtype its float tensors are written with most."""
    made = {t.name: t for t in evidence.tensors if t.name}
    for name in passed:
        t = made.get(name)
        if t is not None and t.dtype in FLOAT_DTYPES:
            return t.dtype
    floats = [t.dtype for t in evidence.tensors if t.dtype in FLOAT_DTYPES]
    explicit = [t.dtype for t in evidence.tensors if t.dtype in FLOAT_DTYPES and t.explicit]
    counted = Counter(explicit or floats)
    return counted.most_common(1)[0][0] if counted else ""


def module_dtype(kernel: Kernel, file_text: str, evidence: Evidence) -> tuple[str, str, str, str]:
    """A module function's dtype: the element type of the kernels it launches, else of the
    file's kernels, else the tensors the scripts pass it, else the file's text, else fp32."""
    kernels = [*evidence.launched, *find_kernels(file_text, kernel.file)]
    for k in kernels:
        reads = [p for p in k.params if p.pointer and "const" in p.type] or [p for p in k.params if p.pointer]
        element = next((element_of(p, evidence) for p in reads[:1]), "")
        if element in DTYPE_OF:  # the first input's, not C's
            return DTYPE_OF[element], "", "", ""
    told = script_dtype(evidence, list(evidence.call_args))
    if told:
        return told, "", f"the tensors {evidence.script} passes {kernel.entry}", ""
    dtype, note = _dtype_from_text(file_text)
    if dtype:
        return dtype, "", "", note
    return "fp32", "", "", "no kernel it launches, no script and no text tells the tensors' dtype"


def _dtype_from_text(text: str) -> tuple[str, str]:
    """bf16 or fp16, whichever the file names clearly more often (comments included)."""
    low = text.lower()
    counts = {d: sum(len(re.findall(rf"\b{w}\b", low)) for w in words)
              for d, words in (("bf16", ("bf16", "bfloat16")), ("fp16", ("fp16", "half", "float16")))}
    best = max(counts, key=counts.get)
    if counts[best] and counts[best] >= 2 * min(counts.values()):
        return best, f"dtype {best!r} guessed from the file's text ({counts[best]} mentions)"
    return "", ""


def dtype_of(made: list[TensorMade], fallback: str = "") -> tuple[str, str]:
    """(dtype, note): the floating dtype the scripts' tensors have most often."""
    names = Counter(t.dtype for t in made if t.dtype in ("fp32", "fp16", "bf16"))
    if names:
        dtype, count = names.most_common(1)[0]
        return dtype, f"dtype {dtype!r} from the tensors the repository's scripts make ({count})"
    return fallback, ""


def pointer_dtype(text: str) -> str:
    """The input dtype of an extension's kernels: the element type of their first pointer, or
    of `data_ptr<T>()` in the wrapper."""
    for k in find_kernels(text, "ext"):
        element = next((p.element for p in k.params if p.pointer), "")
        if element in DTYPE_OF:
            return DTYPE_OF[element]
    m = re.search(r"data_ptr<\s*([\w:]+)\s*>", text)
    if m:
        return {"float": "fp32", "at::Half": "fp16", "c10::Half": "fp16", "at::BFloat16": "bf16",
                "c10::BFloat16": "bf16", "half": "fp16"}.get(m.group(1), "")
    return ""



def default_dtype(backend: str) -> str:
    """What an entry is measured at where nothing tells: bf16 for a Triton kernel (what they are
    written for), fp32 otherwise."""
    return "bf16" if backend == "triton" else "fp32"
