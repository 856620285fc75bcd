"""Controllers of the controller-manager run in the test's process against a real
control plane (store and apiserver as processes, no controller-manager of their own),
each test choosing which controllers run and with what flags, so that grace periods and
deadlines can be seconds instead of minutes.

`controllers(lab, "--controllers=node-ipam-controller", "--cluster-cidr=...")` runs one
term of the real `ControllerManager` with the command line parsed by the real
`parse_args`, until the `with` block ends. Their logs go to the plane's
controller-manager log, which `Lab.until` quotes when a wait runs out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from controlplane.controllers import manager
from controlplane.localplane import LocalControlPlane
from kubelab.client import load_config
from tests.integration.controlplane_fixture import Lab

STOP_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A store and an apiserver, without a controller-manager."""
    control = LocalControlPlane(
        tmp_path_factory.mktemp("plane"), store_members=1, controller_manager=False
    )
    handler = logging.FileHandler(control.dir / "controller-manager.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("kubelab")
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        control.start(timeout=90)
        yield Lab(control)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()
        control.stop()


@contextmanager
def controllers(lab: Lab, *flags: str) -> Iterator[None]:
    """Run the controllers `flags` (kube-controller-manager's) choose until the block
    ends (they start working once their caches have synced: wait for what they do)."""
    args = manager.parse_args(
        [
            "--kubeconfig",
            str(lab.plane.controller_manager_kubeconfig),
            "--leader-elect=false",
            *flags,
        ]
    )
    enabled = manager.runnable_controllers(args)
    config = load_config(args.kubeconfig)
    options = manager.Options(
        controllers=enabled,
        root_ca=config.ca_data or b"",
        workers={},
        qps=args.kube_api_qps,
        burst=args.kube_api_burst,
        args=args,
    )
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            manager.ControllerManager(config, options).run(stop)
        except BaseException as exc:  # reported by the test, not lost in a thread
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
