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
from datetime import datetime
from typing import Literal

import pygal
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout
from pygal.style import Style

from assets_app.formats import duration_human, timestamp_human

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
LABEL_CHARS = 33  # per line: longer labels wrap (see _wrap)
LINE_HEIGHT = 15
#: lines a label may take: a DAG id of Airflow's 250 characters fits whole; a longer label (an
#: asset's URI may be 1,500) is cut there with "…" (the full name is the node's tooltip)
LABEL_LINES = 12


@dataclass(frozen=True)
class Node:
    key: str
    label: str
    kind: NodeKind
    url: str
    note: str = ""  # a second line: "waiting on this asset", "paused", ...
    focus: bool = False  # the page's own object
    waiting: bool = False  # drawn highlighted
    state: str = ""  # a task instance's state: the box is coloured by it (a run's graph)


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


#: A task graph is drawn top to bottom (its layers are rows), with narrower boxes and this gap
#: between the rows, so that a graph five tasks deep stays readable at 1400 px.
GRAPH_NODE_WIDTH = 220
ROW_GAP_DOWN = 46

Direction = Literal["right", "down"]


class _Box:
    """The size grandalf lays out (it lays layers out top to bottom: ``w`` is across a
    layer, ``h`` along the edges); ``height`` is the box's own, which grows with its lines."""

    def __init__(self, direction: Direction, height: float = NODE_HEIGHT) -> None:
        self.w: float
        self.h: float
        if direction == "right":  # drawn left to right: its width is our height
            self.w, self.h = height, NODE_WIDTH
        else:
            self.w, self.h = GRAPH_NODE_WIDTH, height
        self.height = height
        self.xy: tuple[float, float] = (0.0, 0.0)


def _wrap(text: str, chars: int) -> list[str]:
    """``text`` in lines of at most ``chars`` characters, broken after a separator (``_ . - /
    : @`` or a space) where one falls in a line's second half, else at ``chars``; at most
    ``LABEL_LINES`` lines, the last one cut with "…" when more is left."""
    lines: list[str] = []
    rest = text
    while rest and len(lines) < LABEL_LINES:
        if len(rest) <= chars:
            lines.append(rest)
            rest = ""
            break
        cut = max(rest.rfind(sep, chars // 2, chars) for sep in "_.-/:@ ") + 1 or chars
        lines.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        lines[-1] = lines[-1][: chars - 1] + "…"
    return lines or [""]


def _cut(text: str, chars: int = LABEL_CHARS) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _node_lines(node: Node, chars: int) -> tuple[list[str], str]:
    """A node's label lines and its note (one line, cut)."""
    return _wrap(node.label, chars), _cut(node.note, chars + 6)


def _node_height(lines: int) -> float:
    return max(NODE_HEIGHT, lines * LINE_HEIGHT + 8)


def _graph(lineage: Lineage, direction: Direction, chars: int) -> Graph:
    vertices = {key: Vertex(key) for key in lineage.nodes}
    for key, vertex in vertices.items():
        label, note = _node_lines(lineage.nodes[key], chars)
        vertex.view = _Box(direction, _node_height(len(label) + bool(note)))
    return Graph(
        list(vertices.values()), [Edge(vertices[a], vertices[b]) for a, b in lineage.edges]
    )


def _positions_down(
    lineage: Lineage, chars: int
) -> tuple[dict[str, tuple[float, float]], dict[str, float], int, int]:
    """Pixel centres and heights of the nodes laid out top to bottom, and the drawing's width
    and height; the connected parts side by side."""
    graph = _graph(lineage, "down", chars)
    centres: dict[str, tuple[float, float]] = {}
    heights: dict[str, float] = {}
    left = 0.0
    for component in graph.C:
        layout = SugiyamaLayout(component)
        layout.xspace = ROW_GAP
        layout.yspace = ROW_GAP_DOWN
        layout.init_all()
        layout.draw()
        xs = [v.view.xy[0] for v in component.sV]
        low = min(xs) - GRAPH_NODE_WIDTH / 2
        for v in component.sV:
            centres[v.data] = (v.view.xy[0] - low + left + PADDING, v.view.xy[1])
            heights[v.data] = v.view.height
        left += max(xs) - low + GRAPH_NODE_WIDTH / 2 + ROW_GAP
    top = min(y - heights[key] / 2 for key, (_, y) in centres.items()) - PADDING
    centres = {key: (x, y - top) for key, (x, y) in centres.items()}
    width = max(x for x, _ in centres.values()) + GRAPH_NODE_WIDTH / 2 + PADDING
    height = max(y + heights[key] / 2 for key, (_, y) in centres.items()) + PADDING
    return centres, heights, int(width), int(height)


def _positions(
    lineage: Lineage, chars: int
) -> tuple[dict[str, tuple[float, float]], dict[str, float], int, int]:
    """Pixel centres and heights of the nodes (left to right), and the drawing's width and
    height."""
    graph = _graph(lineage, "right", chars)
    centres: dict[str, tuple[float, float]] = {}
    heights: dict[str, float] = {}
    top = 0.0
    for component in graph.C:  # one layout per connected part, stacked
        layout = SugiyamaLayout(component)
        layout.xspace = ROW_GAP
        layout.yspace = COLUMN_GAP
        layout.init_all()
        layout.draw()
        low = min(v.view.xy[0] - v.view.height / 2 for v in component.sV)
        for v in component.sV:
            along, across_ = v.view.xy[1], v.view.xy[0]
            centres[v.data] = (along + PADDING, across_ - low + top + PADDING)
            heights[v.data] = v.view.height
        top += max(v.view.xy[0] + v.view.height / 2 for v in component.sV) - low + ROW_GAP
    left = min(x for x, _ in centres.values()) - NODE_WIDTH / 2 - PADDING
    centres = {key: (x - left, y) for key, (x, y) in centres.items()}
    width = max(x for x, _ in centres.values()) + NODE_WIDTH / 2 + PADDING
    height = max(y + heights[key] / 2 for key, (_, y) in centres.items()) + PADDING
    return centres, heights, int(width), int(height)


def _n(*numbers: float) -> tuple[str, ...]:
    """Coordinates as SVG numbers (format_html escapes its arguments to strings first)."""
    return tuple(f"{number:.1f}" for number in numbers)


def _edge_path(
    start: tuple[float, float],
    end: tuple[float, float],
    *,
    direction: Direction,
    half_w: float,
    half_heights: tuple[float, float],
) -> tuple[str, ...]:
    """The eight numbers of a curved edge's ``M x,y C x,y x,y x,y`` from ``start`` to ``end``
    (box centres), leaving and entering the boxes on the side the drawing flows to."""
    (x1, y1), (x2, y2) = start, end
    if direction == "right":
        return _n(
            x1 + half_w, y1, x1 + half_w + COLUMN_GAP / 2, y1,
            x2 - half_w - COLUMN_GAP / 2, y2, x2 - half_w - 4, y2,
        )  # fmt: skip
    out, into = half_heights
    bend = ROW_GAP_DOWN / 2
    return _n(x1, y1 + out, x1, y1 + out + bend, x2, y2 - into - bend, x2, y2 - into - 4)


def _node_text(x: float, y: float, lines: list[str], note: str) -> SafeString:
    """A box's lines of text, centred on ``y`` (its centre) from ``x``, the note last."""
    count = len(lines) + bool(note)
    first = y - count * LINE_HEIGHT / 2 + 11.5
    texts = format_html_join(
        "",
        '<text x="{}" y="{}">{}</text>',
        ((*_n(x, first + i * LINE_HEIGHT), line) for i, line in enumerate(lines)),
    )
    if not note:
        return texts
    return format_html(
        '{}<text class="ar-note" x="{}" y="{}">{}</text>',
        texts,
        *_n(x, first + len(lines) * LINE_HEIGHT),
        note,
    )


def lineage_svg(lineage: Lineage, *, title: str, direction: Direction = "right") -> SafeString:
    """The lineage as inline SVG: boxes that link to their pages, curved arrows between;
    left to right, or top to bottom (``direction="down"``, a task graph)."""
    if not lineage.nodes:
        return SafeString("")
    chars = LABEL_CHARS if direction == "right" else LABEL_CHARS * GRAPH_NODE_WIDTH // NODE_WIDTH
    if direction == "right":
        centres, heights, width, height = _positions(lineage, chars)
        box_width = NODE_WIDTH
    else:
        centres, heights, width, height = _positions_down(lineage, chars)
        box_width = GRAPH_NODE_WIDTH
    half_w = box_width / 2
    edges = format_html_join(
        "",
        '<path class="ar-edge{}" d="M{},{} C{},{} {},{} {},{}" marker-end="url(#ar-arrow)"/>',
        (
            (
                " ar-edge-waiting"
                if lineage.nodes[source].waiting or lineage.nodes[target].waiting
                else "",
                *_edge_path(
                    centres[source],
                    centres[target],
                    direction=direction,
                    half_w=half_w,
                    half_heights=(heights[source] / 2, heights[target] / 2),
                ),
            )
            for source, target in lineage.edges
        ),
    )
    nodes = format_html_join(
        "",
        '<a href="{}" class="ar-node ar-{}{}{}{}"><title>{}</title>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="6"/>{}</a>',
        (
            (
                node.url,
                node.kind,
                " ar-focus" if node.focus else "",
                " ar-waiting" if node.waiting else "",
                f" ar-ti ar-ti-{node.state}" if node.state else "",
                f"{node.kind}: {node.label}" + (f" ({node.note})" if node.note else ""),
                *_n(x - half_w, y - heights[key] / 2, box_width, heights[key]),
                _node_text(x - half_w + 10, y, *_node_lines(node, chars)),
            )
            for key, node in lineage.nodes.items()
            for (x, y) in [centres[key]]
        ),
    )
    return format_html(
        '<svg class="ar-lineage ar-flow-{}" role="img" aria-label="{}"'
        ' xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}">'
        '<defs><marker id="ar-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7"'
        ' markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker>'
        "</defs>{}{}</svg>",
        direction,
        title,
        width,
        height,
        width,
        height,
        edges,
        nodes,
    )


# --- a run's Gantt strip ---------------------------------------------------------------------

GANTT_LABEL_WIDTH = 260
GANTT_WIDTH = 1040
GANTT_ROW = 22


@dataclass(frozen=True)
class GanttBar:
    label: str  # the task id (and map index)
    state: str
    start: datetime | None  # None: not started (no bar, the state says why)
    end: datetime | None  # None when not started
    url: str


def gantt_svg(bars: Sequence[GanttBar], *, start: datetime | None, title: str) -> SafeString:
    """One row per task instance: a bar from its start to its end on the run's time axis (from
    the run's start to the last end), coloured by state, its duration beside it; as Airflow's
    Gantt view draws a run."""
    if not bars:
        return SafeString("")
    starts = [bar.start for bar in bars if bar.start is not None]
    ends = [bar.end for bar in bars if bar.end is not None]
    origin = min([*starts, *([start] if start else [])], default=None)
    finish = max(ends, default=None)
    span = (finish - origin).total_seconds() if origin and finish else 0.0
    track = GANTT_WIDTH - GANTT_LABEL_WIDTH - 90  # room for the duration after a bar
    scale = track / span if span > 0 else 0.0

    def row(i: int, bar: GanttBar) -> SafeString:
        y = 24 + i * GANTT_ROW
        label = format_html(
            '<text class="ar-gantt-label" x="4" y="{}">{}</text>', f"{y + 14:.0f}", _cut(bar.label)
        )
        if bar.start is None or bar.end is None or origin is None:
            text = format_html(
                '<text class="ar-note" x="{}" y="{}">{}</text>',
                GANTT_LABEL_WIDTH,
                f"{y + 14:.0f}",
                bar.state.replace("_", " ") + ", not started",
            )
            return format_html('<a href="{}">{}{}</a>', bar.url, label, text)
        x = GANTT_LABEL_WIDTH + (bar.start - origin).total_seconds() * scale
        width = max(2.0, (bar.end - bar.start).total_seconds() * scale)
        took = duration_human(bar.end - bar.start)
        return format_html(
            '<a href="{}" class="ar-ti-{}"><title>{}: {}, {}</title>{}'
            '<rect x="{}" y="{}" width="{}" height="{}" rx="3"/>'
            '<text class="ar-note" x="{}" y="{}">{}</text></a>',
            bar.url,
            bar.state,
            bar.label,
            bar.state.replace("_", " "),
            took,
            label,
            *_n(x, y + 3, width, GANTT_ROW - 6),
            *_n(x + width + 6, y + 14),
            took,
        )

    height = 24 + len(bars) * GANTT_ROW + 8
    axis = format_html(
        '<text class="ar-note" x="{}" y="14">{}</text>'
        '<text class="ar-note" x="{}" y="14" text-anchor="end">+ {}</text>',
        GANTT_LABEL_WIDTH,
        timestamp_human(origin) if origin else "not started",
        GANTT_LABEL_WIDTH + track,
        duration_human(span),
    )
    rows = format_html_join("", "{}", ((row(i, bar),) for i, bar in enumerate(bars)))
    return format_html(
        '<svg class="ar-gantt" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg"'
        ' width="{}" height="{}" viewBox="0 0 {} {}">{}{}</svg>',
        title,
        GANTT_WIDTH,
        height,
        GANTT_WIDTH,
        height,
        axis,
        rows,
    )
