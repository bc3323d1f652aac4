"""The status page: the status branches as a static HTML site (``reconciler report``, ``/ui``).

Pure rendering, like the ``status`` and ``history`` tables: callers read each
cluster's status branch through ``reconciler.source.StatusLedger`` into a
``ClusterReport`` and get back every page as text keyed by its relative path.
"""

from reconciler.status.report.html import (
    CSP,
    NO_OPTIONS,
    ChannelRow,
    PageOptions,
    Segment,
    build_site,
    channel_of,
    channel_rows,
    index_page,
    source_label,
    status_page,
    version_segments,
)
from reconciler.status.report.model import INDEX, ClusterReport, instance_page, slug
from reconciler.status.report.pipeline import (
    HALTED,
    OPEN,
    WAITING,
    Pipeline,
    PipelineCard,
    PipelineWave,
    Soak,
)
from reconciler.status.report.style import HALT_COLOURS, PHASE_COLOURS, phase_class

__all__ = [
    "CSP",
    "HALTED",
    "HALT_COLOURS",
    "INDEX",
    "NO_OPTIONS",
    "OPEN",
    "PHASE_COLOURS",
    "WAITING",
    "ChannelRow",
    "ClusterReport",
    "PageOptions",
    "Pipeline",
    "PipelineCard",
    "PipelineWave",
    "Segment",
    "Soak",
    "build_site",
    "channel_of",
    "channel_rows",
    "index_page",
    "instance_page",
    "phase_class",
    "slug",
    "source_label",
    "status_page",
    "version_segments",
]
