"""Image registries: the only code that speaks the OCI Distribution API v2 (SPEC section 8).

``RegistryClient`` lists a repository's tags and resolves manifest digests,
authenticating as each registry asks (anonymous, Basic, Bearer tokens) with
credentials from ``RECONCILER_REGISTRY_*`` or a docker ``config.json``.
``scan_catalog`` finds the newest build of every intermediate tag a catalog names
and what ``builds.yaml`` should say; ``verify_catalog`` checks that every released
image still resolves. Writing and committing ``builds.yaml`` is ``reconciler.source``'s
(``commit_builds``). ``reconciler.registry.local`` runs a real registry for tests and
the demo.
"""

from reconciler.registry.auth import Credential, Credentials, CredentialsError
from reconciler.registry.client import MANIFEST_TYPES, RegistryClient, RegistryError, RetryPolicy
from reconciler.registry.reference import Repository, repository_of
from reconciler.registry.scan import (
    AppScan,
    BuildChange,
    BuildsFileInvalid,
    MissingImage,
    ScanResult,
    VerifyResult,
    read_builds,
    scan_catalog,
    verify_catalog,
)

__all__ = [
    "MANIFEST_TYPES",
    "AppScan",
    "BuildChange",
    "BuildsFileInvalid",
    "Credential",
    "Credentials",
    "CredentialsError",
    "MissingImage",
    "RegistryClient",
    "RegistryError",
    "Repository",
    "RetryPolicy",
    "ScanResult",
    "VerifyResult",
    "read_builds",
    "repository_of",
    "scan_catalog",
    "verify_catalog",
]
