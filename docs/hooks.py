"""MkDocs hooks: the site's home page is README.md and its architecture page ARCHITECTURE.md.

Both files stay at the repository root (GitHub and PyPI show the README; tooling reads
ARCHITECTURE.md), so the pages that show them in the site read them here instead of keeping
a copy. Their links and images are written from the root (``docs/x.md``); in the site they
are relative to ``docs/``, so that prefix is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: site page -> the root file it shows
INCLUDED = {"index.md": "README.md", "architecture.md": "ARCHITECTURE.md"}


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    source = INCLUDED.get(page.file.src_uri)
    if source is None:
        return markdown
    text = (ROOT / source).read_text(encoding="utf-8")
    text = re.sub(r"\]\(ARCHITECTURE\.md\)", "](architecture.md)", text)
    return re.sub(r'(\]\(|src=")docs/', r"\1", text)
