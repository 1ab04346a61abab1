"""MkDocs hook: the built site requests nothing from the internet (issue 29, item 5).

After the build, every page and stylesheet of the site is read for what a browser
would fetch on opening it: ``<link>``, ``<script>``, ``<img>``, ``<source>``,
``<iframe>``, ... ``href``/``src``/``srcset``, CSS ``url(...)`` and ``@import``, and
the elements that make Material load a script from a CDN (a ``mermaid`` diagram).
Any of them pointing off the site (``http:``, ``https:``, ``//host``) fails the
build, naming the file and the URL. Links a reader follows (``<a href>``) are not
requests and may go anywhere. ``mkdocs.yml`` sets ``theme.font: false`` for the same
reason: Material would otherwise ask Google Fonts on every page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_TAG = re.compile(
    r"<(link|script|img|source|iframe|embed|object|video|audio|track|input)\b[^>]*>",
    re.I,
)
_ATTR = re.compile(r"""\b(href|src|srcset|data|poster)\s*=\s*["']([^"']+)["']""", re.I)
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')]+)""", re.I)
_CSS_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"');\s]+)""", re.I)
_STYLE = re.compile(r"<style\b[^>]*>(.*?)</style>|style=\"([^\"]*)\"", re.I | re.S)
_CDN_USERS = {"mermaid": re.compile(r"class=\"[^\"]*\bmermaid\b", re.I)}


def external(url: str) -> bool:
    """A URL a browser would fetch from another host."""
    url = url.strip().lower()
    return url.startswith(("http:", "https:", "//", "ftp:"))


def html_requests(text: str) -> list[str]:
    """Every URL a page would make the browser fetch (assets, not links)."""
    urls = []
    for tag in _TAG.finditer(text):
        for _, value in _ATTR.findall(tag[0]):
            urls += [part.split()[0] for part in value.split(",") if part.strip()]
    for block, inline in _STYLE.findall(text):
        urls += css_requests(block or inline)
    return urls


def css_requests(text: str) -> list[str]:
    return _CSS_URL.findall(text) + _CSS_IMPORT.findall(text)


def offenders(site: Path) -> list[str]:
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix not in (".html", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        urls = html_requests(text) if path.suffix == ".html" else css_requests(text)
        where = path.relative_to(site).as_posix()
        found += [f"{where}: {url}" for url in urls if external(url)]
        if path.suffix == ".html":
            found += [
                f"{where}: a {name} block (Material loads {name} from a CDN)"
                for name, pattern in _CDN_USERS.items()
                if pattern.search(text)
            ]
    return found


def on_post_build(config: Any, **kwargs: Any) -> None:
    found = offenders(Path(config["site_dir"]))
    if found:
        raise PluginError(
            "offline hook: the site would fetch these from the internet (make every "
            "asset local, or drop it):\n  " + "\n  ".join(found)
        )
