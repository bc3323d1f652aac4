"""Colours and the one inline stylesheet of the status page.

The page must work offline and from ``file://`` (a CI artifact, a laptop), so the
CSS is inlined in every page: no CDN, no web font, no script. Colour carries the
meaning people scan for: a cell's fill is its phase, its left edge its channel.
Phases use GitHub's Primer hues, which stay legible for the common colour-vision
deficiencies when paired with the phase word that every cell also prints.
"""

from __future__ import annotations

import hashlib

from reconciler.model.status import Phase

UNKNOWN = "Unknown"  # a status file that could not be read

# phase -> (strong colour: badges and borders, light fill: matrix cells)
PHASE_COLOURS: dict[str, tuple[str, str]] = {
    Phase.READY.value: ("#1a7f37", "#dafbe1"),
    Phase.PROGRESSING.value: ("#0969da", "#ddf4ff"),
    Phase.STALLED.value: ("#9a6700", "#fff8c5"),
    Phase.FAILED.value: ("#cf222e", "#ffebe9"),
    Phase.SUSPENDED.value: ("#6e7781", "#eaeef2"),
    Phase.REMOVED.value: ("#8c959f", "#f6f8fa"),
    UNKNOWN: ("#8250df", "#fbefff"),
}

# a halted wave of the pipeline: a red of its own, never mistaken for a Failed card's fill
HALT_COLOURS = ("#a40e26", "#ffcecb")

# channel colours: distinct from the phase hues, so an edge never reads as a phase
CHANNEL_PALETTE = (
    "#1b7c83",  # teal
    "#bc4c00",  # orange
    "#bf3989",  # pink
    "#4d2d00",  # brown
    "#0550ae",  # navy
    "#6639ba",  # violet
    "#116329",  # forest
    "#57606a",  # slate
)
_WELL_KNOWN = {"stable": 0, "beta": 1, "alpha": 2, "edge": 3, "lts": 4, "canary": 5, "nightly": 6}


def phase_class(phase: str) -> str:
    """``phase-ready``: the CSS class of a phase (unknown words fall back to Unknown)."""
    return f"phase-{(phase if phase in PHASE_COLOURS else UNKNOWN).lower()}"


def channel_index(channel: str) -> int:
    """The palette slot of a channel: fixed for common names, else a stable hash."""
    if channel in _WELL_KNOWN:
        return _WELL_KNOWN[channel]
    return hashlib.sha256(channel.encode("utf-8")).digest()[0] % len(CHANNEL_PALETTE)


def _phase_rules() -> str:
    rules = []
    for phase, (strong, light) in PHASE_COLOURS.items():
        cls = phase_class(phase)
        rules.append(f".{cls}{{--strong:{strong};--light:{light}}}")
    return "\n".join(rules)


def _channel_rules() -> str:
    return "\n".join(f".chan-{i}{{--chan:{c}}}" for i, c in enumerate(CHANNEL_PALETTE))


_BASE = """
:root{color-scheme:light;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--panel:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
header.top{padding:16px 24px;border-bottom:1px solid var(--line);background:var(--panel)}
header.top h1{margin:0 0 4px;font-size:20px}
main{padding:16px 24px;max-width:1400px}
a{color:#0969da;text-decoration:none}
a:hover{text-decoration:underline}
.muted{color:var(--muted)}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
h2{font-size:16px;margin:24px 0 8px}
.summary{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;
color:#fff;background:var(--strong,#57606a);white-space:nowrap}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;font-size:12px}
.swatch{display:inline-block;width:12px;height:12px;border-radius:3px;vertical-align:-2px;
background:var(--light);border:2px solid var(--strong)}
.chanswatch{display:inline-block;width:4px;height:14px;vertical-align:-3px;background:var(--chan)}
table{border-collapse:collapse}
table.matrix{min-width:50%}
table.matrix th,table.matrix td{border:1px solid var(--line);padding:6px;vertical-align:top}
table.matrix thead th{background:var(--panel);text-align:left}
table.matrix th.app{text-align:left;background:var(--panel);white-space:nowrap}
.cell{display:flex;flex-direction:column;gap:4px}
a.inst{display:grid;grid-template-columns:auto 1fr;gap:0 8px;padding:4px 8px 4px 10px;
border-radius:4px;background:var(--light);border:1px solid var(--strong);
border-left:5px solid var(--chan,var(--strong));color:var(--fg);min-width:150px}
a.inst:hover{text-decoration:none;filter:brightness(0.97)}
a.inst .ver{font-weight:700;font-size:15px}
a.inst .phase{justify-self:end;font-size:11px;font-weight:600;color:var(--strong)}
a.inst .name{color:var(--muted);font-size:12px}
a.inst .chan{justify-self:end;font-size:11px;color:var(--chan,var(--muted))}
a.inst .desired{grid-column:1/3;font-size:11px;color:var(--strong)}
.empty{color:var(--muted);text-align:center}
table.grid th,table.grid td{border-bottom:1px solid var(--line);padding:4px 10px 4px 0;
text-align:left;vertical-align:top}
table.grid th{font-size:12px;color:var(--muted);font-weight:600}
#attention{margin-bottom:14px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0}
.message{white-space:pre-wrap;background:var(--panel);border-left:3px solid var(--strong,#57606a);
padding:6px 10px;margin:8px 0}
ol.timeline{list-style:none;display:flex;flex-wrap:wrap;align-items:stretch;gap:0;padding:0;
margin:8px 0}
ol.timeline li{position:relative;padding:6px 18px 6px 12px;margin-right:14px;
background:var(--light);border:1px solid var(--strong);border-radius:4px;min-width:110px}
ol.timeline li:not(:last-child)::after{content:"\\2192";position:absolute;right:-13px;top:35%;
color:var(--muted)}
ol.timeline .ver{font-weight:700;display:block}
ol.timeline .when{font-size:11px;color:var(--muted);display:block}
ol.batches{list-style:none;display:flex;gap:4px;padding:0;margin:6px 0}
ol.batches li{padding:4px 8px;border-radius:4px;font-size:12px;border:1px solid var(--line);
background:var(--panel)}
ol.batches li.done{background:#dafbe1;border-color:#1a7f37}
ol.batches li.in-flight{background:#ddf4ff;border-color:#0969da}
ol.batches li.waiting,ol.batches li.paused{background:#fff8c5;border-color:#9a6700}
ol.batches li.failed,ol.batches li.rolled-back,ol.batches li.abandoned{background:#ffebe9;
border-color:#cf222e}
.rollout{border:1px solid var(--line);border-radius:6px;padding:8px 12px;margin:8px 0}
footer{padding:16px 24px;color:var(--muted);font-size:12px}
@media (prefers-color-scheme:dark){
:root{color-scheme:dark;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--bg:#0d1117;--panel:#151b23}
a{color:#4493f8}
a.inst,ol.timeline li{background:color-mix(in srgb,var(--light) 14%,var(--bg))}
ol.batches li{background:var(--panel)}
}
"""


_PIPELINE = """
#pipelines h3{font-size:14px;margin:12px 0 6px}
#pipelines h3 .ver{font-weight:700}
ol.waves{list-style:none;display:flex;align-items:stretch;gap:14px;padding:0;margin:0 0 8px;
overflow-x:auto}
li.wave{position:relative;flex:0 0 230px;border:1px solid var(--line);border-radius:6px;
padding:8px;background:var(--panel);display:flex;flex-direction:column;gap:6px}
li.wave:not(:last-child)::after{content:"\\2192";position:absolute;right:-12px;top:12px;
color:var(--muted)}
li.wave .wave-head{display:flex;justify-content:space-between;align-items:center}
li.wave .rules{font-size:11px;color:var(--muted)}
li.wave .gate{font-size:12px}
li.gate-open{--strong:#1a7f37}
li.gate-waiting{--strong:#0969da}
.card{display:grid;grid-template-columns:auto 1fr;gap:0 8px;padding:4px 8px;border-radius:4px;
background:var(--light,var(--bg));border:1px solid var(--strong,var(--line));color:var(--fg)}
a.card:hover{text-decoration:none;filter:brightness(0.97)}
.card .ver{font-weight:700}
.card .phase{justify-self:end;font-size:11px;font-weight:600;color:var(--strong,var(--muted))}
.card .name,.card .when{grid-column:1/3;font-size:12px;color:var(--muted)}
.card .soak{grid-column:1/3;font-size:11px;color:var(--muted)}
.card progress{width:90px;height:8px;vertical-align:middle}
"""


def _halt_rules() -> str:
    strong, light = HALT_COLOURS
    return (
        f"li.gate-halted{{--strong:{strong};border:2px solid {strong};background:{light}}}\n"
        f"li.gate-halted .gate{{color:{strong};font-weight:600}}\n"
        f".badge.halt{{background:{strong}}}"
    )


def stylesheet() -> str:
    """The CSS every page inlines (the index's wave pipelines included: one sheet)."""
    return (
        f"{_BASE.strip()}\n{_PIPELINE.strip()}\n{_halt_rules()}\n{_phase_rules()}\n"
        f"{_channel_rules()}\n"
    )


__all__ = [
    "CHANNEL_PALETTE",
    "HALT_COLOURS",
    "PHASE_COLOURS",
    "UNKNOWN",
    "channel_index",
    "phase_class",
    "stylesheet",
]
