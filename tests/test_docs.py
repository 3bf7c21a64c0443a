"""Every Python code block in README.md and docs/*.md runs as written.

The blocks of one file run in order in one namespace (a page reads top to bottom, and a
later block may use what an earlier one defined), with the repository root as the working
directory. A block that is deliberately not runnable on its own (a fragment, or a run
that takes minutes) is marked by an HTML comment on the line before its fence, which
names why::

    <!-- not run: fragment of the example above -->
    ```python
    ...
    ```

Any other fence language (``bash``, ``text``, ``stan``) is not Python and is not run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->\s*$")


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(line, source, reason_not_run)`` of each ```python block, in page order."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        language, start = match.group(1), i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"unclosed code fence opened at line {start + 1}")
        i += 1
        if language == "python":
            previous = lines[start - 1] if start else ""
            reason = _NOT_RUN.match(previous)
            blocks.append((start + 1, "\n".join(body) + "\n", reason and reason.group(1)))
    return blocks


def test_block_extraction_and_markers():
    page = "\n".join(
        [
            "text",
            "```python",
            "x = 1",
            "```",
            "<!-- not run: needs data -->",
            "```python",
            "y = x",
            "```",
            "```bash",
            "ls",
            "```",
        ]
    )
    assert python_blocks(page) == [(2, "x = 1\n", None), (6, "y = x\n", "needs data")]
    with pytest.raises(AssertionError, match="unclosed code fence opened at line 1"):
        python_blocks("```python\nx = 1\n")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    blocks = python_blocks(page.read_text())
    for line, source, reason in blocks:
        if reason:
            continue
        code = compile(source, f"{page.relative_to(ROOT)}:{line}", "exec")
        try:
            exec(code, namespace)
        except Exception as err:
            raise AssertionError(
                f"{page.relative_to(ROOT)}: the code block at line {line} fails: "
                f"{type(err).__name__}: {err}"
            ) from err
