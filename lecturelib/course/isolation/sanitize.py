"""What students wrote and kernels printed, made inert before an instructor's or a student's browser shows it.

Formgrader's manual grading and the feedback pages render autograded notebooks as HTML in the instructor's
(or a student's) browser, where a script would act with their rights (an instructor's Jupyter token can rewrite
every grade and run code outside any sandbox). Everything a submission controls is therefore cleaned twice:

* at grading time (`SanitizeNotebook`, after the checks are judged): outputs keep only passive types (text,
  PNG/JPEG/GIF images, cleaned HTML and Markdown, LaTeX without link macros, SVG without script or links
  out of it, character references decoded before the check: `active_svg`); JavaScript,
  widget views and every other active type are dropped with a note; output metadata keeps image sizes only;
  widget state goes; student Markdown that renders to anything `clean_html` would change is replaced by its
  cleaned rendering; raw cells lose the MIME type that would make nbconvert paste them into the page;
* at rendering time (nbgrader_config.py: HTMLExporter.sanitize_html with `clean_html` as nbconvert's filter),
  for notebooks graded before, or anything the first pass missed.

`clean_html` is an allow-list (bleach): a few formatting tags, links to http(s), mail and anchors only, images
from http(s) or base64 PNG/JPEG/GIF data, no style, ids on headings only, classes only as code highlighting and
heading anchors name them. Markup it
does not allow is shown as text (escaped), so an instructor sees what was tried. `risky_markup` says what in a
piece of Markdown or HTML would have been removed: `audit` reports it.
"""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import bleach
from nbconvert.filters.markdown import markdown2html
from nbformat.notebooknode import NotebookNode, from_dict

TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div", "dl",
        "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li",
        "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody",
        "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "var"}
CELL_ATTRIBUTES = {"colspan", "rowspan", "align", "scope"}
CLASS = re.compile(r"highlight|hl-[a-z0-9]+|[a-z]{1,3}[0-9]?|dataframe|anchor-link")  # pygments, DataFrames, headings
HEADING_ID = re.compile(r"[^\s\"'<>`]{1,300}")  # nbconvert's heading anchors (URL-quoted titles)
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*", re.IGNORECASE)
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")
# MathJax macros that make links or attach HTML attributes: shown as text instead
MATHJAX_MACROS = re.compile(r"\\(href|url|class|cssId|style|unicode|require|data|html|mmlToken)\b")
SVG_ACTIVE = re.compile(r"<\s*script|\bon[a-z]+\s*=|javascript:|<\s*foreignObject|<\s*(iframe|embed|object)\b|"
                        r"<!ENTITY|\bhref\s*=\s*(?![\"']?\s*(#|data:image/(png|jpeg|gif)[;,]))", re.IGNORECASE)
URL_BLANKS = re.compile(r"[\x00-\x20]+")  # what a browser drops inside a URL's scheme ("java\tscript:")
DROPPED_NOTE = "[output removed by the grader: {types} can run script in a browser]"


def _allowed(tag: str, name: str, value: str) -> bool:
    if name == "class":
        return all(CLASS.fullmatch(token) for token in value.split())
    if name == "title" or (tag in ("td", "th") and name in CELL_ATTRIBUTES) or (tag == "ol" and name == "start"):
        return True
    if tag == "details" and name == "open":
        return True
    if tag in ("h1", "h2", "h3", "h4", "h5", "h6") and name == "id":
        return HEADING_ID.fullmatch(value) is not None
    if tag == "a" and name == "href":
        return re.match(r"\s*(https?:|mailto:|#|[^:/?#\s]*([/?#]|$))", value, re.IGNORECASE) is not None
    if tag == "img" and name in ("alt", "width", "height"):
        return name == "alt" or value.isdigit()
    if tag == "img" and name == "src":
        return re.match(r"\s*https?:", value, re.IGNORECASE) is not None or IMAGE_DATA.fullmatch(value.strip()) is not None
    return False


_CLEANER = bleach.Cleaner(tags=TAGS, attributes=_allowed, protocols=["http", "https", "mailto", "data"], strip=False,
                          strip_comments=True)


def clean_html(html: Any) -> str:
    """HTML with only passive markup left (see the module); what is not allowed is escaped, style blocks dropped.
    Also nbconvert's `clean_html` filter for this course (nbgrader_config.py)."""
    text = html.decode() if isinstance(html, bytes) else str(html)
    text = re.sub(r"<\s*style\b.*?<\s*/\s*style\s*>", "", text, flags=re.IGNORECASE | re.DOTALL)
    return _CLEANER.clean(text)


def _neutral_math(text: str) -> str:
    return MATHJAX_MACROS.sub(r"\\text{\1}", text)


def _tags(html: str) -> set[str]:
    return {t.lower() for t in re.findall(r"<\s*([a-zA-Z][a-zA-Z0-9-]*)", html)}


def _unchanged(html: str) -> bool:
    """Whether clean_html leaves `html` as it is: compared with a cleaner that allows every tag, attribute and URL
    scheme in it, so that both serialize the same way and only what clean_html removes differs."""
    text = re.sub(r"<\s*style\b.*?<\s*/\s*style\s*>", "", html, flags=re.IGNORECASE | re.DOTALL)
    if len(text) != len(html):
        return False
    schemes = set(re.findall(r"([A-Za-z][A-Za-z0-9+.-]*)\s*:", unescape(html))) | {"http", "https", "mailto", "data"}
    everything = bleach.Cleaner(tags=_tags(html) | TAGS, attributes=lambda tag, name, value: True,
                                protocols=sorted(schemes), strip=False, strip_comments=True)
    return everything.clean(html) == clean_html(html)


def risky_markup(markdown: str, *, is_html: bool = False) -> list[str]:
    """What in `markdown` (or HTML) a browser could run, or that clean_html would remove: tags, attributes, URLs,
    MathJax link macros ([] when there is nothing)."""
    html = markdown if is_html else markdown2html(markdown)
    found = [f"<{t}>" for t in sorted(_tags(html) - TAGS)]
    for m in re.finditer(r"<\s*([a-zA-Z][a-zA-Z0-9-]*)([^>]*)>", html):
        for name, value in re.findall(r"([a-zA-Z_:-]+)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)", m.group(2)):
            if not _allowed(m.group(1).lower(), name.lower(), unescape(value.strip("\"'"))):
                found.append(f"{name}= on <{m.group(1).lower()}>")
    found += [f"\\{m}" for m in MATHJAX_MACROS.findall(markdown)]
    if not found and not _unchanged(html):
        found.append("markup that clean_html changes")
    return sorted(set(found))


def clean_markdown(source: str) -> str:
    """Markdown as written when it renders to passive HTML only; else its cleaned rendering, as one HTML block (a
    single line in a <div>: nothing in it is read as Markdown again)."""
    neutral = _neutral_math(source)
    if not risky_markup(neutral):
        return neutral
    cleaned = clean_html(markdown2html(neutral)).strip().replace("\r", "").replace("\n", "&#10;")
    return f"<div>{cleaned}</div>"


def active_svg(svg: str) -> bool:
    """Whether an SVG could run script or navigate where it is shown: script, event handlers, foreign content, a link
    anywhere but inside itself or to a data image, or a `javascript:` URL, checked on the text as a browser reads it
    (character references decoded, `&#106;avascript:`; blanks inside a scheme dropped); entities it declares itself
    (`<!ENTITY`) are refused outright."""
    decoded = unescape(svg)
    return any(SVG_ACTIVE.search(text) for text in (svg, decoded)) or "javascript:" in URL_BLANKS.sub("", decoded).lower()


def clean_output(output: NotebookNode) -> NotebookNode:
    """One output with only passive content (see the module)."""
    if output.get("output_type") not in ("display_data", "execute_result"):
        return output
    data: dict[str, Any] = {}
    dropped: list[str] = []
    for mime, value in output.get("data", {}).items():
        text = "".join(value) if isinstance(value, list) else value
        if mime == "text/plain" and isinstance(text, str):
            data[mime] = text
        elif mime in IMAGE_TYPES and isinstance(text, str) and BASE64.fullmatch(text):
            data[mime] = text
        elif mime == "text/html" and isinstance(text, str):
            data[mime] = clean_html(text)
        elif mime == "text/markdown" and isinstance(text, str):
            data[mime] = clean_markdown(text)
        elif mime == "text/latex" and isinstance(text, str):
            data[mime] = _neutral_math(text)
        elif mime == "image/svg+xml" and isinstance(text, str) and not active_svg(text):
            data[mime] = text
        elif mime == "application/json" and isinstance(value, (dict, list)):
            data[mime] = value
        else:
            dropped.append(mime)
    if dropped and "text/plain" not in data:
        data["text/plain"] = DROPPED_NOTE.format(types=", ".join(sorted(dropped)))
    metadata = {}
    for mime in IMAGE_TYPES:
        sizes = output.get("metadata", {}).get(mime, {})
        if mime in data and isinstance(sizes, dict):
            kept = {k: v for k, v in sizes.items() if k in ("width", "height") and type(v) is int and 0 < v < 100_000}
            if kept:
                metadata[mime] = kept
    out = {"output_type": output["output_type"], "data": data, "metadata": metadata}
    if output["output_type"] == "execute_result":
        count = output.get("execution_count")
        out["execution_count"] = count if type(count) is int else None
    return from_dict(out)


def clean_cell(cell: NotebookNode) -> NotebookNode:
    """A cell a student could have written or run, made inert: Markdown, attachments, raw cells, outputs."""
    if cell.cell_type == "markdown":
        cell.source = clean_markdown(cell.source)
    if cell.cell_type in ("markdown", "raw") and "attachments" in cell:
        cell.attachments = {name: {m: v for m, v in bundle.items() if m in IMAGE_TYPES and isinstance(v, str)
                                   and BASE64.fullmatch(v)}
                            for name, bundle in cell.attachments.items() if isinstance(bundle, dict)}
    if cell.cell_type == "raw":
        cell.metadata.pop("raw_mimetype", None)  # nbconvert pastes a text/html raw cell into the page
        cell.metadata.pop("format", None)
    if cell.cell_type == "code":
        cell.outputs = [clean_output(o) for o in cell.get("outputs", [])]
    return cell


def clean_notebook(nb: NotebookNode, trusted: set[str] | frozenset[str] = frozenset()) -> NotebookNode:
    """Every cell cleaned but Markdown whose source is in `trusted` (the release's own cells); no widget state."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source in trusted:
            continue
        clean_cell(cell)
    return nb
