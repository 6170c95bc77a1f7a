"""Reading the dashboard's rendered HTML in test-client tests."""
from __future__ import annotations

import re


def message_cells(html: str) -> list[str]:
    """The text of a table's message cells, in order."""
    return re.findall(r'<td class="message">([^<]*)</td>', html)


def pager_links(html: str) -> dict[str, str]:
    """The pager's links, label → address (``&amp;`` read as ``&``)."""
    nav = html[html.index('<nav class="pager">'):]
    return {label: href.replace("&amp;", "&")
            for href, label in re.findall(r'<a class="link" href="([^"]+)"[^>]*>([^<]+)</a>', nav)}
