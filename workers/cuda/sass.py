"""Instruction histograms from ``cuobjdump -sass``: per kernel, how many tensor-core, global and
shared-memory instructions the compiler emitted (static counts, not executed counts).

A kernel section starts with ``Function : <mangled name>``; each instruction line looks like
``/*0290*/  @!P6 LDG.E.CONSTANT R29, desc[UR4][R2.64+0x4] ;`` (an optional predicate, then the
opcode with dot-separated modifiers)."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_ARCH = re.compile(r"^\s*arch\s*=\s*(sm_\w+)")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
# Tensor-core opcodes: HMMA/IMMA/DMMA/BMMA (mma.sync), HGMMA/IGMMA/QGMMA/BGMMA (Hopper wgmma),
# OMMA/QMMA, and Blackwell's UTC*MMA (tcgen05).
_TENSOR = re.compile(r"^(?:[HIDBOQ]G?MMA|UTC[A-Z]*MMA)$")
_WIDTH_TOKENS = {"128": 128, "64": 64, "U16": 16, "S16": 16, "U8": 8, "S8": 8}


@dataclass(frozen=True)
class SassHistogram:
    """Static instruction counts of one kernel for one arch.

    ``global_loads``/``global_stores`` map access width in bits (8..128) to instruction counts;
    ``generic_loads``/``generic_stores`` are LD/ST through generic addresses (wmma's
    load_matrix_sync compiles to these), which may hit global or shared memory;
    ``opcodes`` counts every base opcode (the part before the first dot)."""

    kernel: str
    arch: str
    total: int
    tensor_core: int
    global_loads: dict[int, int] = field(default_factory=dict)
    global_stores: dict[int, int] = field(default_factory=dict)
    generic_loads: dict[int, int] = field(default_factory=dict)
    generic_stores: dict[int, int] = field(default_factory=dict)
    shared_loads: int = 0
    shared_stores: int = 0
    ldsm: int = 0
    async_copies: int = 0
    tma: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)


def access_width(opcode: str) -> int:
    """Bits moved per thread by a load/store opcode: 'LDG.E.128' -> 128, 'STG.E.U16' -> 16,
    'LDG.E.CONSTANT' -> 32 (no width modifier means one 32-bit word)."""
    for token in opcode.split(".")[1:]:
        if token in _WIDTH_TOKENS:
            return _WIDTH_TOKENS[token]
    return 32


def histogram(kernel: str, arch: str, opcodes: list[str]) -> SassHistogram:
    """Classify the full opcodes of one kernel."""
    base = Counter(op.split(".")[0] for op in opcodes)
    by_width: dict[str, Counter] = {head: Counter() for head in ("LDG", "STG", "LD", "ST")}
    for op in opcodes:
        head = op.split(".")[0]
        if head in by_width:
            by_width[head][access_width(op)] += 1
    return SassHistogram(
        kernel=kernel,
        arch=arch,
        total=len(opcodes),
        tensor_core=sum(n for op, n in base.items() if _TENSOR.match(op)),
        global_loads=dict(sorted(by_width["LDG"].items())),
        global_stores=dict(sorted(by_width["STG"].items())),
        generic_loads=dict(sorted(by_width["LD"].items())),
        generic_stores=dict(sorted(by_width["ST"].items())),
        shared_loads=base["LDS"],
        shared_stores=base["STS"],
        ldsm=base["LDSM"],
        async_copies=base["LDGSTS"],
        tma=sum(n for op, n in base.items() if op.startswith("UTMA")),
        opcodes=dict(sorted(base.items())),
    )


def parse_sass(text: str) -> list[SassHistogram]:
    """One histogram per kernel section of ``cuobjdump -sass`` output, in file order."""
    sections: list[tuple[str, str, list[str]]] = []
    arch = ""
    for line in text.splitlines():
        if m := _ARCH.match(line):
            arch = m.group(1)
        elif m := _FUNCTION.match(line):
            sections.append((m.group(1), arch, []))
        elif sections and (m := _INSTRUCTION.match(line)):
            sections[-1][2].append(m.group(1))
    return [histogram(kernel, a, ops) for kernel, a, ops in sections]


def cuobjdump_command(cuobjdump: str, binary: str) -> list[str]:
    """Disassemble every cubin in a shared library, fatbin or cubin."""
    return [cuobjdump, "-sass", binary]


def read_sass(cuobjdump: str, binary: str) -> str:
    """Run cuobjdump; raises CalledProcessError when the file holds no device code."""
    out = subprocess.run(cuobjdump_command(cuobjdump, binary), capture_output=True, text=True,
                         timeout=120, check=True)
    return out.stdout
