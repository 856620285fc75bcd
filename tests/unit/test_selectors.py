"""Label and field selectors: the string syntax, LabelSelector objects, plain maps, and
the messages Kubernetes answers a bad selector with."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource, lookup
from kubelab.api.selectors import (
    EVERYTHING,
    NOTHING,
    FieldRequirement,
    Operator,
    Requirement,
    escape_field_value,
    field_value,
    parse_field_selector,
    parse_label_selector,
    selectable_fields,
    selector_from_label_selector,
    selector_from_set,
)


def _resource(group: str, plural: str) -> Resource:
    resource = lookup(group, "v1", plural)
    assert resource is not None
    return resource


PODS = _resource("", "pods")
NODES = _resource("", "nodes")
EVENTS = _resource("", "events")
NEW_EVENTS = _resource("events.k8s.io", "events")
JOBS = _resource("batch", "jobs")
REPLICA_SETS = _resource("apps", "replicasets")
CSRS = _resource("certificates.k8s.io", "certificatesigningrequests")


def bad_request(call: Any, *args: Any) -> str:
    with pytest.raises(StatusError) as caught:
        call(*args)
    assert caught.value.code == 400 and caught.value.reason == "BadRequest"
    return caught.value.message


# --- label selector syntax ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("   ", ""),
        ("app=web", "app=web"),
        ("app==web", "app==web"),
        ("tier!=db", "tier!=db"),
        ("env in (prod, qa)", "env in (prod,qa)"),
        ("env in (qa,prod,qa)", "env in (prod,qa)"),
        ("tier notin (fe)", "tier notin (fe)"),
        ("partition", "partition"),
        ("!partition", "!partition"),
        ("  ! partition ", "!partition"),
        (" app = web ,\ttier != db ", "app=web,tier!=db"),
        ("z=1,a=2,m", "a=2,m,z=1"),
        ("a=1,a!=2", "a=1,a!=2"),
        ("a=", "a="),
        ("a=,b", "a=,b"),
        ("x in ()", "x in ()"),
        ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
        ("x in (,a)", "x in (,a)"),
        ("x in (a,)", "x in (,a)"),
        ("in in (in, notin)", "in in (in,notin)"),
        ("notin=in", "notin=in"),
        ("example.com/app=web", "example.com/app=web"),
        ("replicas>2,replicas<10", "replicas>2,replicas<10"),
        ("a=b.c-d_e", "a=b.c-d_e"),
    ],
)
def test_a_selector_prints_in_canonical_form(text: str, canonical: str) -> None:
    selector = parse_label_selector(text)
    assert str(selector) == canonical
    assert str(parse_label_selector(canonical)) == canonical


def test_the_parsed_requirements_keep_the_operator_and_sorted_values() -> None:
    selector = parse_label_selector("env in (qa,prod),!gpu,tier")
    assert selector.requirements == (
        Requirement("env", Operator.IN, ("prod", "qa")),
        Requirement("gpu", Operator.DOES_NOT_EXIST),
        Requirement("tier", Operator.EXISTS),
    )


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        ("app==web", {"app": "web", "x": "y"}, True),
        ("app!=web", {"app": "db"}, True),
        ("app!=web", {}, True),
        ("app!=web", {"app": "web"}, False),
        ("env in (prod,qa)", {"env": "qa"}, True),
        ("env in (prod,qa)", {"env": "dev"}, False),
        ("env in (prod,qa)", {}, False),
        ("env notin (prod,qa)", {"env": "dev"}, True),
        ("env notin (prod,qa)", {}, True),
        ("env notin (prod,qa)", {"env": "prod"}, False),
        ("gpu", {"gpu": ""}, True),
        ("gpu", {}, False),
        ("!gpu", {}, True),
        ("!gpu", {"gpu": "x"}, False),
        ("a=", {"a": ""}, True),
        ("a=", {}, False),
        ("x in ()", {"x": ""}, True),
        ("x in ()", {"x": "y"}, False),
        ("n>2", {"n": "3"}, True),
        ("n>2", {"n": "2"}, False),
        ("n>2", {"n": "three"}, False),
        ("n>2", {}, False),
        ("n<10", {"n": "-5"}, True),
        ("n<10", {"n": "1_0"}, False),
        ("app=web,tier", {"app": "web"}, False),
        ("app=web,tier", {"app": "web", "tier": "fe"}, True),
        ("", {}, True),
    ],
)
def test_matching(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("(", "found '(', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a!b", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("!!a", "unable to parse requirement: found '!', expected: identifier"),
        ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b,", "unable to parse requirement: found '', expected: ',', or identifier"),
        (
            "a>b",
            'unable to parse requirement: values[0]: Invalid value: "b": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ],
)
def test_syntax_errors_are_worded_as_kubernetes_words_them(text: str, message: str) -> None:
    assert bad_request(parse_label_selector, text) == message


NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def test_a_bad_key_is_refused_with_the_label_key_rules() -> None:
    assert bad_request(parse_label_selector, "-a=b") == (
        f'unable to parse requirement: <nil>: Invalid value: "-a": name part {NAME_RULE}'
    )
    message = bad_request(parse_label_selector, "Example.com/a")
    assert message.startswith('unable to parse requirement: <nil>: Invalid value: "Example.com/a"')
    assert "prefix part a lowercase RFC 1123 subdomain must consist of" in message
    assert bad_request(parse_label_selector, "/a").endswith("prefix part must be non-empty")
    message = bad_request(parse_label_selector, "a/")
    assert "name part must be non-empty; name part must consist of" in message
    message = bad_request(parse_label_selector, "a/b/c")
    assert "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')" in message


def test_a_key_name_may_have_63_characters_but_not_64() -> None:
    assert str(parse_label_selector("k" * 63)) == "k" * 63
    assert bad_request(parse_label_selector, "k" * 64).endswith(
        "name part must be no more than 63 characters"
    )
    assert str(parse_label_selector(f"{'p' * 200}.io/app")) == f"{'p' * 200}.io/app"


def test_a_bad_value_is_refused_at_its_index_and_key() -> None:
    assert bad_request(parse_label_selector, "a=-b") == (
        f'unable to parse requirement: values[0][a]: Invalid value: "-b": {VALUE_RULE}'
    )
    message = bad_request(parse_label_selector, "a in (ok, -x, y-)")
    assert message.startswith('unable to parse requirement: [values[0][a]: Invalid value: "-x"')
    assert 'values[2][a]: Invalid value: "y-"' in message
    assert bad_request(parse_label_selector, "a=" + "v" * 64) == (
        f'unable to parse requirement: values[0][a]: Invalid value: "{"v" * 64}": '
        "must be no more than 63 characters"
    )
    # A bound is a label value too, so it cannot be negative.
    assert bad_request(parse_label_selector, "n>-1").startswith(
        'unable to parse requirement: values[0][n]: Invalid value: "-1"'
    )


# --- LabelSelector objects and plain maps ------------------------------------------------


def test_an_absent_label_selector_selects_nothing_and_an_empty_one_everything() -> None:
    assert selector_from_label_selector(None) is NOTHING
    assert not NOTHING.matches({}) and not NOTHING.empty() and str(NOTHING) == ""
    empties: list[dict[str, Any]] = [
        {},
        {"matchLabels": {}},
        {"matchLabels": None, "matchExpressions": []},
    ]
    for empty in empties:
        selector = selector_from_label_selector(empty)
        assert selector == EVERYTHING and selector.empty() and selector.matches({"a": "b"})


def test_a_label_selector_joins_match_labels_and_expressions() -> None:
    selector = selector_from_label_selector(
        {
            "matchLabels": {"tier": "fe", "app": "web"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["qa", "prod"]},
                {"key": "track", "operator": "NotIn", "values": ["canary"]},
                {"key": "gpu", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "Exists", "values": []},
            ],
        }
    )
    assert str(selector) == "app=web,env in (prod,qa),!gpu,tier=fe,track notin (canary),zone"
    labels = {"app": "web", "tier": "fe", "env": "qa", "zone": "a"}
    assert selector.matches(labels)
    assert not selector.matches({**labels, "gpu": "1"})
    assert not selector.matches({**labels, "track": "canary"})
    assert not selector.matches({**labels, "env": "dev"})
    assert selector == parse_label_selector(str(selector))


@pytest.mark.parametrize(
    ("label_selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]},
            '"Equals" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a"}]},
            '"" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]},
            'values: Invalid value: ["b"]: values set must be empty for exists and does not exist',
        ),
        ({"matchLabels": {"-a": "b"}}, f'key: Invalid value: "-a": name part {NAME_RULE}'),
        ({"matchLabels": {"a": "b c"}}, f'values[0][a]: Invalid value: "b c": {VALUE_RULE}'),
    ],
)
def test_an_invalid_label_selector_is_refused(label_selector: dict[str, Any], message: str) -> None:
    assert bad_request(selector_from_label_selector, label_selector) == message


def test_both_key_and_value_errors_are_reported_together() -> None:
    message = bad_request(selector_from_label_selector, {"matchLabels": {"-a": "-b"}})
    assert message.startswith('[key: Invalid value: "-a"')
    assert message.endswith("]") and ', values[0][-a]: Invalid value: "-b"' in message


def test_a_plain_map_selects_pods_carrying_every_pair() -> None:
    selector = selector_from_set({"tier": "fe", "app": "web"})
    assert str(selector) == "app=web,tier=fe"
    assert selector.matches({"app": "web", "tier": "fe", "extra": "x"})
    assert not selector.matches({"app": "web"})
    assert selector_from_set(None) == EVERYTHING == selector_from_set({})


# --- properties --------------------------------------------------------------------------

NAME_CHARS = string.ascii_letters + string.digits
names = st.builds(
    lambda first, middle, last: first + middle + last if middle or last else first,
    st.sampled_from(NAME_CHARS),
    st.text(NAME_CHARS + "-_.", max_size=10),
    st.sampled_from(NAME_CHARS),
)
keys = st.one_of(
    names,
    st.builds(
        lambda prefix, name: f"{prefix}.io/{name}", st.sampled_from(["a", "k8s", "x-y"]), names
    ),
)
values = st.one_of(st.just(""), names)


@st.composite
def requirements(draw: st.DrawFn) -> str:
    key = draw(keys)
    operator = draw(st.sampled_from(["=", "==", "!=", " in ", " notin ", "", "!", ">", "<"]))
    if operator == "":
        return key
    if operator == "!":
        return "!" + key
    if operator in (">", "<"):
        return f"{key}{operator}{draw(st.integers(0, 2**63 - 1))}"
    if operator.strip() in ("in", "notin"):
        chosen = draw(st.lists(values, min_size=1, max_size=4))
        return f"{key}{operator}({', '.join(chosen)})"
    return f"{key}{operator}{draw(values)}"


@given(st.lists(requirements(), max_size=5), st.dictionaries(keys, values, max_size=5))
@settings(max_examples=300)
def test_printing_a_parsed_selector_parses_back_to_it(
    terms: list[str], labels: dict[str, str]
) -> None:
    selector = parse_label_selector(" , ".join(terms))
    again = parse_label_selector(str(selector))
    assert again == selector
    assert str(again) == str(selector)
    assert again.matches(labels) == selector.matches(labels)


@given(st.text(alphabet=NAME_CHARS + "=!(),<>- \t/.", max_size=30))
@settings(max_examples=300)
def test_any_text_either_parses_or_is_a_bad_request(text: str) -> None:
    try:
        selector = parse_label_selector(text)
    except StatusError as error:
        assert error.code == 400
    else:
        assert parse_label_selector(str(selector)) == selector


# --- field selectors ---------------------------------------------------------------------

POD = {
    "metadata": {"name": "web-1", "namespace": "shop"},
    "spec": {"nodeName": "node-a", "restartPolicy": "Always", "hostNetwork": True},
    "status": {"phase": "Running", "podIPs": [{"ip": "10.1.0.7"}, {"ip": "fd00::7"}]},
}


def test_a_field_selector_is_sorted_and_prints_double_equals_as_equals() -> None:
    selector = parse_field_selector("status.phase!=Failed,spec.nodeName==node-a", PODS)
    assert str(selector) == "spec.nodeName=node-a,status.phase!=Failed"
    assert selector.requirements == (
        FieldRequirement("spec.nodeName", "node-a"),
        FieldRequirement("status.phase", "Failed", negated=True),
    )
    assert selector.matches(POD)
    assert not selector.matches({**POD, "spec": {"nodeName": "node-b"}})
    assert parse_field_selector("", PODS).empty() and parse_field_selector(",", PODS).matches({})


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("metadata.name", "web-1"),
        ("metadata.namespace", "shop"),
        ("spec.nodeName", "node-a"),
        ("spec.host", "node-a"),
        ("spec.restartPolicy", "Always"),
        ("spec.schedulerName", ""),
        ("spec.serviceAccountName", ""),
        ("spec.hostNetwork", "true"),
        ("status.phase", "Running"),
        ("status.podIP", "10.1.0.7"),
        ("status.nominatedNodeName", ""),
    ],
)
def test_pod_fields_read_as_the_registry_indexes_them(field: str, expected: str) -> None:
    assert field_value(PODS, POD, field) == expected


def test_missing_fields_read_as_their_zero_value() -> None:
    assert field_value(PODS, {}, "spec.hostNetwork") == "false"
    assert field_value(PODS, {"status": {"podIP": "10.0.0.1"}}, "status.podIP") == "10.0.0.1"
    assert field_value(NODES, {}, "spec.unschedulable") == "false"
    assert field_value(NODES, {"spec": {"unschedulable": True}}, "spec.unschedulable") == "true"
    assert field_value(JOBS, {}, "status.successful") == "0"
    assert field_value(JOBS, {"status": {"succeeded": 3}}, "status.successful") == "3"
    replication = _resource("", "replicationcontrollers")
    assert field_value(replication, {}, "status.replicas") == "0"
    cluster_scoped = _resource("rbac.authorization.k8s.io", "clusterroles")
    assert field_value(cluster_scoped, {"metadata": {"name": "x"}}, "metadata.namespace") == ""


def test_event_source_falls_back_to_the_reporting_controller() -> None:
    core = {"source": {"component": "kubelet"}, "reportingComponent": "other"}
    assert field_value(EVENTS, core, "source") == "kubelet"
    assert field_value(EVENTS, {"reportingComponent": "scheduler"}, "source") == "scheduler"
    new = {"regarding": {"kind": "Pod", "name": "web-1"}, "reportingController": "kubelet"}
    assert field_value(NEW_EVENTS, new, "source") == "kubelet"
    assert field_value(NEW_EVENTS, new, "regarding.kind") == "Pod"
    selector = parse_field_selector("involvedObject.kind=Pod,involvedObject.name=web-1", EVENTS)
    assert selector.matches({"involvedObject": {"kind": "Pod", "name": "web-1"}})


@pytest.mark.parametrize(
    ("resource", "field", "message"),
    [
        (PODS, "spec.containers", "field label not supported: spec.containers"),
        (NODES, "metadata.namespace", "field label not supported: metadata.namespace"),
        (EVENTS, "regarding.kind", "field label not supported: regarding.kind"),
        (NEW_EVENTS, "involvedObject.kind", "field label not supported: involvedObject.kind"),
        (CSRS, "spec.username", "field label not supported: spec.username"),
        (JOBS, "status.active", 'field label "status.active" not supported for batchv1.Job'),
        (
            REPLICA_SETS,
            "status.replicas",
            '"status.replicas" is not a known field selector: '
            'only "metadata.name", "metadata.namespace"',
        ),
    ],
)
def test_an_unsupported_field_is_refused_in_the_kinds_own_words(
    resource: Resource, field: str, message: str
) -> None:
    assert bad_request(parse_field_selector, f"{field}=x", resource) == message
    assert bad_request(field_value, resource, {}, field) == message


def test_the_first_unsupported_field_in_sorted_order_is_reported() -> None:
    message = bad_request(parse_field_selector, "zz=1,aa=2,status.phase=x", PODS)
    assert message == "field label not supported: aa"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("status.phase", "invalid selector: 'status.phase'; can't understand 'status.phase'"),
        ("a=1,b", "invalid selector: 'a=1,b'; can't understand 'b'"),
        (r"status.phase=a\b", r"invalid field selector: invalid escape sequence: \b"),
        ("status.phase=a\\", "invalid field selector: invalid escape sequence: \\"),
        ("status.phase=a=b", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_malformed_field_selectors_are_bad_requests(text: str, message: str) -> None:
    assert bad_request(parse_field_selector, text, PODS) == message


def test_blanks_are_part_of_the_field_name() -> None:
    message = bad_request(parse_field_selector, "status.phase = Running", PODS)
    assert message == "field label not supported: status.phase "


def test_escaped_values_round_trip() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b\=c\\d", PODS)
    assert selector.requirements[0].value == "a,b=c\\d"
    assert str(selector) == r"metadata.name=a\,b\=c\\d"
    assert escape_field_value("x,y=z\\") == r"x\,y\=z\\"


def test_an_exact_match_can_be_served_from_an_index() -> None:
    selector = parse_field_selector("spec.nodeName=node-a,status.phase!=Failed", PODS)
    assert selector.requires_exact_match("spec.nodeName") == "node-a"
    assert selector.requires_exact_match("status.phase") is None
    assert selector.requires_exact_match("metadata.name") is None


def test_selectable_fields_are_listed_per_resource() -> None:
    assert selectable_fields(NODES) == ["metadata.name", "spec.unschedulable"]
    assert selectable_fields(REPLICA_SETS) == ["metadata.name", "metadata.namespace"]
    assert "status.podIP" in selectable_fields(PODS)


@given(
    st.lists(
        st.tuples(st.sampled_from(selectable_fields(PODS)), st.text(max_size=8), st.booleans()),
        max_size=4,
    )
)
@settings(max_examples=300)
def test_any_field_values_survive_printing_and_parsing(
    terms: list[tuple[str, str, bool]],
) -> None:
    requirements = [FieldRequirement(field, value, negated) for field, value, negated in terms]
    text = ",".join(str(requirement) for requirement in requirements)
    selector = parse_field_selector(text, PODS)
    assert sorted(selector.requirements, key=str) == sorted(requirements, key=str)
    assert parse_field_selector(str(selector), PODS) == selector
