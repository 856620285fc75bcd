"""PodSecurity (kube-apiserver's built-in Pod Security admission): holds pods to the Pod
Security Standard their namespace's labels name.

A namespace chooses a level (`privileged`, `baseline`, `restricted`) and a version of the
standard (`latest`, or `v1.<minor>` to pin it) for each of three modes:

    pod-security.kubernetes.io/enforce, .../enforce-version   a violating pod is refused
    pod-security.kubernetes.io/audit,   .../audit-version     the request's audit event
                                                              records the violations
    pod-security.kubernetes.io/warn,    .../warn-version      the client is warned

A mode without a label is `privileged` (nothing checked), a version without one `latest`.
The checks and their wording are `pod_security_standards`'.

* A pod's create, a significant update (anything but its images and labels; the AppArmor
  annotations count) and its ephemeral containers are evaluated. A refusal is a 403 that
  names every violation: `pods "x" is forbidden: violates PodSecurity "restricted:latest":
  allowPrivilegeEscalation != false (container "x" must set ...), ...`. The `warn` level's
  violations of an admitted pod reach the client as a Warning (`would violate PodSecurity
  "baseline:latest": ...`); the audit event carries the annotations
  `pod-security.kubernetes.io/enforce-policy` (the enforced level) and `.../audit-violations`.
* The pod templates of workloads (Deployments, ReplicaSets, StatefulSets, DaemonSets,
  Jobs, CronJobs, ReplicationControllers, PodTemplates) get the `warn` and `audit` modes
  only, as in Kubernetes: their pods are refused when they are created, by the
  controller, and the warning tells the user at once.
* A namespace's labels must be valid (a 422 otherwise). Changing its enforce level
  (to a stricter level, or another version) checks the pods already in it against it
  and warns about those that violate it (`existing pods in namespace "x" violate the
  new PodSecurity enforce level "restricted:latest"`, then a line per pod: its name and
  the reasons), leaving them running, as Kubernetes does.

No exemptions are configured (Kubernetes' default admission configuration has none).
"""

from __future__ import annotations

import copy
from typing import Any

from kubelab.api import errors
from kubelab.api.errors import FieldError
from kubelab.api.selectors import lookup_path

from .. import audit, warning
from ..registry import Attributes
from . import pod_security_standards as pss
from .interfaces import NAMESPACES, PODS, ValidationInterface

Object = dict[str, Any]

PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
ENFORCE_POLICY_ANNOTATION = PREFIX + "enforce-policy"
AUDIT_VIOLATIONS_ANNOTATION = PREFIX + "audit-violations"

_TEMPLATES: dict[str, tuple[str, ...]] = {
    "podtemplates": ("template",),
    "replicationcontrollers": ("spec", "template"),
    "deployments.apps": ("spec", "template"),
    "replicasets.apps": ("spec", "template"),
    "statefulsets.apps": ("spec", "template"),
    "daemonsets.apps": ("spec", "template"),
    "jobs.batch": ("spec", "template"),
    "cronjobs.batch": ("spec", "jobTemplate", "spec", "template"),
}
"""Where each workload keeps its pod template."""


def policy(labels: dict[str, str]) -> tuple[dict[str, pss.LevelVersion], list[FieldError]]:
    """The namespace's level and version per mode, and what is wrong with its labels
    (a wrong mode is `restricted`, the strictest, as Kubernetes takes it)."""
    problems: list[FieldError] = []
    found: dict[str, pss.LevelVersion] = {}
    for mode in MODES:
        level = labels.get(PREFIX + mode, pss.PRIVILEGED)
        version = labels.get(f"{PREFIX}{mode}-version", pss.LATEST)
        if level not in pss.LEVELS:
            problems.append(
                errors.invalid(
                    f"metadata.labels[{PREFIX}{mode}]",
                    level,
                    "must be one of privileged, baseline, restricted",
                )
            )
            level = pss.RESTRICTED
        if not pss.valid_version(version):
            problems.append(
                errors.invalid(
                    f"metadata.labels[{PREFIX}{mode}-version]",
                    version,
                    'must be "latest" or "v1.x"',
                )
            )
            version = pss.LATEST
        found[mode] = pss.LevelVersion(level, version)
    return found, problems


def _without_images(pod: Object) -> Object:
    """The pod's spec and AppArmor annotations: what an update must change to be
    evaluated again (Kubernetes lets image changes and metadata through)."""
    spec = copy.deepcopy(pod.get("spec") or {})
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(field) or []:
            container.pop("image", None)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    apparmor = {k: v for k, v in annotations.items() if k.startswith("container.apparmor.")}
    return {"spec": spec, "apparmor": apparmor}


class PodSecurity(ValidationInterface):
    NAME = "PodSecurity"
    OPERATIONS = frozenset({"CREATE", "UPDATE"})

    def validate(self, attrs: Attributes) -> None:
        group_resource = attrs.resource.group_resource
        if group_resource == NAMESPACES and not attrs.subresource:
            self._namespace(attrs)
        elif group_resource == PODS and attrs.subresource in ("", "ephemeralcontainers"):
            self._pod(attrs)
        elif group_resource in _TEMPLATES and not attrs.subresource:
            self._workload(attrs, _TEMPLATES[group_resource])

    def _policy_of(self, namespace: str) -> dict[str, pss.LevelVersion] | None:
        ns = self.lookup.find(NAMESPACES, "", namespace)
        if ns is None:
            return None  # NamespaceLifecycle answers for a missing namespace
        return policy((ns.get("metadata") or {}).get("labels") or {})[0]

    def _pod(self, attrs: Attributes) -> None:
        pod = attrs.object
        if pod is None:
            return
        if (
            attrs.operation == "UPDATE"
            and not attrs.subresource
            and attrs.old is not None
            and _without_images(pod) == _without_images(attrs.old)
        ):
            return
        modes = self._policy_of(attrs.namespace)
        if modes is None:
            return
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        enforce = modes["enforce"]
        audit.annotate(ENFORCE_POLICY_ANNOTATION, str(enforce))
        violations = pss.evaluate(enforce, meta, spec)
        self._audit(modes["audit"], meta, spec)
        if violations:
            raise errors.forbidden_object(
                "pods",
                attrs.name,
                f'violates PodSecurity "{enforce}": {pss.describe(violations)}',
            )
        self._warn(modes["warn"], meta, spec)

    def _workload(self, attrs: Attributes, path: tuple[str, ...]) -> None:
        template = lookup_path(attrs.object, *path)
        if template is None:
            return
        if attrs.operation == "UPDATE" and template == lookup_path(attrs.old, *path):
            return
        modes = self._policy_of(attrs.namespace)
        if modes is None:
            return
        meta, spec = template.get("metadata") or {}, template.get("spec") or {}
        self._audit(modes["audit"], meta, spec)
        self._warn(modes["warn"], meta, spec)

    @staticmethod
    def _audit(level: pss.LevelVersion, meta: Object, spec: Object) -> None:
        violations = pss.evaluate(level, meta, spec)
        if violations:
            audit.annotate(
                AUDIT_VIOLATIONS_ANNOTATION,
                f'would violate PodSecurity "{level}": {pss.describe(violations)}',
            )

    @staticmethod
    def _warn(level: pss.LevelVersion, meta: Object, spec: Object) -> None:
        violations = pss.evaluate(level, meta, spec)
        if violations:
            warning.add(f'would violate PodSecurity "{level}": {pss.describe(violations)}')

    def _namespace(self, attrs: Attributes) -> None:
        ns = attrs.object or {}
        labels = (ns.get("metadata") or {}).get("labels") or {}
        modes, problems = policy(labels)
        old_labels = ((attrs.old or {}).get("metadata") or {}).get("labels") or {}
        ours = {k: v for k, v in labels.items() if k.startswith(PREFIX)}
        changed = ours != {k: v for k, v in old_labels.items() if k.startswith(PREFIX)}
        if problems and (attrs.operation == "CREATE" or changed):
            raise errors.invalid_object("Namespace", attrs.name, problems)
        if attrs.operation != "UPDATE" or not changed:
            return
        enforce, old = modes["enforce"], policy(old_labels)[0]["enforce"]
        relaxed = enforce.version == old.version and pss.LEVELS.index(
            enforce.level
        ) <= pss.LEVELS.index(old.level)
        if relaxed or enforce.level == pss.PRIVILEGED:
            return  # as Kubernetes skips it: nothing can newly violate
        for text in self.existing_pod_warnings(attrs.name, enforce):
            warning.add(text)

    def existing_pod_warnings(self, namespace: str, enforce: pss.LevelVersion) -> list[str]:
        """The warnings about the namespace's pods that violate its new enforce level:
        the pods with the same reasons in one line, as Kubernetes groups them."""
        by_reasons: dict[str, list[str]] = {}
        for pod in self.lookup.list_objects(PODS, namespace):
            meta = pod.get("metadata") or {}
            violations = pss.evaluate(enforce, meta, pod.get("spec") or {})
            if violations:
                reasons = ", ".join(v.reason for v in violations)
                by_reasons.setdefault(reasons, []).append(str(meta.get("name")))
        if not by_reasons:
            return []
        lines = [
            f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce '
            f'level "{enforce}"'
        ]
        for reasons, names in by_reasons.items():
            names.sort()
            others = len(names) - 1
            who = names[0] if not others else f"{names[0]} (and {others} other pods)"
            lines.append(f"{who}: {reasons}")
        return lines
