"""How long a page of the site takes to become interactive in headless Chromium.

    python3 benchmarks/page_timing.py SITE/index.html [--repeat 3]

The page is opened in an iframe of a small probe page (same file:// origin, allowed by
`--allow-file-access-from-files`); when the iframe's load event has fired, the probe writes the
page's own navigation timing (`performance.getEntriesByType("navigation")`, milliseconds from the
start of its navigation) into its DOM, which `--dump-dom` prints: dom_interactive_ms (HTML parsed,
the page answers input), dom_content_loaded_ms (its scripts ran), load_ms (everything loaded,
figures drawn). Real time, not `--virtual-time-budget` time. The machine's load moves these
figures: report the load average with them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

_PROBE = """<!doctype html><html><body><div id="fw-timing">pending</div>
<iframe id="fw-page" style="width:1300px;height:900px" src="{src}"></iframe>
<script>
document.getElementById("fw-page").addEventListener("load", function () {{
  var w = this.contentWindow, nav = w.performance.getEntriesByType("navigation")[0];
  document.getElementById("fw-timing").textContent = "FWTIMING " + JSON.stringify({{
    dom_interactive_ms: nav.domInteractive, dom_content_loaded_ms: nav.domContentLoadedEventEnd,
    load_ms: nav.loadEventEnd, elements: w.document.getElementsByTagName("*").length}});
}});
</script></body></html>
"""


def load_times(page: Path, profile: Path | None = None) -> dict:
    """Navigation timing of one load of `page` (see the module docstring), plus the browser's log."""
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="flopwatch-probe-") as tmp:
        probe = Path(tmp) / "probe.html"
        probe.write_text(_PROBE.format(src=Path(page).resolve().as_uri()))
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files",
               f"--user-data-dir={profile or Path(tmp) / 'profile'}", "--enable-logging=stderr", "--v=0",
               "--dump-dom", probe.as_uri()]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    found = re.search(r"FWTIMING (\{.*?\})", done.stdout)
    if not found:
        raise RuntimeError(f"no timing from {page}: {done.stderr[-2000:]}")
    return {**json.loads(found.group(1)), "log": done.stderr}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    runs = [load_times(args.page) for _ in range(args.repeat)]
    for key in ("dom_interactive_ms", "dom_content_loaded_ms", "load_ms"):
        values = [r[key] for r in runs]
        print(f"{key}: median {statistics.median(values):.0f} (runs: {', '.join(f'{v:.0f}' for v in values)})")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
