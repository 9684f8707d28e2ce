"""The house's shape, read from the code's own imports: which room (package) imports which,
whether each room keeps to what its `__init__.py` declares, import circles, modules per folder;
and the picture and rooms table of docs/architecture.md (`--draw`).

A room is a package of pipeline/, workers/ or reports/; a module belongs to its innermost
package. Each room's `__init__.py` docstring says in two lines what it holds and which rooms it
may import:

    \"\"\"One commit end to end: plan, identities, the jobs' stream, accounting.
    May import: pipeline.fleet, pipeline.project, pipeline.store, reports,
        workers.\"\"\"

A long declaration goes on over indented lines. A listed room covers the rooms below it in
the tree (`workers` is every room of workers/);
"May import: nothing." allows no room but its own. Every import statement counts, those inside
functions included: a late import climbs as surely as a top-level one.

    python3 scripts/house.py            # the room graph and every finding; exit 1 on a finding
    python3 scripts/house.py --draw docs/architecture/structure.svg
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("workers", "reports", "pipeline")
# At most this many modules at the top of one folder ("about 12").
MAX_MODULES = 13
# Folders allowed more, and why.
MANY_MODULES = {"pipeline.commands": "one module per subcommand: the folder is the CLI's table of contents",
                "workers.ops": "one module per built-in op: the folder is the catalogue of ops",
                "pipeline.onboarding.conventions": "one reader module per convention: the folder is the list of "
                                                   "what onboarding reads (READERS)",
                "pipeline.onboarding.decide": "one module per decision a draft takes: op, dtype, sizes and their "
                                              "scaling, reference, peer, inputs, devices, ..."}
_DECLARED = re.compile(r"^May import: (.*?)\.?$")


@dataclass
class House:
    modules: dict[str, Path]  # module name -> file
    rooms: dict[str, str]  # room -> its first docstring line
    allowed: dict[str, tuple[str, ...] | None]  # room -> declared rooms (None: no declaration)
    edges: set[tuple[str, str, int]] = field(default_factory=set)  # (importer, imported, line)

    def room_of(self, module: str) -> str:
        return module if module in self.rooms else module.rpartition(".")[0]

    def module_count(self, room: str) -> int:
        """Modules at the top of `room`'s folder, its `__init__` not counted."""
        return sum(1 for m, p in self.modules.items() if p.name != "__init__.py" and m.rpartition(".")[0] == room)

    def room_edges(self) -> dict[tuple[str, str], list[str]]:
        """(room, room it imports) -> the import sites, for rooms other than the importer's own."""
        out: dict[tuple[str, str], list[str]] = {}
        for src, dst, line in sorted(self.edges):
            a, b = self.room_of(src), self.room_of(dst)
            if a != b:
                out.setdefault((a, b), []).append(f"{src}:{line} imports {dst}")
        return out


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported_names(source: str, module: str, is_package: bool = False) -> list[tuple[str, int, str]]:
    """(absolute dotted name, line, the package it is taken from) of everything `source`
    imports, relative imports resolved against `module`: `from a.b import c` yields `a.b.c`
    (c may be a module or a name of `a.b`), `import a.b` yields `a.b`."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found += [(f"{base}.{alias.name}", node.lineno, base) for alias in node.names]
    return found


def declared(doc: str | None) -> tuple[str, tuple[str, ...] | None]:
    """(what the room holds, the rooms it may import) from its `__init__` docstring."""
    raw = (doc or "").strip().splitlines()
    lines = [line.strip() for line in raw]
    holds = lines[0] if lines else ""
    # A long declaration goes on over indented lines.
    more = [line.strip() for line in raw[2:len(raw)] if line[:1].isspace()]
    more = more[: next((i for i, line in enumerate(raw[2:]) if not line[:1].isspace()), len(more))]
    match = _DECLARED.match(" ".join(lines[1:2] + more)) if len(lines) > 1 else None
    if not match:
        return holds, None
    names = match.group(1).strip()
    if names.lower() == "nothing":
        return holds, ()
    return holds, tuple(n.strip() for n in names.split(",") if n.strip())


def read(root: Path = ROOT, tops: tuple[str, ...] = TOPS) -> House:
    modules: dict[str, Path] = {}
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" not in path.parts and (path.parent / "__init__.py").is_file():
                modules[module_name(path, root)] = path
    rooms, allowed = {}, {}
    for name, path in modules.items():
        if path.name == "__init__.py":
            rooms[name], allowed[name] = declared(ast.get_docstring(ast.parse(path.read_text())))
    house = House(modules, rooms, allowed)
    for name, path in modules.items():
        for target, line, base in imported_names(path.read_text(), name, path.name == "__init__.py"):
            # Only modules of the house count. `from a import b` imports the module `a.b` where
            # there is one, else the name `b` of `a` itself.
            if target not in modules and base in modules:
                target = base
            if target in modules and target != name:
                house.edges.add((name, target, line))
    return house


def _covers(room: str, allowed: str) -> bool:
    return room == allowed or room.startswith(allowed + ".")


def undeclared_imports(house: House) -> list[str]:
    """Imports of a room that its declaration does not allow."""
    found = []
    for (a, b), sites in house.room_edges().items():
        allowed = house.allowed.get(a)
        if allowed is None:
            continue  # reported by `missing_declarations`
        if not any(_covers(b, x) for x in allowed):
            found += [f"{s} (room {a} may not import {b})" for s in sites]
    return found


def missing_declarations(house: House) -> list[str]:
    out = []
    for room in sorted(house.rooms):
        if not house.rooms[room]:
            out.append(f"{room}/__init__.py says nothing of what it holds (its docstring's first line)")
        if house.allowed[room] is None:
            out.append(f"{room}/__init__.py declares no rooms it may import (second line: 'May import: ...')")
        for x in house.allowed[room] or ():
            if not any(_covers(r, x) for r in house.rooms):
                out.append(f"{room}/__init__.py may import {x!r}, which is no room")
    return out


def cycles(nodes: list[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        if a != b:
            succ.setdefault(a, []).append(b)
            succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on.add(node)
            recurse = False
            for j in range(i, len(succ[node])):
                nxt = succ[node][j]
                if nxt not in index:
                    work += [(node, j + 1), (nxt, 0)]
                    recurse = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if recurse:
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def module_cycles(house: House) -> list[list[str]]:
    return cycles(list(house.modules), {(a, b) for a, b, _ in house.edges})


def declared_cycles(house: House) -> list[list[str]]:
    """Circles in what the rooms declare: a declaration that allows a circle allows an upward import."""
    edges = {(a, b) for a, allowed in house.allowed.items() for x in allowed or () for b in house.rooms
             if _covers(b, x) and b != a}
    return cycles(list(house.rooms), edges)


def crowded_folders(house: House, limit: int = MAX_MODULES) -> list[str]:
    out = []
    for room in sorted(house.rooms):
        count = house.module_count(room)
        if count > limit and room not in MANY_MODULES:
            out.append(f"{room} holds {count} modules at its top (at most {limit})")
    return out


def layers(house: House) -> list[list[str]]:
    """The rooms in floors, lowest first: a room's floor is one above the highest room it imports."""
    deps: dict[str, set[str]] = {r: set() for r in house.rooms}
    for a, b in house.room_edges():
        deps[a].add(b)
    floor: dict[str, int] = {}

    def height(room: str, seen: tuple = ()) -> int:
        if room not in floor:
            below = [height(d, seen + (room,)) for d in deps[room] if d not in seen]
            floor[room] = 1 + max(below, default=-1)
        return floor[room]

    for room in house.rooms:
        height(room)
    out: list[list[str]] = [[] for _ in range(max(floor.values()) + 1)] if floor else []
    for room in sorted(floor):
        out[floor[room]].append(room)
    return out


def findings(house: House) -> list[str]:
    return (missing_declarations(house) + undeclared_imports(house)
            + [f"import circle: {' -> '.join(c)}" for c in module_cycles(house)]
            + [f"declared rooms form a circle: {' -> '.join(c)}" for c in declared_cycles(house)]
            + crowded_folders(house))


# -- the picture -------------------------------------------------------------------------------

_TOP_COLOUR = {"workers": "#e8f1fb", "reports": "#fdf3e1", "pipeline": "#eaf6ea"}


def svg(house: House) -> str:
    """Rooms as boxes in floors (lowest at the bottom), an arrow per room that imports another;
    each box names the room, its module count and the first line of what it holds."""
    floors = layers(house)
    box_w, box_h, gap_x, gap_y, margin = 150, 40, 14, 46, 20
    width = margin * 2 + max(len(f) for f in floors) * (box_w + gap_x)
    height = margin * 2 + len(floors) * (box_h + gap_y)
    where: dict[str, tuple[float, float]] = {}
    for level, rooms in enumerate(floors):
        row_w = len(rooms) * (box_w + gap_x) - gap_x
        x0 = (width - row_w) / 2
        y = height - margin - (level + 1) * (box_h + gap_y) + gap_y
        for i, room in enumerate(rooms):
            where[room] = (x0 + i * (box_w + gap_x), y)
    counts = {r: house.module_count(r) for r in house.rooms}
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="11">'),
           ('<defs><marker id="a" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
            'orient="auto"><path d="M0,0L10,5L0,10z" fill="#888"/></marker></defs>'),
           f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>']
    for (a, b) in sorted(house.room_edges()):
        (xa, ya), (xb, yb) = where[a], where[b]
        out.append(f'<line x1="{xa + box_w / 2:.0f}" y1="{ya + box_h:.0f}" x2="{xb + box_w / 2:.0f}" y2="{yb:.0f}" '
                   f'stroke="#999" stroke-opacity="0.45" marker-end="url(#a)"><title>{a} imports {b}</title></line>')
    for room, (x, y) in sorted(where.items()):
        fill = _TOP_COLOUR[room.split(".")[0]]
        holds = house.rooms[room].replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
        out.append(f'<g><title>{room}: {holds}</title><rect x="{x:.0f}" y="{y:.0f}" width="{box_w}" '
                   f'height="{box_h}" rx="5" fill="{fill}" stroke="#555"/>'
                   f'<text x="{x + box_w / 2:.0f}" y="{y + 17:.0f}" text-anchor="middle" font-weight="bold">{room}</text>'
                   f'<text x="{x + box_w / 2:.0f}" y="{y + 31:.0f}" text-anchor="middle" fill="#555">'
                   f'{counts[room]} module{"s" if counts[room] != 1 else ""}</text></g>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


ARCHITECTURE = ROOT / "docs" / "architecture.md"
_TABLE_START = "<!-- rooms: written by `python3 scripts/house.py --draw`; do not edit by hand -->"
_TABLE_END = "<!-- end of rooms -->"


def rooms_table(house: House) -> str:
    """The rooms, floor by floor from the top, as docs/architecture.md lists them: what each
    holds and may import, read from its `__init__.py`; how many modules; what it imports."""
    rows = ["| floor | room | holds | may import | modules |", "| --- | --- | --- | --- | --- |"]
    for level, rooms in reversed(list(enumerate(layers(house)))):
        for room in rooms:
            allowed = house.allowed[room]
            may = ", ".join(f"`{x}`" for x in allowed) if allowed else "nothing"
            count = house.module_count(room)
            rows.append(f"| {level} | `{room}` | {house.rooms[room].replace('|', '/')} | {may} | {count} |")
    return "\n".join(rows) + "\n"


def with_rooms_table(page: str, house: House) -> str:
    """`page` with the block between the markers replaced by the current table."""
    start, end = page.index(_TABLE_START) + len(_TABLE_START), page.index(_TABLE_END)
    return page[:start] + "\n" + rooms_table(house) + page[end:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draw", type=Path, help="write the picture (SVG) here")
    args = p.parse_args(argv)
    house = read()
    for level, rooms in enumerate(layers(house)):
        print(f"floor {level}: {', '.join(rooms)}")
    problems = findings(house)
    for line in problems:
        print(line)
    if args.draw:
        args.draw.parent.mkdir(parents=True, exist_ok=True)
        args.draw.write_text(svg(house))
        ARCHITECTURE.write_text(with_rooms_table(ARCHITECTURE.read_text(), house))
        print(f"wrote {args.draw} and the rooms table of {ARCHITECTURE.relative_to(ROOT)}")
    print(f"{len(house.modules)} modules in {len(house.rooms)} rooms, {len(house.room_edges())} room imports, "
          f"{len(problems)} finding(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
