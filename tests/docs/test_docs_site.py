"""The manual builds, links resolve, and nothing in it points where a reader cannot follow.

``mkdocs build --strict`` (``mkdocs.yml``: every broken link or anchor, missing picture and
page left out of the nav is a warning, which ``--strict`` makes an error) runs into a scratch
directory. The README is not part of the site, so its links are checked here the same way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.examples import (
    NOT_RUN_AS_WRITTEN,
    PAGES_RUN_BY,
    doc_blocks,
    doc_pages,
    not_run_reason,
)
from tests.live_server import REPO


def _require_mkdocs() -> None:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        message = 'needs the docs extra: pip install -e ".[docs]"'
        if os.environ.get("CI"):
            pytest.fail(message)  # CI must build the docs, not skip them
        pytest.skip(message)


@pytest.mark.slow  # mkdocs in its own interpreter
def test_the_site_builds_strict_offline(tmp_path):
    _require_mkdocs()

    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    for page in (REPO / "docs").glob("*.md"):
        assert (tmp_path / page.with_suffix(".html").name).is_file(), page.name
    # offline: no page loads a font, script, style sheet or picture from another host
    for html in tmp_path.glob("*.html"):
        loads = re.findall(r"""(?:src=|<link[^>]*href=)["'](https?:)?//[^"']*""", html.read_text())
        assert loads == [], html.name


def _headings(page: Path) -> set[str]:
    from markdown.extensions.toc import slugify

    text = FENCED.sub("", page.read_text())
    return {slugify(h.strip().replace("`", ""), "-") for h in HEADING.findall(text)}


FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_link_of_the_readme_resolves():
    _require_mkdocs()
    readme = REPO / "README.md"

    for target in LINK.findall(FENCED.sub("", readme.read_text())):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        page = (REPO / path) if path else readme
        assert page.exists(), f"README links to missing {target}"
        if anchor:
            assert anchor in _headings(page), f"README links to missing anchor {target}"


def test_no_page_cites_what_a_clone_does_not_have():
    for page in [*doc_pages(), REPO / "mkdocs.yml"]:
        text = page.read_text()
        assert "SPEC.md" not in text, page
        assert not re.search(r"SPEC ?§", text), page


def test_the_readme_is_short_and_its_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()

    assert len(readme.splitlines()) < 100
    [setup] = [b for b in doc_blocks() if b.page.name == "README.md" and "make test" in b.body]
    assert re.search(r"^make test\b", setup.body, re.MULTILINE)
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_every_named_example_is_run_by_a_test():
    names = {b.name for b in doc_blocks() if b.name}
    sources = "\n".join(p.read_text() for p in (REPO / "tests").rglob("*.py"))

    asked = set(re.findall(r"""(?:doc_example|run_shell_example)\(\s*["']([\w.-]+)["']""", sources))

    assert names, "no named example in the docs"
    assert names - asked == set(), "named examples no test runs"
    assert asked - names == set(), "tests ask for examples the docs do not have"


def test_every_shell_block_is_run_or_says_why():
    shell = [b for b in doc_blocks() if b.language in ("sh", "bash")]

    unaccounted = [str(b) for b in shell if b.name is None and not_run_reason(b) is None]
    reasons_used = {not_run_reason(b) for b in shell if b.name is None}

    assert unaccounted == [], "name the example and run it, or say why not (NOT_RUN_AS_WRITTEN)"
    assert set(NOT_RUN_AS_WRITTEN.values()) <= reasons_used, "a NOT_RUN entry matches no block"
    for page, test in PAGES_RUN_BY.items():
        assert f'"docs" / "{page}"' in (REPO / test).read_text(), (page, test)
