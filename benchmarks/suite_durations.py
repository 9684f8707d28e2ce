"""The test suite's time per test and per file, from the JUnit XML of a run, as the markdown
tables docs/benchmarks.md keeps:

    CI=true bash .ci/run --junitxml=/tmp/suite.xml
    python3 benchmarks/suite_durations.py /tmp/suite.xml [--top 25]

A test's time is its setup, call and teardown together, as pytest reports it; beside other
pytest-xdist workers it includes the time it waited for a core."""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    cases = list(ET.parse(args.xml).iter("testcase"))
    seconds = [(float(c.get("time", 0)), c.get("classname", ""), c.get("name", "")) for c in cases]
    skipped = sum(c.find("skipped") is not None for c in cases)
    failed = sum(c.find("failure") is not None or c.find("error") is not None for c in cases)
    total = sum(s for s, _, _ in seconds)
    print(f"{len(cases)} tests ({len(cases) - skipped - failed} passed, {skipped} skipped, {failed} failed); "
          f"their times add up to {total:.0f} s\n")
    print("| test | s |\n|---|---:|")
    for s, cls, name in sorted(seconds, reverse=True)[:args.top]:
        print(f"| `{cls.replace('.', '/')}.py::{name.split('@')[0]}` | {s:.1f} |")
    per_file = collections.Counter()
    for s, cls, _ in seconds:
        per_file[cls.replace(".", "/") + ".py"] += s
    print("\n| file | tests' s |\n|---|---:|")
    for file, s in per_file.most_common(args.top):
        print(f"| `{file}` | {s:.1f} |")


if __name__ == "__main__":
    main()
