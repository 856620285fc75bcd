"""String formats Kubernetes checks everywhere: DNS names, label keys and values, port
names, environment variable names, config keys, IPs.

Each `is_*` function returns the list of problems with a value, worded exactly as
apimachinery's util/validation words them, so that a message a user pastes into a search
engine finds the real Kubernetes documentation. Callers turn the strings into field
errors at the path they are validating.
"""

from __future__ import annotations

import ipaddress
import re

EMPTY_ERROR = "must be non-empty"

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
_ENV_VAR_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_ENV_VAR_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', "
    "'-', or '.', and must not start with a digit"
)
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
_PERCENT_FMT = "[0-9]+%"
_PERCENT_MSG = "a valid percent string must be a numeric string followed by an ending '%'"
_HEADER_FMT = "[-A-Za-z0-9]+"
_HEADER_MSG = "a valid HTTP header must consist of alphanumeric characters or '-'"

_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL = re.compile(_DNS1035_LABEL_FMT)
_LABEL_KEY = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_ENV_VAR = re.compile(_ENV_VAR_FMT)
_CONFIG_KEY = re.compile(_CONFIG_KEY_FMT)
_PERCENT = re.compile(_PERCENT_FMT)
_HEADER = re.compile(_HEADER_FMT)
_PORT_NAME_CHARS = re.compile("[-a-z0-9]+")

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError, double space after each example comma included."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


def is_dns1123_label(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def is_dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def is_dns1035_label(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1035_LABEL.fullmatch(value):
        errors.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errors


def is_qualified_name(value: str) -> list[str]:
    """A label key: an optional DNS subdomain prefix and '/', then a 63-character name."""
    errors = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part " + EMPTY_ERROR)
        else:
            errors.extend("prefix part " + msg for msg in is_dns1123_subdomain(prefix))
    if not name:
        errors.append("name part " + EMPTY_ERROR)
    elif len(name) > DNS1123_LABEL_MAX:
        errors.append("name part " + max_len_error(DNS1123_LABEL_MAX))
    if not _LABEL_KEY.fullmatch(name):
        errors.append(
            "name part "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def is_label_value(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(
            regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errors


def _chdir_prefix(value: str) -> list[str]:
    """Keys become file names in volumes, so "." and ".." would escape the directory."""
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def is_env_var_name(value: str) -> list[str]:
    errors = []
    if not _ENV_VAR.fullmatch(value):
        errors.append(
            regex_error(_ENV_VAR_MSG, _ENV_VAR_FMT, "my.env-name", "MY_ENV.NAME", "MyEnvName1")
        )
    return errors + _chdir_prefix(value)


def is_config_map_key(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _CONFIG_KEY.fullmatch(value):
        errors.append(
            regex_error(_CONFIG_KEY_MSG, _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name")
        )
    return errors + _chdir_prefix(value)


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    """IANA service names: at most 15 characters, lower case, at least one letter."""
    errors = []
    if len(port) > 15:
        errors.append(max_len_error(15))
    if not _PORT_NAME_CHARS.fullmatch(port):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", port):
        errors.append("must contain at least one letter (a-z)")
    if "--" in port:
        errors.append("must not contain consecutive hyphens")
    if port.startswith("-") or port.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def is_valid_percent(value: str) -> list[str]:
    if _PERCENT.fullmatch(value):
        return []
    return [regex_error(_PERCENT_MSG, _PERCENT_FMT, "1%", "93%")]


def is_http_header_name(value: str) -> list[str]:
    if _HEADER.fullmatch(value):
        return []
    return [regex_error(_HEADER_MSG, _HEADER_FMT, "X-Header-Name")]


def parse_ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IP as Kubernetes' sloppy parser reads it: IPv4 octets may carry leading zeros."""
    octets = value.split(".")
    if len(octets) == 4 and all(o.isascii() and o.isdigit() for o in octets):
        value = ".".join(str(int(o)) for o in octets)
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def is_valid_ip(value: str) -> list[str]:
    if parse_ip(value) is None:
        return ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    return []


def is_valid_cidr(value: str) -> list[str]:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return ["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]
    return []
