"""The layering rules of ARCHITECTURE.md, enforced by reading every module's imports.

cli -> commands -> preview -> daemon -> stages -> model. Only ``source/`` imports ``git``,
only ``kube/`` imports ``kubernetes``, only ``registry/`` speaks HTTP to image registries
(the Distribution API paths appear nowhere else, and ``urllib3`` is imported only there and
by ``kube/``, for the Kubernetes client's transport) (the sandbox's ``fieldschema.py`` reads the
client's generated models as schema data, nothing else); ``model/`` imports nothing of ours but
itself, and ``localserver.py`` (the start/wait/stop of a local server program, shared by
``analysis/`` and ``registry/``) nothing of ours at all; stages never import the layers above them, nor each other's internals
(``reconciler.resolve`` is fine, ``reconciler.resolve.ranges`` from another stage is not).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reconciler"
STAGES = {
    "analysis",
    "catalog",
    "resolve",
    "render",
    "source",
    "kube",
    "rollout",
    "migrations",
    "status",
    "sandbox",
    "registry",
    "waves",
}
UPPER = {"daemon", "preview", "commands", "cli"}
LEAVES = {"localserver"}  # modules any stage may use: they import nothing of ours


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def _top(name: str) -> str:
    return name.split(".")[0]


def _schema_data(path: Path, name: str) -> bool:
    """The sandbox reads the client's generated models as its schema (which fields each
    kind declares); it never talks to a cluster through the client."""
    rel = path.relative_to(PACKAGE).as_posix()
    return rel == "sandbox/fieldschema.py" and name == "kubernetes.client.models"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_respects_layers(path: Path) -> None:
    layer = layer_of(path)
    names = imports_of(path)
    problems = []
    for name in names:
        if _top(name) == "git" and layer != "source":
            problems.append(f"imports {name}: only reconciler/source/ may import git")
        if _top(name) == "urllib3" and layer not in ("registry", "kube", "analysis"):
            problems.append(
                f"imports {name}: only reconciler/registry/ speaks HTTP to image registries"
            )
        if _top(name) == "kubernetes" and layer != "kube" and not _schema_data(path, name):
            problems.append(f"imports {name}: only reconciler/kube/ may import kubernetes")
        if not name.startswith("reconciler."):
            continue
        parts = name.split(".")
        target = parts[1]
        if layer in LEAVES:
            problems.append(f"imports {name}: {layer}.py is a leaf any stage uses")
        if layer == "model" and target != "model":
            problems.append(f"imports {name}: model/ is pure data and imports no stage")
        if layer in STAGES and target in UPPER:
            problems.append(f"imports {name}: a stage must not import the {target} layer")
        if layer == "daemon" and target in {"preview", "commands", "cli"}:
            problems.append(f"imports {name}: the daemon must not import {target}")
        if layer in STAGES and target in STAGES and target != layer and len(parts) > 2:
            problems.append(
                f"imports {name}: use the public API reconciler.{target}, not its internals"
            )
    if layer != "registry":
        text = path.read_text()
        for api in ("/tags/list", "/manifests/", "/blobs/uploads"):
            if api in text:
                problems.append(f"mentions {api}: only reconciler/registry/ does registry HTTP")
    assert not problems, f"{path.relative_to(PACKAGE)}: " + "; ".join(sorted(set(problems)))
