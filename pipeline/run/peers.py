"""A peer without asking: every op's own torch peer joins a run where the repository declares
no peer for that op on that device kind, so every correct row has a "% of peer".

The added variant is a plain `Variant` (backend and binding `builtin`, no sources) named
`peer.<op>`; reports label it as flopwatch's (`is_builtin_peer`). A peer the repository
declares (`peer = true` in a manifest) wins: no built-in peer is added for the device kinds it
covers.
"""

from __future__ import annotations

from workers.core.params import FORWARD, MODES, mode_name
from workers.core.records import Binding, Variant
from workers.ops import BUILTIN_PEER_BACKEND as BACKEND
from workers.ops import OPS, returns_peer
from workers.ops.reference import is_reference

PREFIX = "peer."


def builtin_peers(variants: list[Variant]) -> list[Variant]:
    """The built-in peers `variants` lack: one per op and pass (`mode`), on the device kinds
    where the op has variants measured in that pass and no declared peer (pure). A pass other
    than forward needs a peer that returns its output (torch's functional form): an op without
    one has no peer there."""
    taken = {v.name for v in variants}
    added: list[Variant] = []
    for op in sorted({v.op for v in variants}):
        of_op = [v for v in variants if v.op == op]
        repo_op = next((v.repo_op for v in of_op if v.repo_op), {})
        if not _has_peer(op, repo_op):
            continue
        base = PREFIX + op
        while base in taken:
            base += "_builtin"
        for mode in sorted({v.mode for v in of_op if not v.peer}, key=MODES.index):
            in_pass = [v for v in of_op if v.mode == mode]
            covered = {k for v in in_pass if v.peer for k in v.devices}
            kinds = sorted({k for v in in_pass if not v.peer for k in v.devices} - covered)
            returns = _returns(op, repo_op) or (mode != FORWARD and _can_return(op, repo_op))
            if not kinds or (mode != FORWARD and not returns):
                continue
            dtypes = tuple(sorted({d for v in in_pass if not v.peer for d in v.dtypes}))
            # A [reference] op's peer is the repository's callable: it ships its variants' files.
            ships = next((v for v in of_op if v.repo_op), None) if is_reference(repo_op) else None
            added.append(Variant(
                name=mode_name(base, mode), op=op, backend=BACKEND, folder=ships.folder if ships else "", sources=(),
                extra_files=tuple(dict.fromkeys(f for v in of_op for f in v.extra_files)) if ships else (),
                # a reference that imports the repository's package (extension-cpp's test module
                # imports extension_cpp, which loads its built _C) needs the variants' extensions
                extensions=ships.extensions if ships else (),
                binding=Binding("builtin", "peer", returns=returns),
                dtypes=dtypes, shapes=(), layout=_layout(of_op), peer=True, devices=tuple(kinds),
                description=f"built-in peer: {peer_name(op, repo_op)}", repo_op=repo_op, mode=mode))
    return added


def _can_return(op: str, repo_op: dict) -> bool:
    """Whether the op's peer has a returning form at all (`peer_returns`), for a backward pass."""
    if repo_op:
        return repo_op.get("kind") == "problem" or "peer_returns" in (repo_op.get("functions") or ())
    return hasattr(OPS.get(op), "peer_returns")


def peer_name(op: str, repo_op: dict | None = None) -> str:
    """What the built-in peer of `op` runs, e.g. `torch.matmul`."""
    if repo_op:
        return repo_op.get("peer_name") or f"{op}.peer"
    module = OPS.get(op)
    return getattr(module, "PEER_NAME", f"{op}.peer")


def _returns(op: str, repo_op: dict) -> bool:
    """Whether the peer returns its output (torch's functional form, a problem's Model)."""
    if repo_op:
        functions = repo_op.get("functions") or ()
        return repo_op.get("kind") == "problem" or ("peer_returns" in functions and "peer" not in functions)
    return returns_peer(OPS.get(op))


def _has_peer(op: str, repo_op: dict) -> bool:
    if repo_op:
        return bool({"peer", "peer_returns"} & set(repo_op.get("functions") or ()))
    module = OPS.get(op)
    return hasattr(module, "peer") or hasattr(module, "peer_returns")


def _layout(of_op: list[Variant]) -> str:
    """The layout of the op's variants (gemm's `nt`/`nn` changes what the inputs are); a peer
    computes on the inputs the harness makes for its own layout, so any layout is fair."""
    layouts = sorted({v.layout for v in of_op if not v.peer})
    return layouts[0] if layouts else of_op[0].layout
