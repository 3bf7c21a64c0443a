"""Every Python code block in README.md and docs/*.md runs as written.

The blocks of one file run in order in one namespace (a page reads top to bottom, and a
later block may use what an earlier one defined). Every page runs from a temporary working
directory with ``PYMC_ODESENS_SHARED_DIR`` set, as README's "Reference material" tells a
user to do: a snippet that reads the reference material finds it through that variable
(``Path(os.environ.get("PYMC_ODESENS_SHARED_DIR", "../shared"))``), never through the
working directory. The pages that read the variable run a second time in the default
layout: from the repository root with the variable unset, ``shared/`` beside the
repository (skipped where this checkout has no such folder). The other pages cannot depend
on the layout: they have run from a temporary directory without reading the variable.

A block that is deliberately not runnable on its own (a fragment, or a run
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

from tests.conftest import SHARED_DIR

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHARED_VARIABLE = "PYMC_ODESENS_SHARED_DIR"
DEFAULT_SHARED = ROOT.parent / "shared"  # the default layout: `../shared` from the root
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


def run_page(page: Path) -> None:
    """Run the Python blocks of ``page`` in order, in one namespace."""
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for line, source, reason in python_blocks(page.read_text()):
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


def reads_shared_variable(page: Path) -> bool:
    """Whether a run block of ``page`` finds files through ``PYMC_ODESENS_SHARED_DIR``."""
    return any(
        SHARED_VARIABLE in source
        for _, source, reason in python_blocks(page.read_text())
        if not reason
    )


def test_pages_that_read_material_use_the_variable():
    """A run block that names a file of the reference material or of examples/ goes
    through the variable (a path relative to the working directory fails elsewhere)."""
    relative = re.compile(r"""["'](\.\./shared/|examples/|shared/)""")
    offenders = [
        f"{page.relative_to(ROOT)}:{line}"
        for page in PAGES
        for line, source, reason in python_blocks(page.read_text())
        if not reason and relative.search(source)
    ]
    assert not offenders, f"blocks with paths relative to the working directory: {offenders}"
    assert [p.name for p in PAGES if reads_shared_variable(p)], "no page reads the variable"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(page, monkeypatch, tmp_path):
    """From an empty temporary working directory, with the variable set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SHARED_VARIABLE, str(SHARED_DIR.resolve()))
    run_page(page)


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if reads_shared_variable(p)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_code_blocks_run_in_default_layout(page, monkeypatch):
    """From the repository root, the variable unset, the material in ``../shared``."""
    if not DEFAULT_SHARED.is_dir():
        pytest.skip(f"no {DEFAULT_SHARED}: this checkout is not in the default layout")
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv(SHARED_VARIABLE, raising=False)
    run_page(page)
