"""The lab's context in the user's kubeconfig, as kind merges `kind-<name>`.

`labctl up` copies the admin kubeconfig's cluster, user and context into the user's
kubeconfig under one name, `kubelab-<cluster name>`, and makes that context current, so
that a plain `kubectl get nodes` reaches the lab; `labctl down` takes those three
entries out again (and the current context, if it was the lab's). The file is the one
kind (and kubectl) would merge into: of `$KUBECONFIG`'s paths the first that exists,
else the last; `~/.kube/config` without `$KUBECONFIG`.
Entries of other clusters are left as they were; the file is rewritten atomically with
mode 0600 (it holds credentials).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from kubelab import pki

SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}


def user_kubeconfig() -> Path:
    """The file kubectl would merge a new context into, as kind picks it: of
    $KUBECONFIG's paths the first that exists, else the last; without $KUBECONFIG,
    ~/.kube/config."""
    paths = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if not paths:
        return Path.home() / ".kube" / "config"
    return next((p for p in paths if p.is_file()), paths[-1])


PREFIX = "kubelab-"


def context_name(cluster: str) -> str:
    return f"{PREFIX}{cluster}"


def lab_name(context: str) -> str:
    """The lab a context of `context_name`'s form names; "" for any other context."""
    return context.removeprefix(PREFIX) if context.startswith(PREFIX) else ""


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    doc = yaml.safe_load(path.read_text()) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a kubeconfig (a YAML mapping): fix or move it")
    return doc


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pki.write_atomic(path, yaml.safe_dump(doc, sort_keys=False).encode(), 0o600)


def _without(doc: dict[str, Any], name: str) -> None:
    for section in SECTIONS:
        doc[section] = [e for e in doc.get(section) or [] if e.get("name") != name]


def merge(admin: Path, cluster: str, target: Path | None = None) -> Path:
    """Put the admin kubeconfig's cluster, user and context into the user's kubeconfig
    as `kubelab-<cluster>`, the current context; returns the file written."""
    target = target or user_kubeconfig()
    source = _read(admin)
    context = source["contexts"][0]["context"]
    name = context_name(cluster)
    entries = {
        "clusters": next(c for c in source["clusters"] if c["name"] == context["cluster"]),
        "users": next(u for u in source["users"] if u["name"] == context["user"]),
        "contexts": {"context": {**context, "cluster": name, "user": name}},
    }
    doc = _read(target)
    _without(doc, name)
    for section, entry in entries.items():
        key = SECTIONS[section]
        doc[section].append({"name": name, key: entry[key]})
    doc["current-context"] = name
    _write(target, doc)
    return target


def unmerge(cluster: str, target: Path | None = None) -> bool:
    """Take the lab's entries out of the user's kubeconfig; False if none were there."""
    target = target or user_kubeconfig()
    if not target.exists():
        return False
    doc = _read(target)
    name = context_name(cluster)
    before = sum(len(doc.get(section) or []) for section in SECTIONS)
    _without(doc, name)
    if doc.get("current-context") == name:
        doc["current-context"] = ""
    if before == sum(len(doc[section]) for section in SECTIONS):
        return False
    _write(target, doc)
    return True
