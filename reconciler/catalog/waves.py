"""Load ``waves.yaml`` (SPEC section 4b) and resolve its cluster selectors against the catalog.

Called at the end of every load, full or incremental (``catalog.incremental``): the
file is small, and whether it is valid depends on the clusters and their labels, which
any commit may change. An absent file is ``None`` (no wave holds anything). A file with
an error is kept as ``Waves(valid=False)`` rather than dropped: dropping it would let
every cluster start a new release at once, the very thing waves exist to prevent, so the
daemon holds catalog-driven version changes instead (``CatalogInvalid``, naming the line).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.analysis import check_wave_query
from reconciler.catalog.analysis import read_prometheus
from reconciler.catalog.context import LoadContext
from reconciler.catalog.yamlread import Document
from reconciler.model.catalog import Catalog
from reconciler.model.problems import Problem
from reconciler.model.waves import (
    WAVES_FILE,
    Approval,
    DurationError,
    Wave,
    Waves,
    parse_duration,
)

_GLOB = re.compile(r"[*?\[]")
# Kubernetes label keys (optional DNS-subdomain prefix) and values
_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def load_waves(ctx: LoadContext, base: Path, catalog: Catalog) -> Waves | None:
    """``waves.yaml`` at ``base`` with its problems reported in ``ctx``; None when absent."""
    path = base / WAVES_FILE
    if not os.path.lexists(path):
        return None
    first = len(ctx.problems)
    if not path.is_file():
        ctx.error(WAVES_FILE, None, "waves.yaml is not a readable file")
        return _invalid(ctx.problems[first:])
    doc = ctx.read_reconciler_file(path, "Waves")
    if doc is None:
        return _invalid(ctx.problems[first:])
    waves = tuple(_wave(ctx, doc, i, raw) for i, raw in enumerate(doc.data["waves"]))
    _check_wave_names(ctx, doc, waves)
    members = _members(ctx, doc, waves, catalog)
    approvals = tuple(_approvals(ctx, doc, waves, catalog))
    problems = ctx.problems[first:]
    if any(p.is_error for p in problems):
        return _invalid(problems)
    return Waves(waves=waves, approvals=approvals, members=members)


def _invalid(problems: list[Problem]) -> Waves:
    first = next((p for p in problems if p.is_error), None)
    return Waves(valid=False, error=str(first) if first else "waves.yaml is invalid")


def _wave(ctx: LoadContext, doc: Document, index: int, raw: Mapping[str, Any]) -> Wave:
    names: list[str] = []
    labels: list[Mapping[str, str]] = []
    for j, selector in enumerate(raw["clusters"]):
        if isinstance(selector, str):
            names.append(selector)
            continue
        line = doc.line_of(["waves", index, "clusters", j, "matchLabels"])
        for key, value in selector["matchLabels"].items():
            if not _LABEL_KEY.fullmatch(str(key)) or len(str(key).rsplit("/", 1)[-1]) > 63:
                ctx.error(WAVES_FILE, line, f'matchLabels: "{key}" is not a valid label key')
            if not _LABEL_VALUE.fullmatch(value) or len(value) > 63:
                ctx.error(
                    WAVES_FILE, line, f'matchLabels: "{value}" is not a valid label value ({key})'
                )
        labels.append(dict(selector["matchLabels"]))
    soak_text = str(raw.get("soak", ""))
    soak = 0.0
    if soak_text:
        try:
            soak = parse_duration(soak_text)
        except DurationError as e:  # the schema's pattern refuses it first; kept as a guard
            ctx.error(WAVES_FILE, doc.line_of(["waves", index, "soak"]), f"soak: {e}")
    analysis = None
    if "analysis" in raw:
        where: list[str | int] = ["waves", index, "analysis"]
        analysis = read_prometheus(
            ctx, WAVES_FILE, doc, raw["analysis"], at=where, check=check_wave_query
        )
        if index == 0:
            ctx.error(
                WAVES_FILE,
                doc.line_of(where),
                f'wave "{raw["name"]}" is the first: its analysis has no earlier wave to measure',
            )
    return Wave(
        name=raw["name"],
        names=tuple(names),
        match_labels=tuple(labels),
        soak=soak,
        soak_text=soak_text,
        approval=raw.get("approval") == "required",
        max_failures=int(raw.get("maxFailures", 0)),
        line=doc.line_of(["waves", index]),
        analysis=analysis,
    )


def _check_wave_names(ctx: LoadContext, doc: Document, waves: tuple[Wave, ...]) -> None:
    seen: dict[str, int | None] = {}
    for index, wave in enumerate(waves):
        if wave.name in seen:
            ctx.error(
                WAVES_FILE,
                doc.line_of(["waves", index, "name"]),
                f'wave "{wave.name}" is defined twice (first at line {seen[wave.name]})',
            )
        seen.setdefault(wave.name, wave.line)


def _members(
    ctx: LoadContext, doc: Document, waves: tuple[Wave, ...], catalog: Catalog
) -> dict[str, int]:
    """Each catalog cluster's wave: the one naming it exactly, else the first matching it.

    A cluster named exactly in one wave and matched by any selector of another is in two
    waves: an error, since either reading would surprise someone. Globs and labels may
    overlap among themselves: the first wave takes the cluster (``"*"`` in the last wave
    means every cluster not in an earlier one).
    """
    clusters = sorted(catalog.clusters)
    exact: dict[str, tuple[int, int]] = {}  # cluster -> (wave, line)
    for index, wave in enumerate(waves):
        for j, selector in enumerate(doc.data["waves"][index]["clusters"]):
            if not isinstance(selector, str):
                continue
            line = doc.line_of(["waves", index, "clusters", j])
            if _GLOB.search(selector):
                if not fnmatch.filter(clusters, selector):
                    ctx.warning(WAVES_FILE, line, f'"{selector}" matches no cluster of the catalog')
                continue
            if selector not in catalog.clusters:
                known = ", ".join(clusters) or "none"
                ctx.error(
                    WAVES_FILE,
                    line,
                    f'unknown cluster "{selector}" in wave "{wave.name}" (clusters: {known})',
                )
                continue
            if selector in exact:
                other, other_line = exact[selector]
                ctx.error(
                    WAVES_FILE,
                    line,
                    f'cluster "{selector}" is in two waves: "{waves[other].name}" '
                    f'(line {other_line}) and "{wave.name}"',
                )
                continue
            exact[selector] = (index, line)
        for selector in wave.match_labels:
            if not any(_labels_match(catalog, c, selector) for c in clusters):
                ctx.warning(WAVES_FILE, wave.line, f"matchLabels {dict(selector)} match no cluster")
    members: dict[str, int] = {}
    for cluster in clusters:
        matched = [i for i, wave in enumerate(waves) if _matches(catalog, cluster, wave)]
        if cluster in exact:
            index, line = exact[cluster]
            others = [i for i in matched if i != index and i < index]
            if others:
                ctx.error(
                    WAVES_FILE,
                    line,
                    f'cluster "{cluster}" is in two waves: "{waves[others[0]].name}" (by a '
                    f'pattern or labels) and "{waves[index].name}"',
                )
            members[cluster] = index
        elif matched:
            members[cluster] = matched[0]
        elif waves:
            ctx.warning(
                WAVES_FILE,
                None,
                f'cluster "{cluster}" is in no wave: it starts a new version after every wave',
            )
    return members


def _matches(catalog: Catalog, cluster: str, wave: Wave) -> bool:
    if any(fnmatch.fnmatchcase(cluster, name) for name in wave.names):
        return True
    return any(_labels_match(catalog, cluster, selector) for selector in wave.match_labels)


def _labels_match(catalog: Catalog, cluster: str, selector: Mapping[str, str]) -> bool:
    labels = catalog.clusters[cluster].cluster.labels
    return all(labels.get(key) == value for key, value in selector.items())


def _approvals(
    ctx: LoadContext, doc: Document, waves: tuple[Wave, ...], catalog: Catalog
) -> list[Approval]:
    by_name = {wave.name: wave for wave in waves}
    out = []
    for index, raw in enumerate(doc.data.get("approvals") or ()):
        line = doc.line_of(["approvals", index])
        approval = Approval(str(raw["app"]), str(raw["version"]), str(raw["wave"]), line)
        wave = by_name.get(approval.wave)
        if wave is None:
            known = ", ".join(by_name)
            ctx.error(WAVES_FILE, line, f'approval names unknown wave "{approval.wave}" ({known})')
            continue
        if not wave.approval:
            ctx.warning(
                WAVES_FILE,
                line,
                f'wave "{wave.name}" needs no approval; this approval changes nothing',
            )
        app = catalog.apps.get(approval.app)
        if app is None:
            ctx.warning(WAVES_FILE, line, f'approval for app "{approval.app}", not in the catalog')
        elif approval.version not in app.versions:
            ctx.warning(
                WAVES_FILE,
                line,
                f"approval for {approval.app} {approval.version}, not a version of the app",
            )
        out.append(approval)
    return out
