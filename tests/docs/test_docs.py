"""The documentation: the MkDocs site builds with warnings as errors, and the Python examples of
the README and of every page under docs/ run.

An example is a fenced block opened by a line that is exactly three backquotes followed by
``python``.  The blocks of one page run in order in one namespace, as a reader would type
them.  A block that must not run (it opens a window, needs a server or a robot file, or is a
synopsis of calls with the reader's own arrays) is preceded, on the line just above its
fence, by an HTML comment ``<!-- no-run: REASON -->`` that the site does not show; the reason
is required, so every exception is justified where it is made.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rtrigid as rt

ROOT = Path(__file__).resolve().parents[2]
FENCE = "```python"
NO_RUN = re.compile(r"<!-- no-run: (.+?) -->", re.S)


def _pages():
    pages = [ROOT / "README.md"]
    for dirpath, _, files in os.walk(ROOT / "docs"):   # not into docs/figures (a link)
        pages += [Path(dirpath) / f for f in sorted(files) if f.endswith(".md")]
    return sorted(pages)


def blocks(path):
    """[(line, code, reason)] of a page's python blocks; reason is None for a block that runs."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == FENCE:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            above = "\n".join(lines[max(0, i - 3):i])
            marks = NO_RUN.findall(above)
            reason = " ".join(marks[-1].split()) if marks and lines[i - 1].rstrip().endswith(
                "-->") else None
            out.append((i + 1, "\n".join(lines[i + 1:end]), reason))
            i = end
        i += 1
    return out


PAGES = [p for p in _pages() if blocks(p)]
# the pages with an example that runs (the others' no-run reasons are checked below)
RUNNABLE = [p for p in PAGES if any(reason is None for _, _, reason in blocks(p))]


def test_the_examples_were_found_and_most_of_the_front_page_runs():
    found = {p.relative_to(ROOT).as_posix(): blocks(p) for p in PAGES}
    assert "README.md" in found and "docs/index.md" in found
    readme = found["README.md"]
    assert sum(reason is None for _, _, reason in readme) >= 2
    assert len(RUNNABLE) >= 4
    for page, page_blocks in found.items():
        for line, _, reason in page_blocks:
            assert reason is None or len(reason) >= 20, f"{page}:{line}: a reason, please"


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_python_examples_of_a_page_run(page, tmp_path, monkeypatch):
    runnable = [(line, code) for line, code, reason in blocks(page) if reason is None]
    monkeypatch.chdir(tmp_path)   # an example that writes a file writes it here
    namespace = {"__name__": "__doc_example__"}
    for line, code in runnable:
        try:
            exec(compile(code, f"{page}:{line}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"the example at {page}:{line} failed: {exc!r}") from exc


def test_the_site_builds_with_warnings_as_errors(tmp_path, require):
    require("mkdocs")
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    reference = (site / "reference" / "index.html").read_text()
    # the API reference was generated from the docstrings, not left as ::: directives
    assert ":::" not in reference
    for name in ("rtrigid.Simulation", "rtrigid.Model", "rtrigid.Batch", "rtrigid.load_model"):
        assert name in reference, name
    assert "Betsch" in (site / "theory" / "index.html").read_text()
    # the table of what each scheme steps was generated from the registry
    integrators_page = (site / "guide" / "integrators" / "index.html").read_text()
    assert "generated: scheme-table" not in integrators_page
    for name in rt.integrators.product_names():
        assert f"<code>{name}</code></td>" in integrators_page, name
