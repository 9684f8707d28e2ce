"""The published forms of the manifest formats, generated from their JSON Schema
(`pipeline.project.schema`): `docs/schema/*.schema.json` and the key tables of docs/variants.md.

`python -m pipeline.project.schema_docs --write` rewrites them; `stale()` names the ones that no longer
match the models (a test fails on it), so the docs cannot drift from what is validated.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.project.schema import SCHEMAS, json_schema

SCHEMA_DIR = Path("docs/schema")
VARIANTS_DOC = Path("docs/variants.md")


def schema_path(which: str) -> Path:
    return SCHEMA_DIR / f"{which}.schema.json"


def describe(prop: dict, defs: dict) -> str:
    """A property's type in words: "integer > 0", "list of strings", "cpp | cuda", "table"."""
    if "$ref" in prop:
        target = defs[prop["$ref"].split("/")[-1]]
        return "table" if target.get("type") == "object" else describe(target, defs)
    if "enum" in prop:
        return " \\| ".join(str(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            parts = [describe(p, defs) for p in prop[key] if p.get("type") != "null"]
            return " or ".join(dict.fromkeys(parts))
    kind = prop.get("type")
    if isinstance(kind, list):
        return " or ".join(describe({"type": k}, defs) for k in kind)
    if kind in ("integer", "number"):
        word = "integer" if kind == "integer" else "number"
        if prop.get("exclusiveMinimum") == 0:
            return f"{word} > 0"
        if prop.get("minimum") == 0:
            return f"{word} ≥ 0"
        return word
    if kind == "array":
        inner = describe(prop.get("items", {}), defs)
        return f"list of ({inner})" if " or " in inner else f"list of {inner}s" if " " not in inner else f"list of {inner}"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"table of {describe(extra, defs)}" if isinstance(extra, dict) else "table"
    return {"string": "string", "boolean": "boolean"}.get(kind, kind or "any")


def rows(schema: dict, defs: dict | None = None, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, type, default, description) of every key; a sub-table's keys follow its own row."""
    defs = schema.get("$defs", {}) if defs is None else defs
    required = set(schema.get("required", ()))
    plain, tables = [], []
    for name, prop in schema.get("properties", {}).items():
        ref = prop.get("$ref") or next((p["$ref"] for p in prop.get("anyOf", ()) if "$ref" in p), None)
        target = defs.get(ref.split("/")[-1]) if ref else None
        if target is not None and target.get("type") == "object":
            tables.append((prefix + name, target))
            continue
        item_ref = (prop.get("items") or {}).get("$ref") if prop.get("type") == "array" else None
        if item_ref and defs.get(item_ref.split("/")[-1], {}).get("type") == "object":
            tables.append((f"[{prefix + name}]", defs[item_ref.split("/")[-1]]))  # an array of tables: [[name]]
            continue
        default = "required" if name in required else _default(prop.get("default"))
        plain.append((prefix + name, describe(prop, defs), default, prop.get("description", "")))
    out = plain
    for name, target in tables:
        out.append((f"[{name}]", "table", "", " ".join(target.get("description", "").split("\n\n")[0].split())))
        out += rows(target, defs, prefix=f"{name.strip('[]')}[]." if name.startswith("[") else f"{name}.")
    return out


def _default(value) -> str:
    if value in (None, [], {}, ""):
        return "—"
    return f"`{json.dumps(value) if not isinstance(value, bool) else str(value).lower()}`"


def markdown(which: str) -> str:
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, kind, default, text in rows(json_schema(which)):
        cell = text.replace("|", "\\|")
        lines.append(f"| **`{key}`** | table | | {cell} |" if kind == "table" and key.startswith("[")
                     else f"| `{key}` | {kind} | {default} | {cell} |")
    return "\n".join(lines)


def _markers(which: str) -> tuple[str, str]:
    return (f"<!-- generated: {which} keys (python -m pipeline.project.schema_docs --write) -->",
            f"<!-- end of generated {which} keys -->")


def generated(root: Path) -> dict[Path, str]:
    """Every published file as it should read now: {repository-relative path: text}."""
    out = {schema_path(w): json.dumps(json_schema(w), indent=2, ensure_ascii=False) + "\n" for w in SCHEMAS}
    doc = (root / VARIANTS_DOC).read_text()
    for which in SCHEMAS:
        begin, end = _markers(which)
        if begin not in doc or end not in doc:
            raise ValueError(f"{VARIANTS_DOC} lacks the markers of the {which} key table: {begin} … {end}")
        head, rest = doc.split(begin, 1)
        doc = head + begin + "\n" + markdown(which) + "\n" + end + rest.split(end, 1)[1]
    out[VARIANTS_DOC] = doc
    return out


def write(root: Path) -> list[Path]:
    written = []
    for rel, text in generated(root).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(rel)
    return written


def stale(root: Path) -> list[Path]:
    """Published files that differ from what the models generate."""
    return [rel for rel, text in generated(root).items()
            if not (root / rel).exists() or (root / rel).read_text() != text]


__all__ = ["SCHEMAS", "describe", "generated", "markdown", "rows", "stale", "write"]


def main(argv: list[str] | None = None) -> int:
    """`python -m pipeline.project.schema_docs --write`: regenerate docs/schema/*.json and the key tables of
    docs/variants.md; `--print variant|flopwatch`: the JSON Schema on stdout."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m pipeline.project.schema_docs")
    p.add_argument("--write", action="store_true", help="regenerate the published files in docs/")
    p.add_argument("--print", choices=sorted(SCHEMAS), dest="show", help="print one JSON Schema")
    args = p.parse_args(argv)
    if args.show:
        print(json.dumps(json_schema(args.show), indent=2, ensure_ascii=False))
    if args.write:
        for path in write(Path(__file__).resolve().parents[2]):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
