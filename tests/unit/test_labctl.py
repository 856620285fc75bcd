"""labctl's command line (lab.labctl.cli): one parser for the store's commands and the
lab's, each listed with its help; operands and options checked before anything runs;
every lab command dispatched in-process to what does it.

The store's verbs against a store: tests/integration/test_labctl_store.py; ssh:
tests/unit/test_lab_ssh.py; what `labctl store` loads: tests/unit/test_labctl_offline.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.labctl.cli import build_parser, lab_actions, main

LAB_COMMANDS = [
    ["up"],
    ["down"],
    ["status"],
    ["stop"],
    ["start"],
    ["nodes", "add"],
    ["nodes", "remove", "worker3"],
    ["load-image", "nginx:1.21"],
    ["kubeconfig"],
    ["ssh", "cp1"],
]


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, str]:
    """The commands (or verbs) `labctl ARGV --help` lists, each with its help (argparse
    wraps it at COLUMNS, set wide here, under the name's column)."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    listed: dict[str, str] = {}
    name = ""
    for line in capsys.readouterr().out.splitlines():
        entry = re.fullmatch(r" {4}(\S+)(?: +(.*))?", line)
        if entry:
            name = entry[1]
            listed[name] = entry[2] or ""
        elif name and re.fullmatch(r" {5,}\S.*", line):
            listed[name] = f"{listed[name]} {line.strip()}".strip()
        else:
            name = ""
    return listed


@pytest.fixture(autouse=True)
def wide_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def test_help_lists_every_command_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    listed = _help(capsys)
    lab = ["up", "down", "status", "stop", "start", "nodes", "load-image", "kubeconfig", "ssh"]
    assert list(listed) == ["store", "trace", "flows", *lab]
    assert all(listed.values()), listed
    assert listed["store"] == "the store (etcd's role), with etcdctl's verbs"
    assert listed["trace"] == "an object's path through the components, from the lab's traces"
    assert _help(capsys, "nodes") == {
        "add": "start a worker and join it (the next free workerN)",
        "remove": "drain a worker (evictions), labadm reset it, delete its Node and container",
    }


def test_store_help_lists_etcdctls_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    verbs = _help(capsys, "store")
    assert list(verbs) == [
        "put", "get", "del", "watch", "txn", "compaction", "lease", "member", "endpoint",
        "snapshot", "defrag", "alarm",
    ]  # fmt: skip
    assert all(verbs.values()), verbs


@pytest.mark.parametrize("argv", LAB_COMMANDS, ids=" ".join)
def test_every_lab_command_has_an_action(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args.lab_action in lab_actions(args)


def test_operands_are_parsed_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["nodes", "remove", "worker3"]).node == "worker3"
    assert parser.parse_args(["load-image", "nginx:1.21"]).image == "nginx:1.21"
    for wrong in (["nodes", "remove"], ["up", "x"], ["load-image"], ["ssh"], ["frobnicate"]):
        with pytest.raises(SystemExit) as exited:
            main(wrong)
        assert exited.value.code == 2, wrong
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["nodes", "delete", "worker1"])
    err = capsys.readouterr().err
    assert "usage: labctl nodes add | remove <name>" in err
    assert "invalid choice: 'delete' (choose from 'add', 'remove')" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--endpoints", "http://127.0.0.1:2379", "status"],
            "--endpoints: an option of `labctl store`, not of `labctl status`",
        ),
        (["-w", "json", "nodes", "add"], "--write-out: an option of `labctl store`"),
        (
            ["--dir", "/tmp", "store", "get", "k"],
            "--dir: an option of the lab's commands, not of `labctl store`",
        ),
        (["--name", "demo", "--prefix", "x", "store", "get", "k"], "--name, --prefix: an option"),
    ],
)
def test_an_option_of_the_other_group_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert f"labctl: error: {message}" in capsys.readouterr().err


def test_the_store_verbs_keep_their_own_prefix_and_name() -> None:
    """``--prefix`` and ``--name`` of `get` and `snapshot restore` are the store's, not
    taken for the lab's options of the same name."""
    args = build_parser().parse_args(["store", "get", "k", "--prefix"])
    assert args.prefix is True and not hasattr(args, "docker_prefix")
    restore = ["store", "snapshot", "restore", "b.snap", "--name", "m1"]
    args = build_parser().parse_args(restore)
    assert args.name == "m1" and not hasattr(args, "cluster_name")


def test_status_without_a_lab_says_how_to_make_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--dir", str(tmp_path)]) == 0
    state = tmp_path / "kubelab" / "state.json"
    assert capsys.readouterr().out == f"no lab 'kubelab' (no {state}); `labctl up` makes one\n"
    # The lab's options before the command, and --name over the config's name.
    assert main(["--dir", str(tmp_path), "--name", "demo", "status"]) == 0
    assert f"no lab 'demo' (no {tmp_path / 'demo' / 'state.json'})" in capsys.readouterr().out


def test_a_bad_cluster_config_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "cluster.yaml"
    assert main(["status", "--dir", str(tmp_path), "--config", str(missing)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: cannot read the cluster config {missing}: ")
    assert main(["status", "--dir", str(tmp_path), "--name", "Not_A_Name"]) == 1
    assert "name 'Not_A_Name' must be lowercase letters" in capsys.readouterr().err


def test_trace_is_dispatched_and_names_an_unreachable_collector(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Port 9 (discard) has no collector on it: the command says so and how to start one.
    assert main(["trace", "deployment/nginx", "--collector", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the trace collector at http://127.0.0.1:9" in err
    assert "Traceback" not in err


def test_trace_finds_the_labs_collector_in_its_state_or_says_how_to_get_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "deploy/nginx", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no lab 'kubelab'" in err and "`labctl up` makes one" in err
    state = tmp_path / "kubelab" / "state.json"
    state.parent.mkdir()
    state.write_text('{"prefix": "p", "nodes": [], "collector": ""}')
    assert main(["trace", "deploy/nginx", "--dir", str(tmp_path)]) == 1
    assert "runs without tracing (`tracing: false`" in capsys.readouterr().err
    # A lab whose collector does not answer (stopped): say so, and how to start it.
    state.write_text('{"prefix": "p", "nodes": [], "collector": "http://127.0.0.1:9"}')
    assert main(["trace", "deploy/nginx", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the trace collector at http://127.0.0.1:9" in err
    assert "`labctl start` starts a stopped lab" in err and "Traceback" not in err


def test_flows_finds_the_labs_collector_as_trace_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["flows", "get", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no lab 'kubelab'" in err and "`labctl up` makes one" in err
    state = tmp_path / "kubelab" / "state.json"
    state.parent.mkdir()
    state.write_text('{"prefix": "p", "nodes": [], "collector": "http://127.0.0.1:9"}')
    assert main(["flows", "get", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the trace collector at http://127.0.0.1:9" in err
    assert "`labctl start` starts a stopped lab" in err and "Traceback" not in err


def test_flows_is_dispatched_and_names_an_unreachable_collector(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The collector is asked first, before anything is made on the cluster.
    assert main(["flows", "get", "--collector", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the trace collector at http://127.0.0.1:9" in err
    assert "Traceback" not in err
