"""Checks that a Markdown document renders as written (issue 36, item 4): its HTML (parsed
with the standard library's parser) has a heading for every heading line, a table with a
non-empty header row for every table (and as many cells in each Markdown row as in its
header), a list item for every list line, and no Markdown left as literal text (`**`, a backtick, `|---`, a `- ` or `1. ` line inside a paragraph)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

HEADING_LINE = re.compile(r"^#{1,6} ")
LIST_LINE = re.compile(r"^\s*(?:[-*+]|\d+\.) \S")
TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
LITERAL_MARKDOWN = (("**", "bold marker"), ("`", "backtick"), ("|---", "table rule"),
                    ("](", "link syntax"))
LINE_START_MARKDOWN = re.compile(r"(?m)^\s*(?:[-*+] |\d+\. |#{1,6} |\|)")
CODE = {"code", "pre"}
VOID = {"br", "hr", "img", "meta", "link", "input"}


@dataclass
class Element:
    tag: str
    children: list = field(default_factory=list)   # Element or str

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self, *tags: str):
        for child in self.children:
            if isinstance(child, Element):
                if child.tag in tags:
                    yield child
                yield from child.iter(*tags)


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document")
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag)
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse_html(html: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], f"unclosed: {[e.tag for e in builder.stack[1:]]}"
    return builder.root


def _prose_lines(markdown: str) -> list[str]:
    """The Markdown's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _text_outside_code(element: Element) -> list[tuple[str, str]]:
    """(enclosing tag, text) of every text node not inside <code> or <pre>."""
    out = []
    for child in element.children:
        if isinstance(child, str):
            out.append((element.tag, child))
        elif child.tag not in CODE:
            out.extend(_text_outside_code(child))
    return out


def _cells(line: str) -> int:
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def _ragged_rows(lines: list[str]) -> list[str]:
    """Markdown table rows with another number of cells than their header (e.g. two rows a
    template joined into one line: the HTML table silently drops the extra cells)."""
    problems = []
    for i, line in enumerate(lines):
        if i and TABLE_RULE.match(line.strip()) and "|" in line:
            width = _cells(lines[i - 1])
            for row in lines[i + 1:]:
                if not row.strip().startswith("|"):
                    break
                if _cells(row) != width:
                    problems.append(f"a table row of {_cells(row)} cells under a header of "
                                    f"{width}: {row.strip()[:120]!r}")
    return problems


def markdown_problems(markdown: str, html: str) -> list[str]:
    """What of `markdown` did not render as written in `html` (empty: nothing)."""
    root = parse_html(html)
    lines = _prose_lines(markdown)
    problems = []
    headings = [line for line in lines if HEADING_LINE.match(line)]
    rendered = list(root.iter("h1", "h2", "h3", "h4", "h5", "h6"))
    if len(headings) != len(rendered):
        problems.append(f"{len(headings)} heading lines but {len(rendered)} HTML headings")
    tables = sum(1 for line in lines if TABLE_RULE.match(line.strip()) and "|" in line)
    rendered_tables = list(root.iter("table"))
    if tables != len(rendered_tables):
        problems.append(f"{tables} Markdown tables but {len(rendered_tables)} HTML tables")
    for k, table in enumerate(rendered_tables):
        header = [th.text().strip() for th in table.iter("th")]
        if not any(header):
            problems.append(f"table {k + 1} has an empty header row")
        if not list(table.iter("tbody")):
            problems.append(f"table {k + 1} ({' | '.join(header)}) has no rows")
    problems += _ragged_rows(lines)
    items = [line for line in lines if LIST_LINE.match(line) and not line.lstrip().startswith("|")]
    rendered_items = list(root.iter("li"))
    if len(items) != len(rendered_items):
        problems.append(f"{len(items)} list lines but {len(rendered_items)} HTML list items")
    for tag, text in _text_outside_code(root):
        for literal, what in LITERAL_MARKDOWN:
            if literal in text:
                problems.append(f"literal {what} {literal!r} in <{tag}>: {text.strip()[:120]!r}")
        if tag == "p" and LINE_START_MARKDOWN.search(text):
            line = LINE_START_MARKDOWN.search(text).group(0)
            problems.append(f"a line starting {line.strip()!r} inside a paragraph: "
                            f"{text.strip()[:120]!r}")
    return problems
