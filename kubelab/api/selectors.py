"""Label selectors and field selectors, parsed, printed and matched as Kubernetes does.

Label selectors come in three spellings and all end up as one `Selector`:

* the string syntax of `kubectl get -l` and `?labelSelector=` (`parse_label_selector`):
  `app=web`, `tier!=db`, `env in (prod,qa)`, `track notin (canary)`, `gpu`, `!gpu`,
  `replicas>2`, joined by commas (AND), blanks allowed between tokens;
* the structured `metav1.LabelSelector` of Deployments, ReplicaSets, DaemonSets, Jobs
  (`selector_from_label_selector`): `matchLabels` plus `matchExpressions`;
* the plain map of Services and ReplicationControllers (`selector_from_set`).

Absent and empty are not the same thing, and the controllers depend on the difference:
an absent `metav1.LabelSelector` (None) selects nothing (`NOTHING`), an empty one selects
everything (`EVERYTHING`). The plain-map form cannot say "nothing": an empty or absent
map selects everything, so a Service without a selector must be skipped by its caller
(the endpoints controller does) before any matching happens.

The string parser mirrors apimachinery's lexer and recursive-descent parser token for
token, so the same strings are accepted, the same quirks hold (`x in ()` means "x is the
empty string", `a=` means "a is empty", `in` and `notin` are ordinary words where a value
is expected) and rejections carry Kubernetes' wording: "unable to parse requirement: ..."
for a bad requirement, "found ',', expected: ..." for bad structure. Keys and values are
checked with the label rules object validation uses (validation.formats).

Field selectors (`?fieldSelector=`) are far smaller: `field=value`, `field==value`,
`field!=value`, joined by commas, with `\\`, `\\,` and `\\=` as the only escapes in a
value and no blanks trimmed. What differs is per resource: each kind accepts only the
fields its registry indexes, and an unknown one is refused with that kind's own
message. `field_value` reads such a field off a stored object the way the registry
does: a missing field reads as "" (or the zero value of a number or boolean field),
booleans as "true"/"false".

Every rejection is a `StatusError` 400 BadRequest, the status the apiserver answers a
bad `?labelSelector=` or `?fieldSelector=` with.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

from kubelab.api.errors import bad_request, invalid
from kubelab.api.resources import Resource
from kubelab.api.validation.formats import is_label_value, is_qualified_name

# ---------------------------------------------------------------------------------------
# Label selectors


class Operator(StrEnum):
    """A requirement's operator; the values are apimachinery's `selection.Operator`."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SET_OPERATORS = (Operator.IN, Operator.NOT_IN)
_NUMERIC_OPERATORS = (Operator.GREATER_THAN, Operator.LESS_THAN)
_UNARY_OPERATORS = (Operator.EXISTS, Operator.DOES_NOT_EXIST)
# How each operator reads in the string syntax; unary ones print the key alone.
_SPELLING = {
    Operator.IN: " in ",
    Operator.NOT_IN: " notin ",
    Operator.EQUALS: "=",
    Operator.DOUBLE_EQUALS: "==",
    Operator.NOT_EQUALS: "!=",
    Operator.GREATER_THAN: ">",
    Operator.LESS_THAN: "<",
}
_INT64 = re.compile(r"[+-]?[0-9]+")


def _int64(text: str) -> int | None:
    """The value of a decimal int64 as Go's strconv.ParseInt reads it, else None (Python's
    int() would also take blanks and underscores, which Kubernetes refuses)."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclass(frozen=True)
class Requirement:
    """One condition on one label key; `values` is sorted and without repeats."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether `labels` satisfy this condition. Negative operators (`!=`, `notin`)
        hold when the key is absent; the numeric ones need the label to be an integer."""
        if self.operator is Operator.EXISTS:
            return self.key in labels
        if self.operator is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        if self.operator in (Operator.NOT_EQUALS, Operator.NOT_IN):
            return labels.get(self.key) not in self.values
        if self.key not in labels:
            return False
        if self.operator in _NUMERIC_OPERATORS:
            have, bound = _int64(labels[self.key]), _int64(self.values[0])
            if have is None or bound is None:
                return False
            return have > bound if self.operator is Operator.GREATER_THAN else have < bound
        return labels[self.key] in self.values

    def __str__(self) -> str:
        if self.operator is Operator.EXISTS:
            return self.key
        if self.operator is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(self.values)
        if self.operator in _SET_OPERATORS:
            values = f"({values})"
        return f"{self.key}{_SPELLING[self.operator]}{values}"


@dataclass(frozen=True)
class Selector:
    """Requirements that must all hold (sorted by key), or the selector of nothing."""

    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.selects_nothing:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    def empty(self) -> bool:
        """True when the selector does not narrow anything down (it matches everything);
        `NOTHING` is not empty, although it prints as "" too."""
        return not self.selects_nothing and not self.requirements

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


EVERYTHING = Selector()
NOTHING = Selector(selects_nothing=True)


class _SelectorError(Exception):
    """A rejection on its way out, before it is worded as a 400 (the parser prefixes the
    errors of a single requirement with "unable to parse requirement: ")."""


def _aggregate(messages: list[str]) -> str:
    """Several errors in one message, as apimachinery's aggregate prints them."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _check_parsed_key(key: str) -> None:
    """The parser checks a key as soon as it reads it; apimachinery does so with no field
    path, hence the "<nil>" its message starts with."""
    if errors := is_qualified_name(key):
        raise _SelectorError(invalid("<nil>", key, "; ".join(errors)).message())


def _requirement(key: str, operator: Operator, values: list[str]) -> Requirement:
    """A validated requirement, rejected with every problem at once the way
    apimachinery's NewRequirement reports them (paths "key", "values[0][<key>]"...).

    The value count of `=` and `>` needs no check: neither the parser nor a
    LabelSelector can give them anything but one value."""
    messages: list[str] = []
    if errors := is_qualified_name(key):
        messages.append(invalid("key", key, "; ".join(errors)).message())
    if operator in _SET_OPERATORS and not values:
        detail = "for 'in', 'notin' operators, values set can't be empty"
        messages.append(invalid("values", values, detail).message())
    elif operator in _UNARY_OPERATORS and values:
        detail = "values set must be empty for exists and does not exist"
        messages.append(invalid("values", values, detail).message())
    for index, value in enumerate(values):
        if operator in _NUMERIC_OPERATORS and _int64(value) is None:
            detail = "for 'Gt', 'Lt' operators, the value must be an integer"
            messages.append(invalid(f"values[{index}]", value, detail).message())
    for index, value in enumerate(values):
        if errors := is_label_value(value):
            path = f"values[{index}][{key}]"
            messages.append(invalid(path, value, "; ".join(errors)).message())
    if messages:
        raise _SelectorError(_aggregate(messages))
    return Requirement(key, operator, tuple(sorted(set(values))))


def _selector(requirements: list[Requirement]) -> Selector:
    # A stable sort keeps two conditions on one key in the order they were written, so
    # printing and parsing again gives the same selector back.
    return Selector(tuple(sorted(requirements, key=lambda requirement: requirement.key)))


class _Token(Enum):
    END = "end of string"
    OPEN = "("
    CLOSE = ")"
    COMMA = ","
    NOT = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER = ">"
    LESS = "<"
    IN = "in"
    NOT_IN = "notin"
    WORD = "identifier"


_BLANKS = frozenset(" \t\r\n")
_SYMBOL_CHARACTERS = frozenset("=!(),><")
_SYMBOLS = {
    token.value: token
    for token in _Token
    if token.value and all(character in _SYMBOL_CHARACTERS for character in token.value)
}
_KEYWORDS = {"in": _Token.IN, "notin": _Token.NOT_IN}
_BINARY_OPERATORS = {
    _Token.IN: Operator.IN,
    _Token.NOT_IN: Operator.NOT_IN,
    _Token.EQUALS: Operator.EQUALS,
    _Token.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Token.NOT_EQUALS: Operator.NOT_EQUALS,
    _Token.GREATER: Operator.GREATER_THAN,
    _Token.LESS: Operator.LESS_THAN,
}
_EXPECTED_OPERATOR = ", ".join(operator.value for operator in _BINARY_OPERATORS.values())


def _tokens(text: str) -> list[tuple[_Token, str]]:
    """Split a selector into tokens. Symbols are read greedily ("!=" rather than "!" and
    "="); anything else up to a blank or a symbol is a word, "in" and "notin" keywords."""
    tokens: list[tuple[_Token, str]] = []
    position, end = 0, len(text)
    while True:
        while position < end and text[position] in _BLANKS:
            position += 1
        if position == end:
            tokens.append((_Token.END, ""))
            return tokens
        start = position
        if text[position] in _SYMBOL_CHARACTERS:
            position += 1
            while position < end and text[start : position + 1] in _SYMBOLS:
                position += 1
            tokens.append((_SYMBOLS[text[start:position]], text[start:position]))
            continue
        while (
            position < end
            and text[position] not in _BLANKS
            and text[position] not in _SYMBOL_CHARACTERS
        ):
            position += 1
        word = text[start:position]
        tokens.append((_KEYWORDS.get(word, _Token.WORD), word))


class _LabelParser:
    """Recursive descent over the tokens. Where a key or a value is expected, "in" and
    "notin" are plain words (`in in (in)` is valid); only in operator position are they
    keywords."""

    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._position = 0

    def _peek(self, *, words: bool = True) -> tuple[_Token, str]:
        token, literal = self._tokens[min(self._position, len(self._tokens) - 1)]
        if words and token in (_Token.IN, _Token.NOT_IN):
            token = _Token.WORD
        return token, literal

    def _take(self, *, words: bool = True) -> tuple[_Token, str]:
        item = self._peek(words=words)
        self._position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self._peek()
            if token is _Token.END:
                return requirements
            if token not in (_Token.WORD, _Token.NOT):
                raise _SelectorError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self._requirement())
            except _SelectorError as error:
                raise _SelectorError(f"unable to parse requirement: {error}") from None
            token, literal = self._take()
            if token is _Token.END:
                return requirements
            if token is not _Token.COMMA:
                raise _SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            token, literal = self._peek()
            if token not in (_Token.WORD, _Token.NOT):
                raise _SelectorError(f"found '{literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        key, operator = self._key()
        if operator is not None:
            return _requirement(key, operator, [])
        token, literal = self._take(words=False)
        operator = _BINARY_OPERATORS.get(token)
        if operator is None:
            raise _SelectorError(f"found '{literal}', expected: {_EXPECTED_OPERATOR}")
        values = self._value_set() if operator in _SET_OPERATORS else self._exact_value()
        return _requirement(key, operator, sorted(values))

    def _key(self) -> tuple[str, Operator | None]:
        """The key, and the operator when it is already known: `!key` is DoesNotExist, and
        a key followed by nothing or a comma is Exists."""
        operator: Operator | None = None
        token, literal = self._take()
        if token is _Token.NOT:
            operator = Operator.DOES_NOT_EXIST
            token, literal = self._take()
        if token is not _Token.WORD:
            raise _SelectorError(f"found '{literal}', expected: identifier")
        _check_parsed_key(literal)
        if operator is None and self._peek()[0] in (_Token.END, _Token.COMMA):
            operator = Operator.EXISTS
        return literal, operator

    def _value_set(self) -> set[str]:
        token, literal = self._take()
        if token is not _Token.OPEN:
            raise _SelectorError(f"found '{literal}' expected: '('")
        token, literal = self._peek()
        if token is _Token.CLOSE:
            self._take()
            return {""}
        if token not in (_Token.WORD, _Token.COMMA):
            raise _SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self._value_list()
        self._take()  # the ")" the list stopped at
        return values

    def _value_list(self) -> set[str]:
        """Comma-separated values, any of them possibly empty: "(a,,b)" and "(,a)" both
        hold "", as does "(a,)"."""
        values: set[str] = set()
        while True:
            token, literal = self._take()
            if token is _Token.WORD:
                values.add(literal)
                token, literal = self._peek()
                if token is _Token.CLOSE:
                    return values
                if token is not _Token.COMMA:
                    raise _SelectorError(f"found '{literal}', expected: ',' or ')'")
            elif token is _Token.COMMA:
                if not values:
                    values.add("")
                token, _ = self._peek()
                if token is _Token.CLOSE:
                    values.add("")
                    return values
                if token is _Token.COMMA:
                    values.add("")
            else:
                raise _SelectorError(f"found '{literal}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        token, _ = self._peek()
        if token in (_Token.END, _Token.COMMA):
            return {""}
        token, literal = self._take()
        if token is not _Token.WORD:
            raise _SelectorError(f"found '{literal}', expected: identifier")
        return {literal}


def parse_label_selector(text: str) -> Selector:
    """Parse the `?labelSelector=` / `kubectl -l` syntax; "" selects everything.

    Raises StatusError 400 with Kubernetes' message for anything it would refuse."""
    try:
        return _selector(_LabelParser(text).parse())
    except _SelectorError as error:
        raise bad_request(str(error)) from None


_EXPRESSION_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def selector_from_label_selector(label_selector: Mapping[str, Any] | None) -> Selector:
    """The selector a `metav1.LabelSelector` stands for: None selects nothing (a controller
    with no selector adopts no pods), {} or no terms select everything.

    Raises StatusError 400 with apimachinery's message when a key, a value or an operator
    is invalid (object validation normally catches these before they are stored)."""
    if label_selector is None:
        return NOTHING
    match_labels: Mapping[str, str] = label_selector.get("matchLabels") or {}
    expressions: list[Mapping[str, Any]] = label_selector.get("matchExpressions") or []
    if not match_labels and not expressions:
        return EVERYTHING
    requirements: list[Requirement] = []
    try:
        for key, value in sorted(match_labels.items()):
            requirements.append(_requirement(key, Operator.EQUALS, [value]))
        for expression in expressions:
            name = expression.get("operator", "")
            operator = _EXPRESSION_OPERATORS.get(name)
            if operator is None:
                raise _SelectorError(f"{json.dumps(name)} is not a valid label selector operator")
            values = list(expression.get("values") or [])
            requirements.append(_requirement(expression.get("key", ""), operator, values))
    except _SelectorError as error:
        raise bad_request(str(error)) from None
    return _selector(requirements)


def selector_from_set(labels: Mapping[str, str] | None) -> Selector:
    """The selector of a plain label map (a Service's or a ReplicationController's
    `spec.selector`): every pair must be present. None and {} select everything.

    Not validated, as apimachinery's SelectorFromSet is not: the map was validated with
    the object that carries it."""
    if not labels:
        return EVERYTHING
    return Selector(
        tuple(Requirement(key, Operator.EQUALS, (value,)) for key, value in sorted(labels.items()))
    )


# ---------------------------------------------------------------------------------------
# Field selectors

FieldGetter = Callable[[Mapping[str, Any]], str]


def lookup_path(obj: Any, *keys: str) -> Any:
    """The value under `keys` in nested JSON objects, or None when a step is missing or
    not an object (lists are not walked into)."""
    node = obj
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _text(value: Any, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _at(path: str, default: str = "") -> FieldGetter:
    """A getter for the field at a dotted JSON path; `default` is the zero value Go would
    print for a missing field ("false" for a boolean, "0" for a count)."""
    keys = tuple(path.split("."))
    return lambda obj: _text(lookup_path(obj, *keys), default)


def _first_of(*paths: str) -> FieldGetter:
    """A getter for the first non-empty of several fields: an event's "source" is its
    source component, else the controller that reported it."""
    getters = [_at(path) for path in paths]

    def first(obj: Mapping[str, Any]) -> str:
        return next((text for getter in getters if (text := getter(obj))), "")

    return first


def _pod_ip(pod: Mapping[str, Any]) -> str:
    """A pod's primary IP: the first of `status.podIPs`, else the older `status.podIP`."""
    ips = lookup_path(pod, "status", "podIPs")
    if isinstance(ips, list) and ips:
        return _text(lookup_path(ips[0], "ip"), "")
    return _text(lookup_path(pod, "status", "podIP"), "")


def _not_supported(field: str) -> str:
    return f"field label not supported: {field}"


def _not_known(field: str) -> str:
    return (
        f"{json.dumps(field)} is not a known field selector: "
        'only "metadata.name", "metadata.namespace"'
    )


def _not_supported_for_job(field: str) -> str:
    return f"field label {json.dumps(field)} not supported for batchv1.Job"


@dataclass(frozen=True)
class _SelectableFields:
    """The fields one resource can be selected by, and how it words a refusal (each kind
    registers its own conversion function in Kubernetes, hence three wordings)."""

    getters: Mapping[str, FieldGetter]
    refuse: Callable[[str], str] = _not_supported


def _fields(
    *paths: str,
    special: Mapping[str, FieldGetter] | None = None,
    refuse: Callable[[str], str] = _not_supported,
) -> _SelectableFields:
    """Fields read straight from their JSON path, plus `special` ones that are not."""
    getters: dict[str, FieldGetter] = {path: _at(path) for path in paths}
    getters.update(special or {})
    return _SelectableFields(getters, refuse)


_META = ("metadata.name", "metadata.namespace")
_INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

# Keyed by Resource.group_resource. Nodes and namespaces have no metadata.namespace to
# select by, nor CertificateSigningRequests; ReplicaSets and the other apps/v1 kinds take
# only the two metadata fields (apps/v1 registers no conversion for status.replicas).
_SELECTABLE: dict[str, _SelectableFields] = {
    "pods": _fields(
        *_META,
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.nominatedNodeName",
        special={
            "spec.hostNetwork": _at("spec.hostNetwork", "false"),
            "status.podIP": _pod_ip,
            # What clients before v1.0 sent for spec.nodeName; still accepted.
            "spec.host": _at("spec.nodeName"),
        },
    ),
    "nodes": _fields(
        "metadata.name", special={"spec.unschedulable": _at("spec.unschedulable", "false")}
    ),
    "namespaces": _fields("metadata.name", "status.phase"),
    "services": _fields(*_META, "spec.clusterIP", "spec.type"),
    "secrets": _fields(*_META, "type"),
    "replicationcontrollers": _fields(
        *_META, special={"status.replicas": _at("status.replicas", "0")}
    ),
    "events": _fields(
        *_META,
        *(f"involvedObject.{name}" for name in _INVOLVED),
        "reason",
        "reportingComponent",
        "type",
        special={"source": _first_of("source.component", "reportingComponent")},
    ),
    "events.events.k8s.io": _fields(
        *_META,
        *(f"regarding.{name}" for name in _INVOLVED),
        "reason",
        "reportingController",
        "type",
        special={"source": _first_of("deprecatedSource.component", "reportingController")},
    ),
    "jobs.batch": _fields(
        *_META,
        special={"status.successful": _at("status.succeeded", "0")},
        refuse=_not_supported_for_job,
    ),
    "certificatesigningrequests.certificates.k8s.io": _fields("metadata.name", "spec.signerName"),
}
_METADATA_ONLY = _fields(*_META, refuse=_not_known)


def selectable_fields(resource: Resource) -> list[str]:
    """The field labels `?fieldSelector=` accepts for `resource`, sorted."""
    return sorted(_SELECTABLE.get(resource.group_resource, _METADATA_ONLY).getters)


def _getter(resource: Resource, field: str) -> FieldGetter:
    fields = _SELECTABLE.get(resource.group_resource, _METADATA_ONLY)
    getter = fields.getters.get(field)
    if getter is None:
        raise bad_request(fields.refuse(field))
    return getter


def field_value(resource: Resource, obj: Mapping[str, Any], field: str) -> str:
    """The text a field selector compares for `field` of `obj`: "" for a missing field
    (the zero value for a number or a boolean), "true"/"false" for booleans.

    Raises StatusError 400 if `resource` cannot be selected by `field`."""
    return _getter(resource, field)(obj)


def escape_field_value(value: str) -> str:
    """Escape a literal for use as a field selector value (`\\`, `,` and `=`)."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(text: str) -> str:
    value: list[str] = []
    escaping = False
    for character in text:
        if escaping:
            if character not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{character}")
            value.append(character)
            escaping = False
        elif character == "\\":
            escaping = True
        elif character in ",=":
            # Kubernetes prints the character's code point here (Go's %v of a rune).
            raise bad_request(
                f"invalid field selector: unescaped character in value: {ord(character)}"
            )
        else:
            value.append(character)
    if escaping:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(value)


def _split_terms(text: str) -> list[str]:
    """Split on the commas that are not escaped; the escapes stay for the unescaping."""
    terms: list[str] = []
    start, escaping = 0, False
    for index, character in enumerate(text):
        if escaping:
            escaping = False
        elif character == "\\":
            escaping = True
        elif character == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """(field, operator, raw value) at the first operator in `term`. The field is never
    unescaped, so the first "!=", "==" or "=" is always the operator."""
    for index in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


@dataclass(frozen=True)
class FieldRequirement:
    """`field` equal to `value`, or unequal when `negated`."""

    field: str
    value: str
    negated: bool = False

    def __str__(self) -> str:
        operator = "!=" if self.negated else "="
        return f"{self.field}{operator}{escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """Field requirements that must all hold for objects of `resource`."""

    resource: Resource
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(
            (field_value(self.resource, obj, requirement.field) == requirement.value)
            != requirement.negated
            for requirement in self.requirements
        )

    def empty(self) -> bool:
        return not self.requirements

    def requires_exact_match(self, field: str) -> str | None:
        """The value `field` must equal for a match, if the selector pins it (the kubelet
        lists its pods with `spec.nodeName=<node>`, which an apiserver can serve from an
        index instead of a scan)."""
        return next(
            (r.value for r in self.requirements if r.field == field and not r.negated), None
        )

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def parse_field_selector(text: str, resource: Resource) -> FieldSelector:
    """Parse `?fieldSelector=` for `resource`; "" selects everything.

    The requirements are kept sorted by their printed form, so `str()` is canonical: it
    parses back to an equal selector. Raises StatusError 400, with Kubernetes' wording, for
    a term without an operator, a bad escape, or a field `resource` cannot be selected by
    (checked after the whole selector parsed, in sorted order, as Kubernetes checks)."""
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        parts = _split_term(term)
        if parts is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, raw = parts
        requirements.append(FieldRequirement(field, _unescape_field_value(raw), operator == "!="))
    for requirement in requirements:
        _getter(resource, requirement.field)
    return FieldSelector(resource, tuple(sorted(requirements, key=str)))
