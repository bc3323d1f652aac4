"""The sandbox's admission chain: the built-in plugins every cluster enables.

kube-apiserver passes each create through its admission plugins
(https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/):
mutating ones change the object before validation, validating ones may refuse it
after. The sandbox runs, in the real chain's order, ``LimitRanger``
(``limitranges.py``), ``Priority`` (``priorities.py``) and ``ResourceQuota``
(``quota.py``, always last: it charges what the others let through). NamespaceLifecycle
is ``api.py``'s and ``namespaces.py``'s. ``server.py`` calls :func:`install_admission`.
"""

from __future__ import annotations

from reconciler.sandbox.api import SandboxApi
from reconciler.sandbox.limitranges import LimitRanger
from reconciler.sandbox.priorities import PriorityAdmission
from reconciler.sandbox.quota import QuotaAdmission


def install_admission(api: SandboxApi) -> None:
    limits, priority = LimitRanger(api.store), PriorityAdmission(api.store)
    api.mutating += [limits.mutate, priority.mutate]
    api.validating += [limits.validate, priority.validate, QuotaAdmission(api.store).validate]
