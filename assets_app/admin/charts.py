"""The admin's pictures, rendered on the server as inline SVG (no script, no CDN).

- Bar charts of events over time: pygal (a maintained, pure-Python SVG chart library), with
  its JavaScript tooltips switched off; every bar links to the events it counts.
- Lineage: a layered drawing of a node's neighbourhood (inputs → node → outputs), laid out by
  grandalf's Sugiyama layout (pure Python: layers, crossing reduction, coordinates; graphviz's
  ``dot`` would need a system package); the SVG (boxes, curved edges, links) is drawn here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import pygal
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout
from pygal.style import Style

# --- bar charts ------------------------------------------------------------------------------

CHART_STYLE = Style(
    background="transparent",
    plot_background="transparent",
    foreground="#333",
    foreground_strong="#333",
    foreground_subtle="#ccc",
    colors=("#417690",),
    font_family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
    label_font_size=12,
    major_label_font_size=12,
    value_font_size=11,
    tooltip_font_size=12,
)


_SCRIPT = re.compile(r"<script\b.*?</script>", re.DOTALL)


@dataclass(frozen=True)
class Bar:
    label: str  # the x-axis label of the bar
    value: int
    url: str  # where the bar links to: the events it counts
    title: str  # what hovering the bar says


def bar_chart(
    bars: Sequence[Bar], *, title: str, label_every: int, width: int = 1100, height: int = 230
) -> SafeString:
    """A bar chart as inline SVG; every ``label_every``-th bar's label is shown."""
    chart = pygal.Bar(
        width=width,
        height=height,
        style=CHART_STYLE,
        show_legend=False,
        js=[],  # no script: the default loads tooltips from a CDN
        disable_xml_declaration=True,
        show_minor_x_labels=False,
        truncate_label=-1,
        margin=8,
        spacing=4,
        print_zeroes=False,
        title=None,
    )
    top = max((bar.value for bar in bars), default=0)
    step = max(1, -(-top // 4))  # whole numbers of events, at most 5 lines
    chart.y_labels = list(range(0, top + step, step))
    chart.x_labels = [bar.label for bar in bars]
    chart.x_labels_major = [bar.label for i, bar in enumerate(bars) if i % label_every == 0]
    chart.add(
        title,
        [
            {
                "value": bar.value,
                "label": bar.title,
                "xlink": {"href": bar.url, "target": "_self"},
            }
            for bar in bars
        ],
    )
    # pygal always writes its config for its (here absent) tooltip script: drop it
    svg = _SCRIPT.sub("", chart.render(is_unicode=True))
    return format_html(
        '<figure class="ar-chart" aria-label="{}">{}</figure>',
        title,
        mark_safe(svg),  # noqa: S308 - built by pygal through an XML tree: its text is escaped
    )


# --- lineage ---------------------------------------------------------------------------------

NodeKind = Literal["asset", "alias", "dag", "task", "reference"]

NODE_WIDTH = 260
NODE_HEIGHT = 38
COLUMN_GAP = 110
ROW_GAP = 18
PADDING = 12
LABEL_CHARS = 33  # longer labels are cut (the full name is the node's tooltip)


@dataclass(frozen=True)
class Node:
    key: str
    label: str
    kind: NodeKind
    url: str
    note: str = ""  # a second line: "waiting on this asset", "paused", ...
    focus: bool = False  # the page's own object
    waiting: bool = False  # drawn highlighted


@dataclass
class Lineage:
    """Nodes and the edges between them (upstream → downstream); a node's key names its
    place in the picture, so one asset may appear twice (as input and as output)."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def add(self, node: Node) -> str:
        self.nodes.setdefault(node.key, node)
        return node.key

    def link(self, source: str, target: str) -> None:
        if (source, target) not in self.edges:
            self.edges.append((source, target))


class _Box:
    """The size grandalf lays out; drawn left to right, so its width is our height."""

    def __init__(self) -> None:
        self.w = NODE_HEIGHT
        self.h = NODE_WIDTH
        self.xy: tuple[float, float] = (0.0, 0.0)


def _positions(lineage: Lineage) -> tuple[dict[str, tuple[float, float]], int, int]:
    """Pixel centres of the nodes (left to right), and the drawing's width and height."""
    vertices = {key: Vertex(key) for key in lineage.nodes}
    for vertex in vertices.values():
        vertex.view = _Box()
    graph = Graph(
        list(vertices.values()), [Edge(vertices[a], vertices[b]) for a, b in lineage.edges]
    )
    centres: dict[str, tuple[float, float]] = {}
    top = 0.0
    for component in graph.C:  # one layout per connected part, stacked
        layout = SugiyamaLayout(component)
        layout.xspace = ROW_GAP
        layout.yspace = COLUMN_GAP
        layout.init_all()
        layout.draw()
        across = [v.view.xy[0] for v in component.sV]
        low = min(across) - NODE_HEIGHT / 2
        for v in component.sV:
            along, across_ = v.view.xy[1], v.view.xy[0]
            centres[v.data] = (along + PADDING, across_ - low + top + PADDING)
        top += max(across) - low + NODE_HEIGHT / 2 + ROW_GAP
    left = min(x for x, _ in centres.values()) - NODE_WIDTH / 2 - PADDING
    centres = {key: (x - left, y) for key, (x, y) in centres.items()}
    width = max(x for x, _ in centres.values()) + NODE_WIDTH / 2 + PADDING
    height = max(y for _, y in centres.values()) + NODE_HEIGHT / 2 + PADDING
    return centres, int(width), int(height)


def _n(*numbers: float) -> tuple[str, ...]:
    """Coordinates as SVG numbers (format_html escapes its arguments to strings first)."""
    return tuple(f"{number:.1f}" for number in numbers)


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def lineage_svg(lineage: Lineage, *, title: str) -> SafeString:
    """The lineage as inline SVG: boxes that link to their pages, curved arrows between."""
    if not lineage.nodes:
        return SafeString("")
    centres, width, height = _positions(lineage)
    half_w, half_h = NODE_WIDTH / 2, NODE_HEIGHT / 2
    edges = format_html_join(
        "",
        '<path class="ar-edge{}" d="M{},{} C{},{} {},{} {},{}" marker-end="url(#ar-arrow)"/>',
        (
            (
                " ar-edge-waiting"
                if lineage.nodes[source].waiting or lineage.nodes[target].waiting
                else "",
                *_n(x1 + half_w, y1, x1 + half_w + COLUMN_GAP / 2, y1),
                *_n(x2 - half_w - COLUMN_GAP / 2, y2, x2 - half_w - 4, y2),
            )
            for source, target in lineage.edges
            for (x1, y1), (x2, y2) in [(centres[source], centres[target])]
        ),
    )
    nodes = format_html_join(
        "",
        '<a href="{}" class="ar-node ar-{}{}{}"><title>{}</title>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="6"/>'
        '<text x="{}" y="{}">{}</text>{}</a>',
        (
            (
                node.url,
                node.kind,
                " ar-focus" if node.focus else "",
                " ar-waiting" if node.waiting else "",
                f"{node.kind}: {node.label}" + (f" ({node.note})" if node.note else ""),
                *_n(x - half_w, y - half_h, NODE_WIDTH, NODE_HEIGHT),
                *_n(x - half_w + 10, y - (2 if node.note else -4)),
                _cut(node.label),
                format_html(
                    '<text class="ar-note" x="{}" y="{}">{}</text>',
                    *_n(x - half_w + 10, y + 13),
                    node.note,
                )
                if node.note
                else "",
            )
            for key, node in lineage.nodes.items()
            for (x, y) in [centres[key]]
        ),
    )
    return format_html(
        '<svg class="ar-lineage" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg"'
        ' width="{}" height="{}" viewBox="0 0 {} {}">'
        '<defs><marker id="ar-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7"'
        ' markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker>'
        "</defs>{}{}</svg>",
        title,
        width,
        height,
        width,
        height,
        edges,
        nodes,
    )
