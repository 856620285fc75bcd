"""`labctl trace` (kubelab.cli.trace) over a real collector in a thread, fed with spans the
SDK made as the components will: the seeds' create flow of a Deployment, its context
carried through each object's annotation. The waterfall's steps and grouping, `-o json`'s
public shape, and bad input: a bad name, an object the collector never saw, a collector
that does not answer."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from controlplane.collector import server as collector_server
from controlplane.collector.storage import TraceStore
from kubelab import tracing
from kubelab.cli import trace as labctl_trace

PUBLIC_KEYS = {
    "trace_id",
    "span_id",
    "parent_span_id",
    "links",
    "name",
    "component",
    "node",
    "start",
    "end",
    "object",
    "attributes",
}


def obj(kind: str, name: str, uid: str, owner: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid}
    if owner:
        metadata["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"kind": kind, "metadata": metadata}


class Lab:
    """The components' tracers, each with its own Resource, exporting to memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracers = {
            name: tracing.setup(name, node, CollectorRegistry(), exporter=self.exporter)
            for name, node in [
                ("apiserver", "control-plane1"),
                ("store", "control-plane1"),
                ("controller-manager", "control-plane1"),
                ("scheduler", "control-plane1"),
                ("kubelet", "worker1"),
                ("kube-proxy", "worker1"),
            ]
        }

    def write(self, about: dict[str, Any], agent: str = "kube-controller-manager/v1.37") -> None:
        """The apiserver's span of a create, with the store's below it; the object then
        carries the context."""
        with self.tracers["apiserver"].tracer.start_as_current_span(
            f"POST {about['kind'].lower()}s"
        ) as request:
            request.set_attributes(tracing.object_attributes(about))
            request.set_attribute(labctl_trace.USER_AGENT, agent)
            with self.tracers["store"].tracer.start_as_current_span("store.txn"):
                pass
            tracing.inject(about["metadata"])

    def react(self, component: str, name: str, about: dict[str, Any]) -> Any:
        span = self.tracers[component].tracer.start_as_current_span(
            name, tracing.extract(about), attributes=tracing.object_attributes(about)
        )
        return span

    def spans(self) -> Any:
        for traced in self.tracers.values():
            traced.force_flush()
        return encode_spans(self.exporter.get_finished_spans())


def create_deployment_flow(lab: Lab, name: str, uid: str) -> None:
    """The seeds' flow: kubectl creates a Deployment, the controller-manager a ReplicaSet
    and a Pod, the scheduler binds it, the kubelet runs it, kube-proxy programs rules."""
    deployment = obj("Deployment", name, uid)
    lab.write(deployment, agent="kubectl/v1.37.0 (linux/amd64)")
    replicaset = obj("ReplicaSet", f"{name}-7d4", f"{uid}-rs", owner=uid)
    with lab.react("controller-manager", "Deployment.sync", deployment):
        lab.write(replicaset)
    pod = obj("Pod", f"{name}-7d4-x2", f"{uid}-pod", owner=f"{uid}-rs")
    with lab.react("controller-manager", "ReplicaSet.sync", replicaset):
        lab.write(pod)
    link = tracing.link(pod)
    assert link is not None
    with lab.tracers["scheduler"].tracer.start_as_current_span(
        "Scheduler.schedule", links=[link], attributes=tracing.object_attributes(pod)
    ):
        lab.write(obj("Binding", f"{name}-7d4-x2", f"{uid}-binding"))
    with lab.react("kubelet", "Kubelet.syncPod", pod):
        pass
    with lab.tracers["kube-proxy"].tracer.start_as_current_span(
        "Proxier.syncProxyRules", tracing.extract(pod)
    ):
        pass


@contextlib.contextmanager
def serving(directory: Path, lab: Lab) -> Iterator[str]:
    """A real collector in a thread, keeping its spans in `directory`, that has received
    the lab's spans; its URL."""
    store = TraceStore(directory, max_traces=100, max_bytes=10**7)
    server = collector_server.serve(store, "127.0.0.1", 0)
    try:
        answer = requests.post(
            f"{server.url}/v1/traces",
            data=lab.spans().SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
            timeout=10,
        )
        assert answer.status_code == 200
        yield server.url
    finally:
        server.shutdown()
        store.close()


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[str]:
    lab = Lab()
    create_deployment_flow(lab, "web", "uid-web")
    create_deployment_flow(lab, "other", "uid-other")
    with serving(tmp_path, lab) as url:
        yield url


def test_json_is_the_objects_whole_path_in_the_public_shape(
    collector: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert labctl_trace.main(["deploy/web", "-o", "json", "--collector", collector]) == 0
    spans = json.loads(capsys.readouterr().out)["spans"]
    assert all(set(span) == PUBLIC_KEYS for span in spans)
    assert [s["start"] for s in spans] == sorted(s["start"] for s in spans)
    components = {s["component"] for s in spans}
    assert components == {
        "apiserver",
        "store",
        "controller-manager",
        "scheduler",
        "kubelet",
        "kube-proxy",
    }
    names = {(s["object"] or {}).get("name") for s in spans}
    assert {"web", "web-7d4", "web-7d4-x2"} <= names
    assert not any(n and n.startswith("other") for n in names)
    (schedule,) = [s for s in spans if s["name"] == "Scheduler.schedule"]
    assert schedule["parent_span_id"] is None and len(schedule["links"]) == 1
    created = schedule["links"][0]
    assert any(s["span_id"] == created["span_id"] for s in spans)


def test_the_waterfall_labels_the_seeds_steps_down_the_owner_chain(
    collector: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert labctl_trace.main(["deployment/web", "--collector", collector]) == 0
    lines = capsys.readouterr().out.splitlines()
    text = "\n".join(lines)

    def line_of(fragment: str) -> int:
        return next(i for i, line in enumerate(lines) if fragment in line)

    assert (
        line_of("Deployment default/web")
        < line_of("ReplicaSet default/web-7d4")
        < line_of("Pod default/web-7d4-x2")
    )
    kubectl = lines[line_of("kubectl/v1.37.0")]
    assert kubectl.split()[:2] == ["1", "kubectl"]
    for step, component, span in [
        ("2", "apiserver", "POST deployments"),
        ("3", "controller-manager", "ReplicaSet.sync"),
        ("4", "scheduler", "Scheduler.schedule"),
        ("5", "kubelet", "Kubelet.syncPod"),
        ("then", "kube-proxy", "Proxier.syncProxyRules"),
    ]:
        assert lines[line_of(span)].split()[:2] == [step, component], span
    assert "worker1" in lines[line_of("Kubelet.syncPod")]
    assert " ms" in lines[line_of("Kubelet.syncPod")]
    assert "other" not in text


def test_kind_names_resolve_as_kubectl_takes_them() -> None:
    assert labctl_trace.resolve_kind("deploy") == ("Deployment", True)
    assert labctl_trace.resolve_kind("pods") == ("Pod", True)
    assert labctl_trace.resolve_kind("node") == ("Node", False)
    assert labctl_trace.resolve_kind("Widget") == ("Widget", True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["deployment/never"], "no trace of Deployment never in namespace default"),
        (["nginx"], "name the object as KIND/NAME"),
        (["node/worker9"], "no trace of Node worker9: it never existed, or its traces aged out"),
    ],
)
def test_bad_input_is_a_message_and_exit_1(
    collector: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert labctl_trace.main([*argv, "--collector", collector]) == 1
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert captured.out == ""


def test_an_unreachable_collector_says_how_to_start_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert labctl_trace.main(["deployment/web", "--collector", url]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the trace collector at {url}" in err
    assert "python -m controlplane.collector" in err and "Traceback" not in err


def post(url: str, spans: Any) -> None:
    answer = requests.post(
        f"{url}/v1/traces",
        data=encode_spans(spans).SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
        timeout=10,
    )
    assert answer.status_code == 200


def test_follow_streams_an_objects_spans_as_they_arrive_in_any_order(collector: str) -> None:
    stream = labctl_trace.follow(
        labctl_trace.collector_page(collector), "Deployment", "default", "late", poll=0
    )
    assert next(stream) == []  # not made yet: following waits for it
    lab = Lab()
    create_deployment_flow(lab, "late", "uid-late")
    for traced in lab.tracers.values():
        traced.force_flush()
    made = lab.exporter.get_finished_spans()
    named = [s for s in made if s.attributes and tracing.OBJECT_KIND in s.attributes]
    # The spans that name no object come first: held back until their trace is known.
    post(collector, [s for s in made if s not in named])
    assert next(stream) == []
    post(collector, named)
    shown = next(stream)
    assert len(shown) == len(made) and next(stream) == []
    assert [s["start"] for s in shown] == sorted(s["start"] for s in shown)
    line = labctl_trace.follow_line(shown[0], labctl_trace.moment(shown[0]["start"]))
    assert line.split()[:3] == ["1", "apiserver", "control-plane1"]
    # The other Deployment's spans, already there, are not the object's.
    assert {s["trace_id"] for s in shown}.isdisjoint(
        {s["trace_id"] for s in labctl_trace.gather(
            labctl_trace.collector_fetch(collector), "Deployment", "default", "web")}
    )  # fmt: skip


def test_follow_ends_at_ctrl_c_without_a_traceback(
    collector: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(labctl_trace.time, "sleep", interrupted)
    assert labctl_trace.main(["deployment/web", "--follow", "--collector", collector]) == 130
    out, err = capsys.readouterr()
    assert "following Deployment web in namespace default (Ctrl-C ends it)" in err
    assert "Traceback" not in err and "Deployment.sync" in out


def test_a_deleted_pods_trace_shows_the_replacement_its_owner_made(tmp_path: Path) -> None:
    """The ReplicaSet's reconcile stays in the ReplicaSet's trace and links to the deleted
    pod's event: `labctl trace pod/NAME` follows that link back (the collector's
    `linked_trace_id`) and shows the reconcile and what it caused, not the rest of the
    ReplicaSet's trace."""
    lab = Lab()
    create_deployment_flow(lab, "web", "uid-web")
    replicaset = obj("ReplicaSet", "web-7d4", "uid-web-rs", owner="uid-web")
    lab.write(replicaset, agent="kubectl/v1.37.0 (linux/amd64)")  # a scale: its own trace
    pod = obj("Pod", "web-7d4-x2", "uid-web-pod", owner="uid-web-rs")
    lab.write(pod, agent="kubectl/v1.37.0 (linux/amd64)")  # the deletion's mark
    with lab.react("controller-manager", "Informer.event", pod) as event:
        queued = event.get_span_context()
    tracer = lab.tracers["controller-manager"].tracer
    with tracer.start_as_current_span(
        "Controller.reconcile",
        tracing.extract(replicaset),
        links=[trace.Link(queued)],
        attributes=tracing.object_attributes(replicaset),
    ):
        replacement = obj("Pod", "web-7d4-z9", "uid-web-pod2", owner="uid-web-rs")
        lab.write(replacement)
    with lab.react("kubelet", "Kubelet.syncPod", replacement):
        pass
    with serving(tmp_path, lab) as url:
        spans = labctl_trace.gather(
            labctl_trace.collector_fetch(url), "Pod", "default", "web-7d4-x2"
        )
    named = {(s["name"], (s["object"] or {}).get("name")) for s in spans}
    assert ("Controller.reconcile", "web-7d4") in named
    assert ("POST pods", "web-7d4-z9") in named
    assert ("Kubelet.syncPod", "web-7d4-z9") in named
    # The rest of the ReplicaSet's trace (the scale) is not the pod's: only the create
    # by the Deployment's sync, in the pod's own first trace.
    assert [s["name"] for s in spans].count("POST replicasets") == 1
