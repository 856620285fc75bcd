"""`RestClient`: the Kubernetes REST API over HTTPS, as controllers, the scheduler and the
kubelet use it (client-go's `rest.RESTClient` with its dynamic-client verbs).

Objects are plain JSON dicts. A resource is addressed by its `Resource` entry in
`kubelab.api.resources` (`resource_for("apps/v1", "Deployment")` finds it), plus a
namespace and a name; `request()` reaches anything else (subresources such as scale,
binding, token, log).

Errors form a small tree::

    Exception
     +-- StatusError             the apiserver answered with an error Status (404, 409, ...)
     |    +-- ResourceExpired    410: a resourceVersion is too old; list again
     +-- ServerUnreachable       no answer: refused, reset, timed out, TLS handshake failed

A `StatusError` is built from the Status body the apiserver sends, so its reason and
message are the server's ("pods \"web\" not found"). A non-JSON error body (a proxy's
HTML page) still becomes a `StatusError`, with the reason that the HTTP code implies.

Retries. A request is sent again, after a pause, when sending it again cannot do harm:

* The connection could not be opened (refused, connect timeout): nothing was sent, so
  any verb is retried.
* The connection broke after sending, or the server answered 503: the request may have
  been applied, so only idempotent verbs (GET, HEAD, PUT, DELETE) are retried. A PUT
  carries a resourceVersion and a DELETE names its object, so a repeat that comes after
  a success fails cleanly (409, 404) instead of acting twice; a POST could create twice
  and a JSON patch could apply twice, so they are not retried.
* The server answered 429: it says it did nothing (API priority and fairness rejected the
  request before handling it), so any verb is retried.

The pause is the server's `Retry-After` when it sends one, else an exponential back-off
with jitter. TLS failures are not retried: they are configuration errors.

Rate limiting. Every attempt first takes a token from a client-side bucket (by default
5 requests per second with bursts of 10, client-go's defaults), so that a controller in a
hot loop slows itself down before the apiserver has to.

Watches. `watch()` returns a `Watch`: an iterator of `(type, object)` events read from the
apiserver's newline-delimited JSON stream, ADDED, MODIFIED, DELETED and, when asked for,
BOOKMARK (an object carrying only a newer resourceVersion, so that a quiet watch can
resume from a recent point). An ERROR event is raised as the `StatusError` it carries;
410 becomes `ResourceExpired`, because the caller must list again rather than re-watch.
The iterator ends when the server closes the stream (its timeout) or the connection
drops: the caller re-watches from the last resourceVersion it saw. `Watch.close()` may
be called from another thread to end a blocked read at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any, NamedTuple

import requests
import urllib3.exceptions

from kubelab import fastjson
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource, by_kind
from kubelab.client.clock import REAL_CLOCK, Clock
from kubelab.client.flowcontrol import Backoff, TokenBucket
from kubelab.client.kubeconfig import ClientConfig, KubeconfigError

log = logging.getLogger(__name__)

Object = dict[str, Any]
"""A Kubernetes object (or list, or Status) as decoded JSON."""

DEFAULT_USER_AGENT = (
    f"kubelab-client (python/{sys.version_info.major}.{sys.version_info.minor}; {sys.platform})"
)

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})
"""Methods retried after the request may have reached the server (module docstring)."""

DEFAULT_BACKOFF = Backoff(base=0.5, cap=10.0, jitter=0.5)
"""Pauses between retries when the server does not say how long to wait."""

TOKEN_FILE_REFRESH = 60.0
"""Seconds a token read from a file is used before the file is read again."""

_JSON = "application/json"

# The reason a Status would carry for an HTTP code, for error bodies that are not a Status.
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ServerUnreachable(Exception):
    """The apiserver gave no answer (after the retries allowed); the message says why."""


class ClientClosed(ServerUnreachable):
    """The client was closed: a request it was about to send, or to retry, is given up."""


class ResourceExpired(StatusError):
    """410 Gone: the resourceVersion asked for is older than the apiserver still keeps.

    Events from there on can no longer be replayed, so a watcher must list again (and
    watch from the list's resourceVersion) rather than resume."""


class PatchType(StrEnum):
    """The patch formats of the PATCH verb, named by their content types."""

    JSON = "application/json-patch+json"
    """RFC 6902: a list of operations (add, remove, replace, test, ...)."""
    MERGE = "application/merge-patch+json"
    """RFC 7386: a partial object; lists are replaced whole, null deletes a field."""
    STRATEGIC_MERGE = "application/strategic-merge-patch+json"
    """Kubernetes' merge: lists of named items (containers) are merged by key."""


@dataclass(frozen=True)
class Preconditions:
    """Delete only if the object still has this uid and/or resourceVersion."""

    uid: str | None = None
    resource_version: str | None = None


class WatchEvent(NamedTuple):
    type: str
    """ADDED, MODIFIED, DELETED or BOOKMARK."""
    object: Object


def resource_for(api_version: str, kind: str) -> Resource:
    """The resource that objects of `api_version` and `kind` are, e.g. ("apps/v1",
    "Deployment") -> deployments.apps."""
    resource = by_kind(api_version, kind)
    if resource is None:
        raise ValueError(f"the API has no kind {kind!r} in {api_version!r}")
    return resource


def _reason_for(code: int) -> str:
    return _REASONS.get(code) or ("InternalError" if code >= 500 else "Unknown")


def _error_from_status(
    status: Mapping[str, Any], code: int, retry_after: int | None
) -> StatusError:
    """The error that a Status body describes; `code` is the HTTP code, used if the body
    has none."""
    code = int(status.get("code") or code)
    details = status.get("details") or {}
    if retry_after is None and isinstance(details.get("retryAfterSeconds"), int):
        retry_after = details["retryAfterSeconds"]
    cls = ResourceExpired if code == 410 else StatusError
    return cls(
        code,
        str(status.get("reason") or _reason_for(code)),
        str(status.get("message") or f"the server answered {code}"),
        dict(details),
        retry_after,
    )


def _retry_after(response: requests.Response) -> int | None:
    """The Retry-After header in seconds (the HTTP-date form is not used by apiservers)."""
    value = response.headers.get("Retry-After", "")
    return max(0, int(value)) if value.strip().isdigit() else None


def _error_from_response(response: requests.Response, method: str, path: str) -> StatusError:
    retry_after = _retry_after(response)
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return _error_from_status(body, response.status_code, retry_after)
    # Not from the apiserver itself (a proxy, a load balancer): say what came back.
    snippet = " ".join(response.text.split())[:200]
    message = f"the server answered {response.status_code} {response.reason} to {method} {path}"
    status = {"message": f"{message}: {snippet}" if snippet else message}
    return _error_from_status(status, response.status_code, retry_after)


def _never_sent(exc: requests.RequestException) -> bool:
    """Whether the connection failed before the request went out (safe to send again)."""
    cause: BaseException | None = exc
    while cause is not None:
        # NewConnectionError (refused, unresolvable) is a subclass of ConnectTimeoutError.
        if isinstance(cause, urllib3.exceptions.ConnectTimeoutError):
            return True
        cause = cause.__cause__ or cause.__context__ or getattr(cause, "reason", None)
    return False


def _root_cause(exc: BaseException) -> str:
    """The root cause of a connection failure, e.g. "Connection refused"."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return str(exc)


class Watch:
    """An open watch: iterate for `WatchEvent`s; `close()` ends it from any thread."""

    def __init__(self, response: requests.Response, what: str) -> None:
        self._response = response
        self._what = what
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        try:
            for line in self._response.iter_lines():
                if not line:
                    continue
                event = fastjson.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise _error_from_status(obj, 500, None)
                yield WatchEvent(str(kind), obj)
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            if not self._closed:  # the stream broke: the caller re-watches
                log.debug("watch %s ended: %s", self._what, exc)
        except (ValueError, AttributeError, OSError):
            # What a read interrupted by close() raises depends on where it was cut.
            if not self._closed:
                raise
        finally:
            self._response.close()

    def close(self) -> None:
        """End the watch; a thread blocked reading it sees the iteration end."""
        self._closed = True
        # Shutting the socket down wakes a reader blocked in recv(); closing it would not.
        # Errors mean there is no socket any more: the stream is already over.
        with contextlib.suppress(AttributeError, ValueError, RuntimeError, OSError):
            self._response.raw.shutdown()
        self._response.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _selectors(label_selector: str, field_selector: str) -> dict[str, str]:
    params = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def _write_private(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


class RestClient:
    """A client of one apiserver, described by `config` (see `kubelab.client.kubeconfig`).

    `timeout` bounds each request (connect, then each read). `qps` and `burst` configure
    the client-side rate limit (`qps=None` turns it off). `max_retries` bounds the retries
    described in the module docstring, spaced by `backoff` unless the server says how long
    to wait. Threads may share a client (and its connection pool and rate limit). `close()`
    it, or use it as a context manager, to drop its connections and the temporary files
    holding its TLS material; a request waiting (for a retry or the rate limit) in another
    thread then gives up at once with `ClientClosed`, and so does any later request.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        user_agent: str = DEFAULT_USER_AGENT,
        timeout: float = 30.0,
        qps: float | None = 5.0,
        burst: int = 10,
        max_retries: int = 5,
        backoff: Backoff = DEFAULT_BACKOFF,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.user_agent = user_agent
        self.timeout = timeout
        self.max_retries = max_retries
        self._backoff = backoff
        self._clock = clock
        self._rng = rng or random.Random()
        self._limiter = TokenBucket(qps, burst, clock) if qps is not None else None
        self._session = requests.Session()
        # One connection per concurrent caller: a controller-manager's informers each
        # hold a watch, beyond requests' default pool of 10 per host.
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64)
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)
        self._closed = threading.Event()
        self._token_lock = threading.Lock()
        self._file_token: tuple[str, float] | None = None  # (token, when it was read)
        self._verify: str | bool = not config.insecure_skip_tls_verify
        self._cert: tuple[str, str] | None = None
        self._remove_tls_files = self._write_tls_files()

    def _write_tls_files(self) -> weakref.finalize[Any, Any] | None:
        """Write the CA and client certificate to files, which is what requests takes.

        They live in a fresh directory only this user can enter (mkdtemp makes it 0700),
        each file 0600, and are removed by `close()` or, failing that, when the client
        is garbage-collected or the interpreter exits.
        """
        c = self.config
        if c.ca_data is None and c.client_cert_data is None:
            return None
        directory = tempfile.mkdtemp(prefix="kubelab-client-")
        remove = weakref.finalize(self, shutil.rmtree, directory, ignore_errors=True)
        if c.ca_data is not None:
            self._verify = _write_private(directory, "ca.crt", c.ca_data)
        if c.client_cert_data is not None and c.client_key_data is not None:
            self._cert = (
                _write_private(directory, "client.crt", c.client_cert_data),
                _write_private(directory, "client.key", c.client_key_data),
            )
        return remove

    def use_client_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Authenticate with another client certificate from now on (a kubelet's rotated
        one): new connections present it, and the idle ones, which presented the old
        one, are dropped; a request under way (a watch) keeps its connection until it
        ends. Only for a client that authenticates with a client certificate."""
        if self._cert is None:
            raise ValueError("this client has no client certificate to replace")
        directory = os.path.dirname(self._cert[0])
        stamp = uuid.uuid4().hex[:8]
        new = (
            _write_private(directory, f"client-{stamp}.crt", cert_pem),
            _write_private(directory, f"client-{stamp}.key", key_pem),
        )
        # The old files stay (until close) for a connection being made right now.
        self._cert = new
        self.config = dataclasses.replace(
            self.config, client_cert_data=cert_pem, client_key_data=key_pem
        )
        for adapter in self._session.adapters.values():
            if isinstance(adapter, requests.adapters.HTTPAdapter):
                adapter.poolmanager.clear()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Drop the connections and TLS files; wake the requests waiting to be retried
        (they raise `ClientClosed`)."""
        self._closed.set()
        self._session.close()
        if self._remove_tls_files is not None:
            self._remove_tls_files()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------

    def _bearer_token(self) -> str | None:
        c = self.config
        if c.token is not None or c.token_file is None:
            return c.token
        with self._token_lock:
            now = self._clock.now()
            if self._file_token is None or now - self._file_token[1] >= TOKEN_FILE_REFRESH:
                try:
                    self._file_token = (c.token_file.read_text().strip(), now)
                except OSError as exc:
                    if self._file_token is None:
                        raise KubeconfigError(
                            f"cannot read token file {c.token_file} ({c.source}): {exc.strerror}"
                        ) from exc
                    log.warning("cannot re-read token file %s, using the last token", exc)
            return self._file_token[0]

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        accept: str = _JSON,
        stream: bool = False,
        read_timeout: float | None = None,
    ) -> requests.Response:
        """Send one request, with the retries of the module docstring; return a 2xx or 3xx
        response, or raise `StatusError` / `ServerUnreachable`."""
        headers = {"User-Agent": self.user_agent, "Accept": accept}
        token = self._bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = fastjson.dumps(body)
        url = self.config.server + path
        what = f"{method} {path}"
        attempt = 0
        while True:
            if self._limiter is not None:
                self._limiter.accept(self._closed)
            if self._closed.is_set():
                raise ClientClosed(f"{what}: the client is closed")
            try:
                response = self._session.request(
                    method,
                    url,
                    params=params,
                    data=data,
                    headers=headers,
                    timeout=(self.timeout, read_timeout if stream else self.timeout),
                    # Per request: requests lets REQUESTS_CA_BUNDLE override the session's.
                    verify=self._verify,
                    cert=self._cert,
                    stream=stream,
                    allow_redirects=False,
                )
            except requests.exceptions.SSLError as exc:
                source = self.config.source or "the configuration"
                raise ServerUnreachable(
                    f"TLS with {self.config.server} failed ({_root_cause(exc)}); check the "
                    f"certificate authority and client certificate of {source}"
                ) from exc
            except (requests.ConnectionError, requests.Timeout) as exc:
                retryable = method in IDEMPOTENT_METHODS or _never_sent(exc)
                if not retryable or attempt == self.max_retries:
                    maybe = "" if retryable else "; it may or may not have been applied"
                    raise ServerUnreachable(
                        f"{what} to {self.config.server} failed after {attempt + 1} "
                        f"attempt(s): {_root_cause(exc)}{maybe}"
                    ) from exc
                delay = self._backoff.delay(attempt, self._rng)
                log.info("%s failed (%s), retrying in %.2fs", what, _root_cause(exc), delay)
            else:
                if response.status_code < 400:
                    return response
                error = _error_from_response(response, method, path)
                response.close()
                code = error.code
                retryable = code == 429 or (code == 503 and method in IDEMPOTENT_METHODS)
                if not retryable or attempt == self.max_retries:
                    raise error
                delay = (
                    error.retry_after
                    if error.retry_after is not None
                    else self._backoff.delay(attempt, self._rng)
                )
                log.info("%s answered %d (%s), retrying in %.2fs", what, code, error, delay)
            if self._clock.sleep(delay, self._closed):
                raise ClientClosed(f"{what}: the client was closed before retrying")
            attempt += 1

    def _object(self, method: str, path: str, **kwargs: Any) -> Object:
        response = self._send(method, path, **kwargs)
        try:
            body = fastjson.loads(response.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise _error_from_status(
                {"message": f"{method} {path}: the answer is not a JSON object"}, 500, None
            )
        return body

    @staticmethod
    def _path(resource: Resource, namespace: str, name: str, subresource: str = "") -> str:
        if resource.namespaced and name and not namespace:
            raise ValueError(f"{resource.kind} {name!r}: a namespace is needed")
        path = resource.path(namespace, name)
        return f"{path}/{subresource}" if subresource else path

    @staticmethod
    def _where(body: Mapping[str, Any]) -> tuple[str, str]:
        """(namespace, name) from an object's metadata."""
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise ValueError("the object has no metadata.name")
        return str(meta.get("namespace") or ""), str(name)

    # -- verbs ---------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str = "") -> Object:
        return self._object("GET", self._path(resource, namespace, name))

    def list(
        self,
        resource: Resource,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int | None = None,
        continue_token: str = "",
        resource_version: str | None = None,
    ) -> Object:
        """A list (kind `<Kind>List`) of the objects in `namespace` ("" means all), with
        `metadata.resourceVersion` to watch from and, when `limit` cut it short,
        `metadata.continue` to pass as `continue_token` for the next page."""
        params = _selectors(label_selector, field_selector)
        if limit:
            params["limit"] = str(limit)
        if continue_token:
            params["continue"] = continue_token
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        return self._object("GET", self._path(resource, namespace, ""), params=params)

    def create(self, resource: Resource, body: Mapping[str, Any], namespace: str = "") -> Object:
        """POST `body`; the namespace defaults to the one in its metadata."""
        namespace = namespace or str((body.get("metadata") or {}).get("namespace") or "")
        if resource.namespaced and not namespace:
            raise ValueError(f"creating a {resource.kind} needs a namespace")
        return self._object("POST", self._path(resource, namespace, ""), body=body)

    def update(self, resource: Resource, body: Mapping[str, Any]) -> Object:
        """PUT `body` in place of the object it names; with `metadata.resourceVersion` set,
        the apiserver refuses (409 Conflict) if the object changed since it was read."""
        namespace, name = self._where(body)
        return self._object("PUT", self._path(resource, namespace, name), body=body)

    def update_status(self, resource: Resource, body: Mapping[str, Any]) -> Object:
        """PUT `body` to the status subresource: only its `status` is stored."""
        namespace, name = self._where(body)
        return self._object("PUT", self._path(resource, namespace, name, "status"), body=body)

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str = "",
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> Object:
        path = self._path(resource, namespace, name, subresource)
        return self._object("PATCH", path, body=patch, content_type=patch_type.value)

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str = "",
        *,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Preconditions | None = None,
    ) -> Object:
        """Delete an object. `propagation_policy` is Foreground, Background or Orphan.

        The answer is the object itself while finalizers or a grace period keep it
        around, else a Status.
        """
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions is not None:
            options["preconditions"] = {
                k: v
                for k, v in (
                    ("uid", preconditions.uid),
                    ("resourceVersion", preconditions.resource_version),
                )
                if v is not None
            }
        return self._object("DELETE", self._path(resource, namespace, name), body=options)

    def watch(
        self,
        resource: Resource,
        namespace: str = "",
        *,
        resource_version: str = "",
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> Watch:
        """Watch changes after `resource_version` (from a list; "" means: the current
        objects as ADDED events, then changes). With `timeout_seconds` the server ends
        the stream after that long, and the client gives up on a silent one shortly
        after; without it, the stream may stay open (and silent) indefinitely."""
        params = _selectors(label_selector, field_selector)
        params.update(watch="1", resourceVersion=resource_version)
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        read_timeout = None
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
            read_timeout = timeout_seconds + self.timeout
        path = self._path(resource, namespace, "")
        response = self._send("GET", path, params=params, stream=True, read_timeout=read_timeout)
        return Watch(response, path)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        accept: str = _JSON,
    ) -> Any:
        """Any other call, e.g. POST .../pods/web/binding, GET .../deployments/web/scale or
        GET .../pods/web/log: the decoded JSON answer, or its text when it is not JSON."""
        response = self._send(
            method.upper(), path, params=params, body=body, content_type=content_type, accept=accept
        )
        if response.headers.get("Content-Type", "").startswith(_JSON):
            return fastjson.loads(response.content)
        return response.text
