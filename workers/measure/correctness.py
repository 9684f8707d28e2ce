"""Correctness check of one call against the op's reference, in the child process.

The output lives inside a larger buffer: guard bands before and after it are filled with a
sentinel, the output itself with a poison pattern. After the call, changed guards mean an
out-of-bounds write, remaining poison means elements never written, and the per-tile
max-abs-error map shows which 64×64 tile a bad index corrupted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# NaN bit patterns with distinct payloads: a kernel that computes NaN produces a different
# pattern, so "never written" and "wrote NaN" are told apart bit-exactly.
_PATTERNS = {8: (torch.int64, 0x7FF40000000B0BAD, 0x7FF400000000C0DE), 4: (torch.int32, 0x7FA00BAD, 0x7FB0C0DE),
             2: (torch.int16, 0x7D0B, 0x7D0C)}
TILE = 64
MAX_TILES_LISTED = 8


@dataclass(frozen=True)
class GuardedOutput:
    buffer: torch.Tensor  # guard | output | guard, flat
    out: torch.Tensor  # view of the output part, op's output shape
    guard: int


def guarded_output(shape: tuple, dtype: torch.dtype, device: str) -> GuardedOutput:
    """Allocate the output with guard bands one tile-row (plus 4 KiB) wide on each side."""
    numel = 1
    for s in shape:
        numel *= s
    guard = (TILE * shape[-1] if len(shape) > 1 else TILE * TILE) + 1024
    buffer = torch.empty(guard + numel + guard, dtype=dtype, device=device)
    int_dtype, poison, sentinel = _PATTERNS[buffer.element_size()]
    raw = buffer.view(int_dtype)
    raw[:guard].fill_(sentinel)
    raw[guard + numel:].fill_(sentinel)
    raw[guard:guard + numel].fill_(poison)
    return GuardedOutput(buffer, buffer[guard:guard + numel].view(shape), guard)


def returned_output(out: torch.Tensor) -> GuardedOutput:
    """What an entry returned, seen as a guarded output without guard bands (it allocated it
    itself): poison left in it by `poisoned_block` still shows elements never written."""
    out = out.contiguous()
    return GuardedOutput(out.view(-1), out, 0)


def poisoned_block(shape: tuple, dtype: torch.dtype) -> None:
    """Allocate a block of this size on the GPU, fill it with the poison pattern and free it:
    torch's caching allocator keeps it and hands it to the next allocation of that size."""
    numel = 1
    for s in shape:
        numel *= s
    block = torch.empty(numel, dtype=dtype, device="cuda")
    if block.element_size() in _PATTERNS:
        int_dtype, poison, _ = _PATTERNS[block.element_size()]
        block.view(int_dtype).fill_(poison)
    del block


def reset(g: GuardedOutput) -> None:
    """Poison the output again before the next call."""
    int_dtype, poison, _ = _PATTERNS[g.buffer.element_size()]
    g.out.view(int_dtype).fill_(poison)


def evaluate(g: GuardedOutput, ref: torch.Tensor, rtol: float, atol: float) -> dict:
    """Compare the output with the fp64 reference; returns plain figures and a verdict.

    Passing needs: guards intact, every element written, no NaN/Inf, relative Frobenius
    error ≤ rtol and max abs error ≤ atol·max|ref|.
    """
    int_dtype, poison, sentinel = _PATTERNS.get(g.buffer.element_size(), (None, None, None))
    numel = g.out.numel()
    if int_dtype is None:  # a 1-byte output (bool, int8): no pattern tells "never written"
        before = after = torch.empty(0, dtype=torch.long)
    else:
        raw = g.buffer.view(int_dtype)
        before = (raw[:g.guard] != sentinel).nonzero()
        after = (raw[g.guard + numel:] != sentinel).nonzero()
    # Poison marks never-written elements of a float output, or of any output the harness
    # allocated (guarded); an integer result an entry returned may hold the pattern's value.
    check_poison = int_dtype is not None and (g.out.is_floating_point() or g.guard > 0)
    # Everything stays on the output's device (an 8192² check on the host would take seconds);
    # only the tile map and scalars come back. A large output is judged in blocks of whole tile
    # rows, so the fp64 temporaries stay bounded (a 1.6-billion-element softmax output would
    # otherwise need five fp64 copies of itself at once).
    out2d, ref2d, th, tw = _as_rows(g.out), _as_rows(ref.to(g.out.device)), *_tile_shape(g.out)
    acc = _Sums()
    tile_rows = []
    for rows, cols in _blocks(out2d.shape, th, tw):
        o, r = out2d[rows, cols], ref2d[rows, cols]
        unwritten = (o.view(int_dtype) == poison) if check_poison else torch.zeros_like(o, dtype=torch.bool)
        out = o.double()
        nonfinite = ~torch.isfinite(out) & ~unwritten
        finite = ~(unwritten | nonfinite)
        err = (out - r).abs()
        err[~finite] = float("inf")
        acc.add(out, r, err, finite, unwritten, nonfinite, rows, cols, out2d.shape[1])
        tile_rows.append(tile_map(err, (th, tw)))
    tiles = torch.cat(tile_rows, dim=1 if out2d.shape[0] == 1 else 0) if tile_rows else torch.zeros((0, 0))
    ref_norm = math.sqrt(acc.ref_sq) or 1.0
    rel_fro = math.sqrt(acc.diff_sq) / ref_norm if acc.all_finite else float("inf")
    scale = acc.ref_max or 1.0
    bad_tiles, bad_count = _bad_tiles(tiles, atol * scale)
    stored, factor = _stored_map(tiles)
    shape = tuple(g.out.shape)
    figures = {
        "rel_fro_err": rel_fro,
        "max_abs_err": acc.err_max,
        "ref_max_abs": scale,
        "rtol": rtol,
        "atol": atol,
        "unwritten": acc.unwritten,
        "first_unwritten": _unravel(acc.first_unwritten, shape),
        "nonfinite": acc.nonfinite,
        "first_nonfinite": _unravel(acc.first_nonfinite, shape),
        "guard_before": int(before.numel()),
        "guard_after": int(after.numel()),
        "first_guard_after": int(after[0]) if after.numel() else None,
        "tile": TILE,
        "tile_map": [[_round(v) for v in row] for row in stored.cpu().tolist()],
        "tile_count": int(tiles.numel()),
        "bad_tiles": bad_tiles,
        "bad_tile_count": bad_count,
        **({"map_tile": TILE * factor} if factor > 1 else {}),
    }
    figures["passed"] = (
        figures["guard_before"] == 0 and figures["guard_after"] == 0 and figures["unwritten"] == 0
        and figures["nonfinite"] == 0 and rel_fro <= rtol and not bad_count
    )
    return figures


# Elements judged at once: bounds the fp64 temporaries of a check to a few GiB.
BLOCK_ELEMENTS = 1 << 26


class _Sums:
    """What the blocks of an output add up to: squared norms, maxima, counts, first indices."""

    def __init__(self):
        self.diff_sq = self.ref_sq = 0.0
        self.err_max = self.ref_max = 0.0
        self.unwritten = self.nonfinite = 0
        self.first_unwritten: int | None = None
        self.first_nonfinite: int | None = None
        self.all_finite = True

    def add(self, out, ref, err, finite, unwritten, nonfinite, rows: slice, cols: slice, width: int) -> None:
        self.diff_sq += float(torch.where(finite, out - ref, 0.0).pow(2).sum())
        self.ref_sq += float(ref.double().pow(2).sum())
        if err.numel():
            self.err_max = max(self.err_max, float(err.max()))
            self.ref_max = max(self.ref_max, float(ref.abs().max()))
        self.all_finite = self.all_finite and bool(finite.all())
        n_unwritten, n_nonfinite = int(unwritten.sum()), int(nonfinite.sum())
        self.unwritten += n_unwritten
        self.nonfinite += n_nonfinite
        if n_unwritten and self.first_unwritten is None:
            self.first_unwritten = _flat_first(unwritten, rows, cols, width)
        if n_nonfinite and self.first_nonfinite is None:
            self.first_nonfinite = _flat_first(nonfinite, rows, cols, width)


def _flat_first(mask: torch.Tensor, rows: slice, cols: slice, width: int) -> int:
    r, c = (int(v) for v in mask.nonzero()[0].tolist())
    return (rows.start + r) * width + cols.start + c


def _unravel(flat: int | None, shape: tuple) -> list[int] | None:
    if flat is None:
        return None
    index = []
    for size in reversed(shape or (1,)):
        index.append(flat % size)
        flat //= size
    return list(reversed(index)) if shape else []


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """The output as the tile map reads it: [rows, last dimension]; a 1-D output as one row."""
    if t.dim() == 0:
        return t.reshape(1, 1)
    if t.dim() == 1:
        return t.view(1, -1)
    return t.reshape(-1, t.shape[-1])


def _tile_shape(t: torch.Tensor) -> tuple[int, int]:
    return (1, TILE * TILE) if t.dim() <= 1 else (TILE, TILE)


def _blocks(shape: tuple, th: int, tw: int):
    """(row slice, column slice) blocks of whole tiles, each about BLOCK_ELEMENTS or fewer."""
    rows, cols = shape
    if rows == 1:  # one long row (a 1-D output): blocks along it
        step = max(tw, BLOCK_ELEMENTS // tw * tw)
        for c in range(0, cols, step):
            yield slice(0, 1), slice(c, min(cols, c + step))
        if cols == 0:
            yield slice(0, 1), slice(0, 0)
        return
    step = max(th, BLOCK_ELEMENTS // max(cols, 1) // th * th)
    for r in range(0, rows, step):
        yield slice(r, min(rows, r + step)), slice(0, cols)


def tile_map(err: torch.Tensor, tile: tuple[int, int] | None = None) -> torch.Tensor:
    """Max abs error per TILE×TILE tile (1-D outputs: per TILE² chunk, as one row; outputs of
    more dimensions, such as attention's [B, H, S, D], as rows of their last dimension).
    `tile`: (rows, columns) of a tile for an error already laid out as rows."""
    if tile is not None:
        th, tw = tile
    elif err.dim() > 2:
        err = err.reshape(-1, err.shape[-1])
        th = tw = TILE
    elif err.dim() == 1:
        err = err.view(1, -1)
        th, tw = 1, TILE * TILE
    else:
        th = tw = TILE
    rows, cols = err.shape
    tr, tc = -(-rows // th), -(-cols // tw)
    padded = torch.zeros((tr * th, tc * tw), dtype=err.dtype, device=err.device)
    padded[:rows, :cols] = err
    return padded.view(tr, th, tc, tw).amax(dim=(1, 3))


# The worst tiles kept with a check (the count says how many there are): a wrong index in a
# 1.6-billion-element output can leave half a million of them.
MAX_BAD_TILES = 64
# Cells of the tile map stored with a result: a larger grid is kept max-pooled (`map_tile`).
MAX_MAP_CELLS = 1 << 14


def _bad_tiles(tiles: torch.Tensor, limit: float) -> tuple[list[dict], int]:
    """The worst tiles over `limit`, worst first (ties in row-major order), and their count."""
    tiles = tiles.cpu()
    mask = tiles > limit
    count = int(mask.sum())
    if not count:
        return [], 0
    where, values = mask.nonzero(), tiles[mask]
    order = torch.argsort(values, descending=True, stable=True)[:MAX_BAD_TILES]
    return [{"row": int(where[i, 0]), "col": int(where[i, 1]), "max_abs_err": _round(float(values[i]))}
            for i in order.tolist()], count


def _stored_map(tiles: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The tile map as stored: whole, or max-pooled by a power of two until it has at most
    MAX_MAP_CELLS cells (a wrong region still shows, at a coarser grain)."""
    rows, cols = tiles.shape
    factor = 1
    while -(-rows // factor) * -(-cols // factor) > MAX_MAP_CELLS:
        factor *= 2
    if factor == 1:
        return tiles, 1
    fr = factor if rows > 1 else 1
    pr, pc = -(-rows // fr) * fr, -(-cols // factor) * factor
    padded = torch.zeros((pr, pc), dtype=tiles.dtype, device=tiles.device)
    padded[:rows, :cols] = tiles
    return padded.view(pr // fr, fr, pc // factor, factor).amax(dim=(1, 3)), factor


def _round(v: float) -> float | str:
    if v != v or v in (float("inf"), float("-inf")):
        return "inf"  # JSON has no inf; unwritten or NaN elements
    return float(f"{v:.3g}")


# -- what the kernel does to its inputs, and whether its output depends on them ---------------
# A kernel is untrusted code: it may scale A in place as scratch space (the next call, and the
# timing loop, then measure other inputs), or hand back a result it computed once for other
# inputs. Either can pass a single reference check, so both are checked for explicitly.

_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns (NaN == NaN, -0 != +0), without a copy."""
    return t.view(_INT_VIEW[t.element_size()])


def snapshot_inputs(inputs: dict) -> dict[str, torch.Tensor]:
    """Copies of the input tensors, taken before the call."""
    return {name: t.clone() for name, t in inputs.items() if isinstance(t, torch.Tensor)}


def changed_inputs(inputs: dict, before: dict[str, torch.Tensor]) -> dict[str, int]:
    """{input name: elements whose bits differ from the snapshot} for the inputs the call wrote."""
    changed = {}
    for name, old in before.items():
        n = int((_bits(inputs[name]) != _bits(old)).sum())
        if n:
            changed[name] = n
    return changed


def moved_elements(first: torch.Tensor, last: torch.Tensor) -> int:
    """Elements whose bits differ between two outputs of the same call on the same inputs."""
    return int((_bits(first) != _bits(last)).sum())


def same_output(out: torch.Tensor, previous: torch.Tensor | None) -> bool:
    """True when `out` is bit for bit the output of the previous check (other inputs)."""
    return previous is not None and previous.shape == out.shape and bool(torch.equal(_bits(out), _bits(previous)))


def diagnose(figures: dict, out_shape: tuple) -> str:
    """One paragraph a developer can act on, most telling finding first."""
    parts = []
    if figures.get("returned"):  # what a returning entry handed back is not the op's output
        listed = ", ".join(f"{k} ({n} element(s))" for k, n in sorted((figures.get("inputs_changed") or {}).items()))
        return figures["returned"] + (f"; the kernel changed its inputs: {listed}" if listed else "")
    if figures.get("inputs_changed"):
        listed = ", ".join(f"{k} ({n} element(s))" for k, n in sorted(figures["inputs_changed"].items()))
        parts.append(f"the kernel changed its inputs: {listed} differ after the call (inputs are read-only; "
                     "a later call would compute on other data)")
    if figures.get("output_ignores_inputs"):
        parts.append(f"output does not depend on this call's inputs: bit for bit the output of the previous "
                     f"check (seed {figures['output_ignores_inputs']}), which had other random inputs "
                     "(a cached or precomputed result?)")
    if figures["guard_before"] or figures["guard_after"]:
        parts.append(
            f"wrote outside the output: {figures['guard_after']} element(s) past the end"
            + (f" (first at offset +{figures['first_guard_after']} after the last element)"
               if figures["first_guard_after"] is not None else "")
            + f", {figures['guard_before']} before the start")
    if figures["unwritten"]:
        parts.append(f"{figures['unwritten']} element(s) never written, first at {figures['first_unwritten']}")
    if figures["nonfinite"]:
        parts.append(f"{figures['nonfinite']} NaN/Inf element(s), first at {figures['first_nonfinite']}")
    bad = figures["bad_tiles"]
    if bad:
        total = figures.get("tile_count", sum(len(r) for r in figures["tile_map"]))
        count = figures.get("bad_tile_count", len(bad))
        listed = "; ".join(_tile_text(t, figures["tile"], len(out_shape)) for t in bad[:MAX_TILES_LISTED])
        more = f" (+{count - MAX_TILES_LISTED} more)" if count > MAX_TILES_LISTED else ""
        parts.append(f"{count} of {total} tiles wrong: {listed}{more}")
    if figures["rel_fro_err"] > figures["rtol"] and figures["rel_fro_err"] != float("inf"):
        parts.append(f"relative error {figures['rel_fro_err']:.3g} > tolerance {figures['rtol']:.3g}")
    return "; ".join(parts) or "output matches the reference"


def _tile_text(t: dict, tile: int, ndim: int) -> str:
    r, c = t["row"], t["col"]
    if ndim == 1:
        span = tile * tile
        return f"chunk {c} = out[{c * span}:{(c + 1) * span}] max abs err {t['max_abs_err']}"
    if ndim > 2:  # rows of the output flattened to [rows, last dimension]
        return (f"tile ({r}, {c}) = out.view(-1, last)[{r * tile}:{(r + 1) * tile}, {c * tile}:{(c + 1) * tile}]"
                f" max abs err {t['max_abs_err']}")
    return (f"tile ({r}, {c}) = C[{r * tile}:{(r + 1) * tile}, {c * tile}:{(c + 1) * tile}]"
            f" max abs err {t['max_abs_err']}")
