"""Leases for leader election: https://kubernetes.io/docs/concepts/architecture/leases/

Acquire by create (a second create conflicts), renew by replace with the read
resourceVersion (optimistic concurrency: a racing candidate gets 409).
"""

from __future__ import annotations

import datetime as dt

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def lease(holder: str) -> dict:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "metadata": {"name": "reconciler-prod"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        },
    }


def test_leader_election_acquire_and_renew(api_client: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api_client)
    mine = leases.create_namespaced_lease("default", lease("a"))
    with pytest.raises(ApiException) as taken:
        leases.create_namespaced_lease("default", lease("b"))
    assert taken.value.status == 409
    theirs = leases.read_namespaced_lease("reconciler-prod", "default")
    mine.spec.renew_time = dt.datetime.now(dt.UTC)
    renewed = leases.replace_namespaced_lease("reconciler-prod", "default", mine)
    assert renewed.spec.holder_identity == "a"
    theirs.spec.holder_identity = "b"
    with pytest.raises(ApiException) as lost:
        leases.replace_namespaced_lease("reconciler-prod", "default", theirs)
    assert lost.value.status == 409
    assert leases.read_namespaced_lease("reconciler-prod", "default").spec.holder_identity == "a"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("leaseDurationSeconds", 0, "must be greater than 0"),
        ("leaseDurationSeconds", -5, "must be greater than 0"),
        ("leaseTransitions", -1, "must be greater than or equal to 0"),
    ],
)
def test_a_lease_that_would_expire_at_once_is_invalid(
    api_client: client.ApiClient, field: str, value: int, message: str
) -> None:
    """``ValidateLeaseSpec`` (kubernetes/kubernetes pkg/apis/coordination/validation)."""
    leases = client.CoordinationV1Api(api_client)
    body = lease("a")
    body["spec"][field] = value
    with pytest.raises(ApiException) as refused:
        leases.create_namespaced_lease("default", body)
    assert refused.value.status == 422
    assert f"spec.{field}" in str(refused.value.body) and message in str(refused.value.body)
    mine = leases.create_namespaced_lease("default", lease("a"))  # the same, valid, is fine
    mine.spec.lease_duration_seconds = 0
    with pytest.raises(ApiException) as updated:
        leases.replace_namespaced_lease("reconciler-prod", "default", mine)
    assert updated.value.status == 422
