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

Transport. Every call but a watch goes over kept-alive connections of
`kubelab.storeclient.http` (a request in one send, the answer parsed by httptools): through
requests a small call cost the client about five times the CPU, which the scheduler (two
POSTs per pod) and hundreds of hollow kubelets (a Lease PUT each every 10 s) paid on every
pod and heartbeat. Watches, a body read as it comes, stay on requests. Proxies
(HTTPS_PROXY) are not used: the apiserver is reached directly.

Tracing (docs/architecture.md, "Tracing"). Every request carries the W3C `traceparent`
of the current span (OpenTelemetry's propagators, `opentelemetry.propagate.inject`), so
the apiserver's spans of a request join the trace of the work that sent it, and the
object it writes keeps that trace for whoever reacts to the change: the controller's
reconcile that creates a ReplicaSet, the scheduler's bind. With a `tracer`, each write
(create, update, patch, delete) is also a span of its own, `Client.create` etc., with
the object it wrote (`kubelab.tracing.object_attributes`), the parent of the apiserver's
spans; without one (the default) a write costs no span.

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
import http
import logging
import os
import random
import shutil
import ssl
import sys
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any, NamedTuple, Protocol, TypeVar
from urllib.parse import urlencode

import httptools
import requests
import urllib3.exceptions
from opentelemetry import propagate, trace

from kubelab import fastjson, tracing
from kubelab.api.errors import StatusError
from kubelab.api.resources import Resource, by_kind
from kubelab.client.clock import REAL_CLOCK, Clock
from kubelab.client.flowcontrol import Backoff, TokenBucket
from kubelab.client.kubeconfig import ClientConfig, KubeconfigError
from kubelab.storeclient import http as kept_alive

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

# A write span's attributes besides the object's (OpenTelemetry's HTTP conventions).
HTTP_METHOD = "http.request.method"
HTTP_STATUS_CODE = "http.response.status_code"
URL_PATH = "url.path"

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


class _TLSFailed(Exception):
    """An attempt's TLS handshake failed: a configuration error, not retried."""


class _NotSent(Exception):
    """An attempt failed before the request went out: safe to send again."""


class _MaybeSent(Exception):
    """An attempt failed after the request may have reached the server."""


class _HasStatus(Protocol):
    @property
    def status_code(self) -> int: ...


_R = TypeVar("_R", bound=_HasStatus)


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


@dataclass(frozen=True)
class Answer:
    """A whole (not streamed) response: status code, headers (lower-cased names), body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


def _reason_phrase(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""


def _error_from_response(answer: Answer, method: str, path: str) -> StatusError:
    value = answer.headers.get("retry-after", "")
    # The HTTP-date form of Retry-After is not used by apiservers.
    retry_after = max(0, int(value)) if value.strip().isdigit() else None
    try:
        body = fastjson.loads(answer.content)
    except ValueError:
        body = None
    code = answer.status_code
    if isinstance(body, dict) and body.get("kind") == "Status":
        return _error_from_status(body, code, retry_after)
    # Not from the apiserver itself (a proxy, a load balancer): say what came back.
    snippet = " ".join(answer.text.split())[:200]
    message = f"the server answered {code} {_reason_phrase(code)} to {method} {path}"
    status = {"message": f"{message}: {snippet}" if snippet else message}
    return _error_from_status(status, code, retry_after)


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
    `tracer` makes each write a span (module docstring).
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
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.config = config
        self._tracer = tracer
        self.user_agent = user_agent
        self.timeout = timeout
        self.max_retries = max_retries
        self._backoff = backoff
        self._clock = clock
        self._rng = rng or random.Random()
        self._limiter = TokenBucket(qps, burst, clock) if qps is not None else None
        # Watches through requests (a streamed body), one connection each: a
        # controller-manager's informers each hold one, beyond requests' default pool of
        # 10 per host.
        self._session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64)
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)
        self._closed = threading.Event()
        self._token_lock = threading.Lock()
        self._file_token: tuple[str, float] | None = None  # (token, when it was read)
        self._verify: str | bool = not config.insecure_skip_tls_verify
        self._cert: tuple[str, str] | None = None
        self._remove_tls_files = self._write_tls_files()
        # Every other call on kept-alive connections of our own: through requests a small
        # request cost about three times the CPU (docs/benchmarks.md, scheduler).
        self._pool = kept_alive.Pool(config.server, timeout, self._tls_context())

    def _tls_context(self) -> ssl.SSLContext | None:
        """The TLS settings of `config` (and the current client certificate) for the
        kept-alive connections; None for plain http."""
        if not self.config.server.startswith("https://"):
            return None
        if self.config.insecure_skip_tls_verify:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.config.ca_data is not None:
            context = ssl.create_default_context(cadata=self.config.ca_data.decode("ascii"))
        else:
            context = ssl.create_default_context()
        if self._cert is not None:
            context.load_cert_chain(*self._cert)
        return context

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
        self._pool.context = self._tls_context()
        self._pool.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Drop the connections and TLS files; wake the requests waiting to be retried
        (they raise `ClientClosed`)."""
        self._closed.set()
        self._session.close()
        self._pool.close()
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

    def _headers(self, content_type: str | None, accept: str = _JSON) -> dict[str, str]:
        headers = {"User-Agent": self.user_agent, "Accept": accept}
        token = self._bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content_type is not None:
            headers["Content-Type"] = content_type
        propagate.inject(headers)
        return headers

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        accept: str = _JSON,
    ) -> Answer:
        """Send one request on a kept-alive connection, with the retries of the module
        docstring; return a 2xx or 3xx answer, or raise `StatusError` /
        `ServerUnreachable`."""
        data = b"" if body is None else fastjson.dumps(body)
        target = f"{path}?{urlencode(params)}" if params else path
        head = "".join(
            f"{k}: {v}\r\n"
            for k, v in self._headers(None if body is None else content_type, accept).items()
        ).encode("latin-1")

        def attempt() -> Answer:
            try:
                code, headers, content = self._pool.exchange(method, target, data, head)
            except kept_alive.ConnectFailed as exc:
                if isinstance(exc.__cause__, ssl.SSLError):
                    raise _TLSFailed(kept_alive.describe_failure(exc.__cause__)) from exc
                raise _NotSent(str(exc)) from exc
            except (OSError, httptools.HttpParserError) as exc:
                raise _MaybeSent(kept_alive.describe_failure(exc)) from exc
            return Answer(code, headers, content)

        return self._retrying(method, path, attempt, lambda answer: answer)

    def _send_streaming(
        self, method: str, path: str, params: Mapping[str, str], read_timeout: float | None
    ) -> requests.Response:
        """`_send` for a response read as it comes (a watch), through requests."""

        def attempt() -> requests.Response:
            try:
                return self._session.request(
                    method,
                    self.config.server + path,
                    params=params,
                    headers=self._headers(None),
                    timeout=(self.timeout, read_timeout),
                    # Per request: requests lets REQUESTS_CA_BUNDLE override the session's.
                    verify=self._verify,
                    cert=self._cert,
                    stream=True,
                    allow_redirects=False,
                )
            except requests.exceptions.SSLError as exc:
                raise _TLSFailed(_root_cause(exc)) from exc
            except (requests.ConnectionError, requests.Timeout) as exc:
                failure = _NotSent if _never_sent(exc) else _MaybeSent
                raise failure(_root_cause(exc)) from exc

        def answer(response: requests.Response) -> Answer:
            answer = Answer(response.status_code, response.headers, response.content)
            response.close()
            return answer

        return self._retrying(method, path, attempt, answer)

    def _retrying(
        self,
        method: str,
        path: str,
        attempt: Callable[[], _R],
        answer_of: Callable[[_R], Answer],
    ) -> _R:
        """Run `attempt` until it gets an answer below 400, or one that may not be retried
        (module docstring); `answer_of` reads an error response whole."""
        what = f"{method} {path}"
        tries = 0
        while True:
            if self._limiter is not None:
                self._limiter.accept(self._closed)
            if self._closed.is_set():
                raise ClientClosed(f"{what}: the client is closed")
            try:
                response = attempt()
            except _TLSFailed as exc:
                source = self.config.source or "the configuration"
                raise ServerUnreachable(
                    f"TLS with {self.config.server} failed ({exc}); check the "
                    f"certificate authority and client certificate of {source}"
                ) from exc.__cause__
            except (_NotSent, _MaybeSent) as exc:
                retryable = method in IDEMPOTENT_METHODS or isinstance(exc, _NotSent)
                if not retryable or tries == self.max_retries:
                    maybe = "" if retryable else "; it may or may not have been applied"
                    raise ServerUnreachable(
                        f"{what} to {self.config.server} failed after {tries + 1} "
                        f"attempt(s): {exc}{maybe}"
                    ) from exc.__cause__
                delay = self._backoff.delay(tries, self._rng)
                log.info("%s failed (%s), retrying in %.2fs", what, exc, delay)
            else:
                code = response.status_code
                if code < 400:
                    return response
                error = _error_from_response(answer_of(response), method, path)
                retryable = code == 429 or (code == 503 and method in IDEMPOTENT_METHODS)
                if not retryable or tries == self.max_retries:
                    raise error
                delay = (
                    error.retry_after
                    if error.retry_after is not None
                    else self._backoff.delay(tries, self._rng)
                )
                log.info("%s answered %d (%s), retrying in %.2fs", what, code, error, delay)
            if self._clock.sleep(delay, self._closed):
                raise ClientClosed(f"{what}: the client was closed before retrying")
            tries += 1

    def _object(self, method: str, path: str, **kwargs: Any) -> Object:
        answer = self._send(method, path, **kwargs)
        try:
            body = fastjson.loads(answer.content)
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

    def _write(
        self,
        verb: str,
        resource: Resource,
        namespace: str,
        name: str,
        method: str,
        path: str,
        *,
        body: Any,
        content_type: str = _JSON,
    ) -> Object:
        """A write, as the span `Client.<verb>` when the client has a tracer (module
        docstring): the object named by the request, then as the answer has it (its uid
        and new resourceVersion)."""
        if self._tracer is None:
            return self._object(method, path, body=body, content_type=content_type)
        with self._tracer.start_as_current_span(
            f"Client.{verb}", kind=trace.SpanKind.CLIENT
        ) as span:
            recording = span.is_recording()
            if recording:
                named = {
                    tracing.OBJECT_KIND: resource.kind,
                    tracing.OBJECT_NAMESPACE: namespace,
                    tracing.OBJECT_NAME: name,
                    HTTP_METHOD: method,
                    URL_PATH: path,
                }
                span.set_attributes({key: value for key, value in named.items() if value})
            try:
                answer = self._object(method, path, body=body, content_type=content_type)
            except StatusError as exc:
                if recording:
                    span.set_attribute(HTTP_STATUS_CODE, exc.code)
                raise
            if recording and answer.get("kind") == resource.kind:
                span.set_attributes(tracing.object_attributes(answer))
            return answer

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
        path = self._path(resource, namespace, "")
        name = str((body.get("metadata") or {}).get("name") or "")
        return self._write("create", resource, namespace, name, "POST", path, body=body)

    def update(self, resource: Resource, body: Mapping[str, Any]) -> Object:
        """PUT `body` in place of the object it names; with `metadata.resourceVersion` set,
        the apiserver refuses (409 Conflict) if the object changed since it was read."""
        namespace, name = self._where(body)
        path = self._path(resource, namespace, name)
        return self._write("update", resource, namespace, name, "PUT", path, body=body)

    def update_status(self, resource: Resource, body: Mapping[str, Any]) -> Object:
        """PUT `body` to the status subresource: only its `status` is stored."""
        namespace, name = self._where(body)
        path = self._path(resource, namespace, name, "status")
        return self._write("update", resource, namespace, name, "PUT", path, body=body)

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
        return self._write(
            "patch",
            resource,
            namespace,
            name,
            "PATCH",
            path,
            body=patch,
            content_type=patch_type.value,
        )

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
        path = self._path(resource, namespace, name)
        return self._write("delete", resource, namespace, name, "DELETE", path, body=options)

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
        return Watch(self._send_streaming("GET", path, params, read_timeout), path)

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
        answer = self._send(
            method.upper(), path, params=params, body=body, content_type=content_type, accept=accept
        )
        if answer.headers.get("content-type", "").startswith(_JSON):
            return fastjson.loads(answer.content)
        return answer.text
