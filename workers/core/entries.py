"""How a python-side entry (or a `[reference]` call) is written, read without importing
anything: the driver checks manifests with it, and the job's child resolves entries with it."""

from __future__ import annotations


def entry_parts(entry: str) -> tuple[str, str, str]:
    """("file" | "module" | "torch_op", where, attribute path) of a python-side entry (pure):
    `file.py:name`, `pkg.module:Class.method`, `torch.ops.ns.name`."""
    if ":" not in entry:
        if entry.startswith("torch.ops.") and entry.count(".") == 3:
            return "torch_op", entry, ""
        if entry.startswith("torch.") and all(p.isidentifier() for p in entry.split(".")):
            return "module", "torch", entry.removeprefix("torch.")  # a torch function: torch.add
        raise ValueError(f"binding.entry {entry!r}: expected \"file.py:name\", \"package.module:name\", "
                         f"\"torch.ops.namespace.name\" or a torch function (\"torch.add\")")
    where, _, attr = entry.partition(":")
    if not attr:
        raise ValueError(f"binding.entry {entry!r}: nothing after ':' (the function or class to call)")
    if where.endswith(".py"):
        return "file", where, attr
    return "module", where, attr
