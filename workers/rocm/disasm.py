"""Instruction histogram per kernel from ``llvm-objdump -d --mcpu=gfx942`` output.

What a kernel developer looks at first in AMD disassembly: which MFMA instructions were
emitted (none means the matrix cores are idle), how wide the global/buffer loads and stores
are (dwordx4 = 16 bytes per lane is the goal), the LDS traffic (``ds_read*``/``ds_write*`` on
gfx9, ``ds_load*``/``ds_store*`` on newer naming), and how many ``s_waitcnt`` stalls points
there are.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_SYMBOL = re.compile(r"^[0-9a-fA-F]+\s+<(?P<name>[^>]+)>:\s*$")
_INSTRUCTION = re.compile(r"^\s+(?P<mnemonic>[a-z_][a-z0-9_.]*)\b")


@dataclass(frozen=True)
class InstructionHistogram:
    """Counts for one kernel symbol; dicts map full mnemonic -> count."""

    name: str
    total: int
    mfma: dict[str, int] = field(default_factory=dict)
    global_loads: dict[str, int] = field(default_factory=dict)  # global_/buffer_/flat_load*
    global_stores: dict[str, int] = field(default_factory=dict)
    lds_reads: dict[str, int] = field(default_factory=dict)  # ds_read*, ds_load*
    lds_writes: dict[str, int] = field(default_factory=dict)  # ds_write*, ds_store*
    waitcnt: int = 0

    @property
    def mfma_total(self) -> int:
        """Number of MFMA (and sparse SMFMAC) instructions."""
        return sum(self.mfma.values())


def _classify(mnemonic: str) -> str | None:
    if mnemonic.startswith(("v_mfma", "v_smfmac")):
        return "mfma"
    if mnemonic.startswith(("global_load", "buffer_load", "flat_load")):
        return "global_loads"
    if mnemonic.startswith(("global_store", "buffer_store", "flat_store")):
        return "global_stores"
    if mnemonic.startswith(("ds_read", "ds_load")):
        return "lds_reads"
    if mnemonic.startswith(("ds_write", "ds_store")):
        return "lds_writes"
    return None


def _histogram(name: str, mnemonics: list[str]) -> InstructionHistogram:
    groups: dict[str, Counter] = {k: Counter() for k in
                                  ("mfma", "global_loads", "global_stores", "lds_reads",
                                   "lds_writes")}
    waitcnt = 0
    for mnemonic in mnemonics:
        kind = _classify(mnemonic)
        if kind:
            groups[kind][mnemonic] += 1
        elif mnemonic.startswith("s_waitcnt"):
            waitcnt += 1
    return InstructionHistogram(name=name, total=len(mnemonics), waitcnt=waitcnt,
                                **{k: dict(sorted(v.items())) for k, v in groups.items()})


def parse_disassembly(text: str) -> list[InstructionHistogram]:
    """One histogram per function symbol, in file order (pure)."""
    result: list[InstructionHistogram] = []
    name: str | None = None
    mnemonics: list[str] = []
    for line in text.splitlines():
        sym = _SYMBOL.match(line)
        if sym:
            if name is not None:
                result.append(_histogram(name, mnemonics))
            name, mnemonics = sym.group("name"), []
            continue
        if name is None:
            continue
        ins = _INSTRUCTION.match(line)
        # objdump indents instructions with a tab; anything else (blank lines, headers) is not
        # an instruction.
        if ins and line.startswith("\t"):
            mnemonics.append(ins.group("mnemonic"))
    if name is not None:
        result.append(_histogram(name, mnemonics))
    return result


def find_objdump(rocm_path: str | None = None) -> str | None:
    """ROCm's llvm-objdump when available under ``rocm_path``, else llvm-objdump-19."""
    if rocm_path:
        candidate = Path(rocm_path) / "llvm" / "bin" / "llvm-objdump"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("llvm-objdump-19") or shutil.which("llvm-objdump")


def disassemble(code_object: str, objdump: str, mcpu: str = "gfx942") -> str:
    """Run ``objdump -d --mcpu=...`` on a code object and return its text."""
    return subprocess.run([objdump, "-d", f"--mcpu={mcpu}", code_object], capture_output=True,
                          text=True, timeout=120, check=True).stdout
