"""``reconciler preview`` says when a change loosens a rollout gate (SPEC section 4).

Such a change renders no different object, so only these warnings show it: a
removed or later partition, fewer batches, or an approval for a version other
than the one that would roll.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import BASE_FILES
from tests.preview.test_preview import as_json, commit, edit, repo

WEB = "clusters/prod/instances/web.yaml"
# the baseline's web (channel stable, 5 replicas), gated after batch 1 of 3
GATED = {
    WEB: BASE_FILES[WEB].rstrip(" ") + "        rollout:\n          batches: [1, 50%, 50%]\n"
    "          partition: 1\n"
}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "  partition: 1\n",
            "",
            ["prod/web: the change removes the rollout gate (partition 1): every later release"],
        ),
        (
            "  partition: 1\n",
            "  partition: null\n",
            ["prod/web: the change removes the rollout gate (partition 1)"],
        ),
        (
            "  partition: 1\n",
            "  partition: 2\n",
            ["prod/web: the change moves the rollout gate from after batch 1 to after batch 2"],
        ),
        (
            "[1, 50%, 50%]",
            "[1, 100%]",
            ["prod/web: the change lowers rollout.batches from 3 to 2"],
        ),
        (
            "[1, 50%, 50%]",
            "[100%]",
            [
                "prod/web: the change removes the rollout gate (partition 1)",
                "prod/web: the change lowers rollout.batches from 3 to 1",
            ],
        ),
        (
            "  partition: 1\n",
            "  partition: 1\n  promoted: {to: 6.6.0, through: 3}\n",
            [
                "prod/web: the change approves 6.6.0 (rollout.promoted), but the instance rolls "
                "to 6.5.0: the approval is inert"
            ],
        ),
    ],
)
def test_a_change_that_loosens_a_gate_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, expected: list[str]
) -> None:
    root = repo(tmp_path, GATED)
    edit(root, WEB, old, new)
    commit(root, "web: rollout edited")
    code, data = as_json(capsys, root)
    assert code == 0
    gates = [w for w in data["warnings"] if w.startswith("prod/web:")]
    assert len(gates) == len(expected), gates
    for line, start in zip(gates, expected, strict=True):
        assert line.startswith(start), line


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("  partition: 1\n", "  partition: 1\n  promoted: {to: 6.5.0, through: 2}\n"),
        ("  partition: 1\n", "  partition: 0\n"),  # a gate moved earlier guards more
        ("[1, 50%, 50%]", "[1, 25%, 50%, 25%]"),
        ("parameters: {replicas: 5}", "parameters: {replicas: 4}"),
    ],
)
def test_a_change_that_keeps_or_tightens_the_gate_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str
) -> None:
    root = repo(tmp_path, GATED)
    edit(root, WEB, old, new)
    commit(root, "web: rollout edited")
    code, data = as_json(capsys, root)
    assert code == 0 and data["warnings"] == []


def test_an_approval_of_the_version_a_channel_move_rolls_to_says_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, GATED)
    edit(root, "apps/podinfo/channels.yaml", "stable: 6.5.0", "stable: 6.6.0")
    edit(root, WEB, "  partition: 1\n", "  partition: 1\n  promoted: {to: 6.6.0, through: 2}\n")
    commit(root, "release 6.6.0, approved through batch 2")
    code, data = as_json(capsys, root)
    assert code == 0 and data["warnings"] == []


def test_a_renamed_instance_file_warns_that_nothing_would_be_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    (root / WEB).rename(root / (WEB + ".bak"))
    commit(root, "web: oops")
    code, data = as_json(capsys, root)
    assert code == 1  # the head has a new error: the unexpected file
    assert data["warnings"] == [
        "prod: the head has validation errors in clusters/prod/ "
        "(clusters/prod/instances/web.yaml.bak): the reconciler removes none of the 1 "
        "instance(s) shown as removed (CatalogInvalid) until they are fixed"
    ]


LIMITS = "clusters/prod/cluster.yaml"
OPEN = 'allowedNamespaces: [web, "team-*"]\n        allowClusterScoped: false\n'


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (None, ["prod: the change removes clusters/prod/cluster.yaml: limits are never dropped"]),
        ("", ["prod: the change allows every namespace", "prod: the change allows cluster-"]),
        (
            'allowedNamespaces: [web, "team-*", kube-system]\n        allowClusterScoped: false\n',
            ["prod: the change allows more namespaces: kube-system"],
        ),
        (
            OPEN + '        prune: {maxRemovedInstances: "100%"}\n',
            ["prod: the change raises prune.maxRemovedInstances from 50% to 100%"],
        ),
        (OPEN + "        prune: {maxRemovedInstances: 2}\n", ["prod: the change moves prune."]),
        (OPEN + '        prune: {maxRemovedInstances: "10%"}\n', []),
        ('allowedNamespaces: ["team-*", web]\n        allowClusterScoped: false\n', []),
    ],
)
def test_a_change_that_widens_a_clusters_limits_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], new: str | None, expected: list[str]
) -> None:
    root = repo(tmp_path)
    if new is None:
        (root / LIMITS).unlink()
    else:
        edit(root, LIMITS, OPEN.replace("        ", ""), new.replace("        ", ""))
    commit(root, "limits edited")
    code, data = as_json(capsys, root)
    assert code == 0
    assert len(data["warnings"]) == len(expected), data["warnings"]
    for line, start in zip(data["warnings"], expected, strict=True):
        assert line.startswith(start), line


def test_a_renamed_cluster_yaml_is_an_error_and_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path)
    (root / LIMITS).rename(root / "clusters/prod/cluster.yml")
    commit(root, "limits renamed")
    code, data = as_json(capsys, root)
    assert code == 1  # cluster.yaml missing while cluster.yml is there: an error
    assert any("cluster.yaml is missing, but" in p["message"] for p in data["problems"]["new"])
    assert data["warnings"] == [
        "prod: the change leaves clusters/prod/cluster.yaml unreadable (renamed, or invalid): "
        "the reconciler applies nothing to this cluster (CatalogInvalid) until it is fixed"
    ]


@pytest.mark.parametrize(("before", "after"), [(None, "perNamespace"), ("perNamespace", None)])
def test_a_change_of_inventory_layout_says_every_inventory_moves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], before: str | None, after: str | None
) -> None:
    root = repo(tmp_path)
    limits = OPEN.replace("        ", "")
    if before is not None:
        edit(root, LIMITS, limits, limits + f"inventory: {before}\n")
        commit(root, "inventory: " + before)
    edit(
        root,
        LIMITS,
        limits + (f"inventory: {before}\n" if before else ""),
        limits + (f"inventory: {after}\n" if after else ""),
    )
    commit(root, "inventory moved")
    code, data = as_json(capsys, root)  # from HEAD~1
    assert code == 0
    new = after or "perInstance"
    old = before or "perInstance"
    assert data["warnings"] == [
        f"prod: the change moves the inventories of its 2 instance(s) at the next pass "
        f"(inventory: {old} -> {new}) into "
        + (
            "one ConfigMap per namespace, reconciler-inventory-prod.shared; their own "
            "ConfigMaps reconciler-inventory-<instance> are deleted"
            if new == "perNamespace"
            else "a ConfigMap each, reconciler-inventory-<instance>; the shared ones "
            "reconciler-inventory-prod.shared are deleted"
        )
        + ". No object of theirs is applied or removed"
    ]
