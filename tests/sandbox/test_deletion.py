"""DELETE answers, propagation policies, foreground deletion and namespace termination.

https://kubernetes.io/docs/concepts/architecture/garbage-collection/ (foreground,
background and orphan cascading deletion, ``blockOwnerDeletion``),
https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/ and
https://kubernetes.io/docs/tasks/administer-cluster/namespaces/ (Terminating namespaces);
the answers' shapes are kube-apiserver's (a Status for most kinds, the object for the
kinds whose storage returns it, 200 while finalizers hold the object).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from reconciler.kube import KubeClient
from reconciler.model.changeset import ObjectRef
from reconciler.sandbox.testing import SandboxHandle
from tests.sandbox.helpers import eventually, http

NS = "/api/v1/namespaces/default"
CMS = f"{NS}/configmaps"


def cm(sandbox: SandboxHandle, name: str, *owners: dict[str, Any], **meta: Any) -> dict[str, Any]:
    refs = [
        {
            "apiVersion": o.get("apiVersion", "v1"),
            "kind": o.get("kind", "ConfigMap"),
            "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"],
            **({"blockOwnerDeletion": True} if o.get("block") else {}),
        }
        for o in owners
    ]
    body: dict[str, Any] = {"metadata": {"name": name, **meta}}
    if refs:
        body["metadata"]["ownerReferences"] = refs
    status, created = http(sandbox, "POST", CMS, body)
    assert status == 201, created
    return dict(created)


def blocking(owner: dict[str, Any]) -> dict[str, Any]:
    return {**owner, "block": True}


def exists(sandbox: SandboxHandle, path: str) -> bool:
    return http(sandbox, "GET", path)[0] == 200


def test_delete_answers_a_status_for_most_kinds(sandbox: SandboxHandle) -> None:
    """The generic registry answers a Status naming the removed object (no code field)
    (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/)."""
    created = cm(sandbox, "a")
    status, body = http(sandbox, "DELETE", f"{CMS}/a")
    assert status == 200
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "a", "kind": "configmaps", "uid": created["metadata"]["uid"]},
    }
    deploy = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    http(sandbox, "POST", "/apis/apps/v1/namespaces/default/deployments", deploy)
    _, body = http(sandbox, "DELETE", "/apis/apps/v1/namespaces/default/deployments/d")
    assert body["details"]["group"] == "apps" and body["details"]["kind"] == "deployments"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            f"{NS}/pods",
            {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        ),
        (f"{NS}/services", {"metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}]}}),
        (f"{NS}/serviceaccounts", {"metadata": {"name": "x"}}),
        (
            f"{NS}/persistentvolumeclaims",
            {
                "metadata": {"name": "x"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        ),
    ],
)
def test_some_kinds_answer_with_the_deleted_object(
    sandbox: SandboxHandle, path: str, body: dict[str, Any]
) -> None:
    """Pods, Services, ServiceAccounts and PVCs are answered with the object itself
    (their registries return the deleted object, https://kubernetes.io/docs/reference/using-api/api-concepts/)."""
    assert http(sandbox, "POST", path, body)[0] == 201
    status, answer = http(sandbox, "DELETE", f"{path}/x")
    assert status == 200 and answer["metadata"]["name"] == "x"
    assert answer["kind"] != "Status" and not exists(sandbox, f"{path}/x")


def test_finalizers_keep_the_object_marked(sandbox: SandboxHandle) -> None:
    """A delete of an object with finalizers sets deletionTimestamp (and bumps generation)
    and answers the object with 200; orphanDependents=false gets 202
    (https://kubernetes.io/docs/concepts/overview/working-with-objects/finalizers/)."""
    cm(sandbox, "a", finalizers=["example.com/hold"])
    generation = http(sandbox, "GET", f"{CMS}/a")[1]["metadata"].get("generation")
    status, body = http(sandbox, "DELETE", f"{CMS}/a")
    meta = body["metadata"]
    assert status == 200 and body["kind"] == "ConfigMap" and meta["deletionTimestamp"]
    # a ConfigMap has no generation to bump (only kinds with one get it raised)
    assert meta["deletionGracePeriodSeconds"] == 0 and meta.get("generation") == (
        generation + 1 if generation else None
    )
    again = http(sandbox, "DELETE", f"{CMS}/a")
    assert again == (200, body)  # nothing changes, nothing is written
    cm(sandbox, "b", finalizers=["example.com/hold"])
    status, _ = http(sandbox, "DELETE", f"{CMS}/b", {"orphanDependents": False})
    assert status == 202


def test_dry_run_deletes_nothing(sandbox: SandboxHandle) -> None:
    """dryRun=All answers as a real delete would and changes nothing
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run)."""
    cm(sandbox, "a")
    cm(sandbox, "held", finalizers=["example.com/hold"])
    status, body = http(sandbox, "DELETE", f"{CMS}/a?dryRun=All")
    assert status == 200 and body["status"] == "Success" and exists(sandbox, f"{CMS}/a")
    _, marked = http(sandbox, "DELETE", f"{CMS}/held", {"dryRun": ["All"]})
    assert marked["metadata"]["deletionTimestamp"]
    assert "deletionTimestamp" not in http(sandbox, "GET", f"{CMS}/held")[1]["metadata"]


def test_foreground_waits_for_blocking_dependents(sandbox: SandboxHandle) -> None:
    """Foreground: the owner stays with deletionTimestamp and the foregroundDeletion
    finalizer until dependents with blockOwnerDeletion are gone
    (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion)."""
    owner = cm(sandbox, "owner")
    cm(sandbox, "held", blocking(owner), finalizers=["example.com/hold"])
    cm(sandbox, "loose", owner, finalizers=["example.com/hold"])
    cm(sandbox, "plain", blocking(owner))
    status, body = http(sandbox, "DELETE", f"{CMS}/owner", {"propagationPolicy": "Foreground"})
    assert status == 200 and body["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert body["metadata"]["deletionTimestamp"]
    assert not exists(sandbox, f"{CMS}/plain")
    for name in ("held", "loose"):
        assert http(sandbox, "GET", f"{CMS}/{name}")[1]["metadata"]["deletionTimestamp"]
    assert exists(sandbox, f"{CMS}/owner")
    http(
        sandbox,
        "PATCH",
        f"{CMS}/loose",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    assert exists(sandbox, f"{CMS}/owner")  # loose never blocked it, held still does
    http(
        sandbox,
        "PATCH",
        f"{CMS}/held",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    assert not exists(sandbox, f"{CMS}/owner") and not exists(sandbox, f"{CMS}/held")


def test_foreground_cascades_and_spares_shared_dependents(sandbox: SandboxHandle) -> None:
    """Dependents are deleted in the foreground too; one another live owner holds only
    loses the reference (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents)."""
    owner, other = cm(sandbox, "owner"), cm(sandbox, "other")
    child = cm(sandbox, "child", blocking(owner))
    cm(sandbox, "grandchild", blocking(child), finalizers=["example.com/hold"])
    cm(sandbox, "shared", blocking(owner), other)
    http(sandbox, "DELETE", f"{CMS}/owner", {"propagationPolicy": "Foreground"})
    child_now = http(sandbox, "GET", f"{CMS}/child")[1]
    assert child_now["metadata"]["finalizers"] == ["foregroundDeletion"]
    shared = http(sandbox, "GET", f"{CMS}/shared")[1]
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other"]
    http(
        sandbox,
        "PATCH",
        f"{CMS}/grandchild",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    assert [exists(sandbox, f"{CMS}/{n}") for n in ("owner", "child", "grandchild", "shared")] == [
        False, False, False, True
    ]  # fmt: skip


def test_foreground_without_dependents_still_answers_the_marked_object(
    sandbox: SandboxHandle,
) -> None:
    """The API server adds the finalizer before the GC sees there is nothing to wait for
    (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion)."""
    cm(sandbox, "alone")
    status, body = http(sandbox, "DELETE", f"{CMS}/alone?propagationPolicy=Foreground")
    assert status == 200 and body["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert not exists(sandbox, f"{CMS}/alone")


def test_orphan_answers_the_marked_owner(sandbox: SandboxHandle) -> None:
    """Orphan: the owner gets the orphan finalizer, the GC strips the references, then the
    owner goes (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#orphaned-dependents)."""
    owner = cm(sandbox, "owner")
    cm(sandbox, "child", owner)
    status, body = http(sandbox, "DELETE", f"{CMS}/owner", {"propagationPolicy": "Orphan"})
    assert status == 200 and body["metadata"]["finalizers"] == ["orphan"]
    assert not exists(sandbox, f"{CMS}/owner")
    assert "ownerReferences" not in http(sandbox, "GET", f"{CMS}/child")[1]["metadata"]


def test_a_job_orphans_its_dependents_by_default(sandbox: SandboxHandle) -> None:
    """batch/v1 Jobs keep the orphan default for compatibility; kubectl and the engine send
    Background (https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-termination-and-cleanup)."""
    job = {
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
            }
        },
    }
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    for name in ("j", "k"):
        _, created = http(sandbox, "POST", jobs, {**job, "metadata": {"name": name}})
        cm(sandbox, f"of-{name}", {**created, "apiVersion": "batch/v1", "kind": "Job"})
    _, body = http(sandbox, "DELETE", f"{jobs}/j")
    assert body["metadata"]["finalizers"] == ["orphan"] and not exists(sandbox, f"{jobs}/j")
    assert exists(sandbox, f"{CMS}/of-j")
    _, body = http(sandbox, "DELETE", f"{jobs}/k", {"propagationPolicy": "Background"})
    assert body["status"] == "Success" and not exists(sandbox, f"{CMS}/of-k")


@pytest.mark.parametrize(
    ("body", "query", "code", "message"),
    [
        (
            {"propagationPolicy": "Orphan", "orphanDependents": True},
            "",
            422,
            'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": '
            "orphanDependents and deletionPropagation cannot be both set",
        ),
        (
            {"propagationPolicy": "Later"},
            "",
            422,
            'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
            '"Later": supported values: "Foreground", "Background", "Orphan", "nil"',
        ),
        (
            {"dryRun": ["Some"]},
            "",
            422,
            'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: '
            'supported values: "All"',
        ),
        (
            None,
            "?orphanDependents=maybe",
            400,
            'strconv.ParseBool: parsing "maybe": invalid syntax',
        ),
        ({"propagationPolicy": 3}, "", 400, "DeleteOptions.propagationPolicy must be a string"),
        ([1], "", 400, "DeleteOptions must be an object"),
    ],
)
def test_bad_delete_options(
    sandbox: SandboxHandle, body: Any, query: str, code: int, message: str
) -> None:
    """DeleteOptions are validated before anything is deleted
    (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/)."""
    cm(sandbox, "a")
    status, answer = http(sandbox, "DELETE", f"{CMS}/a{query}", body)
    assert (status, answer["message"]) == (code, message)
    assert exists(sandbox, f"{CMS}/a")


def test_a_body_makes_query_options_ignored(sandbox: SandboxHandle) -> None:
    """The API server reads DeleteOptions from the body when there is one, else from the
    query (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/)."""
    owner = cm(sandbox, "owner")
    cm(sandbox, "child", owner)
    http(sandbox, "DELETE", f"{CMS}/owner?propagationPolicy=Orphan", {"kind": "DeleteOptions"})
    assert not exists(sandbox, f"{CMS}/child")  # background, from the (empty) body


def test_precondition_messages(sandbox: SandboxHandle) -> None:
    """A precondition that does not hold is 409 Conflict
    (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/)."""
    cm(sandbox, "a")
    status, body = http(sandbox, "DELETE", f"{CMS}/a", {"preconditions": {"uid": "nope"}})
    assert status == 409 and body["message"].startswith(
        'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition (nope) '
        "does not match the UID in record ("
    )
    assert body["details"] == {"name": "a", "kind": "ConfigMap"}


def test_delete_collection_answers_the_list_before(sandbox: SandboxHandle) -> None:
    """deletecollection answers the list of what it deleted, as listed
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#api-verbs)."""
    cm(sandbox, "a", labels={"x": "1"})
    cm(sandbox, "b", labels={"x": "1"}, finalizers=["example.com/hold"])
    cm(sandbox, "c")
    status, body = http(sandbox, "DELETE", f"{CMS}?labelSelector=x%3D1")
    assert status == 200 and body["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in body["items"]] == ["a", "b"]
    assert "deletionTimestamp" not in body["items"][1]["metadata"]
    assert not exists(sandbox, f"{CMS}/a") and exists(sandbox, f"{CMS}/c")


def _conditions(ns: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in ns["status"]["conditions"]}


def test_namespace_termination(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """A deleted namespace is Terminating, its content deleted; the controller's conditions
    say what is left; finalized, the namespace goes
    (https://kubernetes.io/docs/tasks/administer-cluster/namespaces/#deleting-a-namespace)."""
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map(
        "team", {"metadata": {"name": "held", "finalizers": ["example.com/x"]}}
    )
    core.create_namespaced_config_map("team", {"metadata": {"name": "plain"}})
    core.create_namespaced_secret(
        "team", {"metadata": {"name": "s", "finalizers": ["example.com/x"]}}
    )
    status, body = http(sandbox, "DELETE", "/api/v1/namespaces/team")
    assert status == 200 and body["kind"] == "Namespace"
    assert body["status"]["phase"] == "Terminating" and body["metadata"]["deletionTimestamp"]
    _, ns = http(sandbox, "GET", "/api/v1/namespaces/team")
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    assert _conditions(ns) == {
        "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
        "NamespaceDeletionGroupVersionParsingFailure": ("False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
        "NamespaceDeletionContentFailure": ("False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
        "NamespaceContentRemaining": ("True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances, secrets. has 1 resource instances"),
        "NamespaceFinalizersRemaining": ("True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: example.com/x in 2 resource instances"),
    }  # fmt: skip
    assert [c.metadata.name for c in core.list_namespaced_config_map("team").items] == ["held"]
    status, again = http(sandbox, "DELETE", "/api/v1/namespaces/team")
    assert (status, again["reason"]) == (409, "Conflict")
    assert again["message"] == (
        'Operation cannot be fulfilled on namespaces "team": The system is ensuring all '
        "content is removed from this namespace.  Upon completion, this namespace will "
        "automatically be purged by the system."
    )
    core.patch_namespace("team", {"metadata": {"labels": {"still": "here"}}})
    assert core.read_namespace("team").status.phase == "Terminating"
    core.patch_namespaced_config_map("held", "team", {"metadata": {"finalizers": None}})
    _, ns = http(sandbox, "GET", "/api/v1/namespaces/team")
    assert _conditions(ns)["NamespaceFinalizersRemaining"][2].endswith(
        "example.com/x in 1 resource instances"
    )
    assert _conditions(ns)["NamespaceContentRemaining"][2].endswith(
        ": secrets. has 1 resource instances"
    )
    core.patch_namespaced_secret("s", "team", {"metadata": {"finalizers": None}})
    assert not exists(sandbox, "/api/v1/namespaces/team")


def test_namespace_delete_preconditions(sandbox: SandboxHandle, core: client.CoreV1Api) -> None:
    """The namespace registry words its own precondition failures
    (https://kubernetes.io/docs/tasks/administer-cluster/namespaces/)."""
    core.create_namespace({"metadata": {"name": "team"}})
    status, body = http(
        sandbox, "DELETE", "/api/v1/namespaces/team", {"preconditions": {"uid": "u1"}}
    )
    assert status == 409 and body["message"].startswith(
        'Operation cannot be fulfilled on namespaces "team": Precondition failed: '
        "UID in precondition: u1, UID in object meta: "
    )
    status, body = http(sandbox, "DELETE", "/api/v1/namespaces/team?dryRun=All")
    assert status == 200 and body["status"]["phase"] == "Terminating"
    assert core.read_namespace("team").status.phase == "Active"


def test_engine_deletes_with_every_kind_of_answer(
    sandbox: SandboxHandle, core: client.CoreV1Api
) -> None:
    """The engine's KubeClient.delete (prune, uninstall) accepts a Status, the object, and
    the marked object of a finalizer-held delete
    (https://kubernetes.io/docs/concepts/architecture/garbage-collection/)."""
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "held", "finalizers": ["example.com/x"]}}
    )
    core.create_namespaced_service(
        "default", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}
    )
    with KubeClient.connect(sandbox.kubeconfig) as kube:
        for kind, name in (("ConfigMap", "a"), ("ConfigMap", "held"), ("Service", "svc")):
            live = kube.get(ObjectRef("v1", kind, "default", name))
            assert live is not None
            uid = live["metadata"]["uid"]
            assert kube.delete(ObjectRef("v1", kind, "default", name), uid=uid) is True
        assert kube.delete(ObjectRef("v1", "ConfigMap", "default", "a")) is False
        held = kube.get(ObjectRef("v1", "ConfigMap", "default", "held"))
    assert held is not None and held["metadata"]["deletionTimestamp"]


# Owners that are absent. https://kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents:
# an ownerReference whose owner does not exist makes the dependent garbage once every
# owner is verified absent; a namespaced owner counts only in the dependent's namespace.

GHOST = {"metadata": {"name": "never", "uid": "00000000-0000-0000-0000-00000000dead"}}


def test_a_dependent_whose_only_owner_never_existed_is_collected(sandbox: SandboxHandle) -> None:
    created = cm(sandbox, "orphaned", GHOST)
    assert created["metadata"]["ownerReferences"][0]["uid"] == GHOST["metadata"]["uid"]
    eventually(lambda: not exists(sandbox, f"{CMS}/orphaned"))


def test_a_dependent_with_one_live_owner_only_loses_the_absent_reference(
    sandbox: SandboxHandle,
) -> None:
    live = cm(sandbox, "live")
    cm(sandbox, "kept", GHOST, live)

    def refs() -> list[str]:
        return [
            r["name"] for r in http(sandbox, "GET", f"{CMS}/kept")[1]["metadata"]["ownerReferences"]
        ]

    eventually(lambda: refs() == ["live"])


def test_an_owner_in_another_namespace_counts_as_absent(sandbox: SandboxHandle) -> None:
    http(sandbox, "POST", "/api/v1/namespaces", {"metadata": {"name": "elsewhere"}})
    status, owner = http(
        sandbox, "POST", "/api/v1/namespaces/elsewhere/configmaps", {"metadata": {"name": "o"}}
    )
    assert status == 201
    cm(sandbox, "crossed", owner)
    eventually(lambda: not exists(sandbox, f"{CMS}/crossed"))
    assert exists(sandbox, "/api/v1/namespaces/elsewhere/configmaps/o")


def test_a_cluster_scoped_dependent_of_a_namespaced_owner_is_not_collected(
    sandbox: SandboxHandle,
) -> None:
    """Its reference is unresolvable, not absent: such a dependent is never collected."""
    owner = cm(sandbox, "namespaced-owner")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "namespaced-owner"}
    ref["uid"] = owner["metadata"]["uid"]
    body = {"metadata": {"name": "held", "ownerReferences": [ref]}, "rules": []}
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    assert http(sandbox, "POST", path, body)[0] == 201
    cm(sandbox, "after")  # the collector has run since
    assert exists(sandbox, f"{path}/held")
