"""The generic registry: create, get, list, watch, update, patch and delete for every
stored resource, following the Kubernetes API conventions.

One code path serves all resources; per-kind differences live in the resource's
strategy (`strategies`: what the server owns, how the object is validated, how its
deletion goes), `kubelab.api.defaults` (the schema's defaults) and the admission chain
(cluster policy). The order on a write is Kubernetes':

    decode -> server-owned fields (strategy) -> defaults -> mutating admission
           -> validation (422 lists every bad field) -> validating admission
           -> dryRun? return : store (compare-and-swap on resourceVersion)

Reads come from the watch cache: a list without a resourceVersion is consistent (the
cache first catches up with the store's current revision), ``resourceVersion=0`` takes
whatever the cache has, and a paginated list (``limit``) reads the store itself so that
its ``continue`` token names a store revision (410 once that revision is compacted).
Each read says on the request span which it was (`traces.read_source`).

Every write that stores a new desired state keeps the trace context of the request that
made it in the object's annotations (`kubelab.tracing.inject`: the request's span, or
none, which removes a stale one): creates, updates, patches and applies of the main
resource, the subresources that change the desired state (binding, scale) and the mark
of a graceful deletion, so that the component reacting to the watch event continues the
writer's trace. A write through the status subresource keeps the stored context
(`UpdateStrategy.stamps_trace`): status writes report what happened rather than ask
for anything, a controller makes them every few seconds, and each would start a new
trace and cut the object's chain to the write that asked for its desired state. The
annotations take no part in deciding whether a write changed anything: a write whose
only change would be a new trace context is a no-op (no new resourceVersion), and a
dry run returns the stored context, so `kubectl diff` shows no difference for it. The
server stamps them after recording `metadata.managedFields`: nobody owns them.

Deletion: an object with finalizers, or a Pod bound to a node, is not removed but marked
(``deletionTimestamp``); it goes when its last finalizer is removed (or the kubelet
confirms with a zero grace period). ``propagationPolicy`` Foreground and Orphan add the
``foregroundDeletion`` and ``orphan`` finalizers the garbage collector acts on.
"""

from __future__ import annotations

import copy
import datetime
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Protocol, TypeVar

import yaml

from controlplane.apiserver import managedfields, protobuf
from kubelab import fastjson, storeclient, tracing
from kubelab.api import errors, patch, selectors
from kubelab.api.errors import FieldError
from kubelab.api.resources import Resource

from . import fieldvalidation, traces
from .served import ServedAPI
from .storage import (
    InvalidContinue,
    KeyExists,
    KeyNotFound,
    ListResult,
    Object,
    RevisionConflict,
    RevisionReader,
    Storage,
)
from .strategies import Strategy, now_rfc3339
from .watchcache import (
    BOOKMARK,
    ERROR,
    CacheNotReady,
    Cacher,
    Event,
    Filter,
    TooOldResourceVersion,
    Watcher,
)

log = logging.getLogger("kubelab.apiserver.registry")
_T = TypeVar("_T")

# Finalizers the garbage collector acts on (kubectl delete --cascade=foreground|orphan).
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


@dataclass
class Attributes:
    """What admission plugins see of a write (Kubernetes' admission.Attributes)."""

    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    resource: Resource
    subresource: str
    namespace: str
    name: str
    object: Object | None
    old: Object | None
    user: Any
    dry_run: bool


class Admission:
    """The admission chain's interface as the registry sees it (see `admission`)."""

    def admit(self, attrs: Attributes) -> None:
        """Mutate attrs.object (defaults of cluster policy) or raise StatusError."""

    def validate(self, attrs: Attributes) -> None:
        """Refuse with a StatusError; must not mutate."""


@dataclass
class ListOptions:
    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    timeout_seconds: int | None = None
    allow_bookmarks: bool = False
    send_initial_events: bool = False

    @classmethod
    def parse(cls, args: dict[str, str]) -> ListOptions:
        def integer(name: str) -> int | None:
            raw = args.get(name, "")
            if raw == "":
                return None
            try:
                return int(raw)
            except ValueError:
                raise errors.bad_request(
                    f"{name}: invalid value {raw!r}: must be an integer"
                ) from None

        match = args.get("resourceVersionMatch", "")
        if match not in ("", "Exact", "NotOlderThan"):
            raise errors.bad_request(
                f'resourceVersionMatch: Unsupported value: "{match}": supported values: '
                '"Exact", "NotOlderThan"'
            )
        rv = args.get("resourceVersion", "")
        if rv and not rv.isdigit():
            raise errors.bad_request(
                f'resourceVersion: Invalid value: "{rv}": must be an '
                "unsigned integer; get a fresh one with a list"
            )
        initial = args.get("sendInitialEvents", "") in ("1", "true")
        if match and not rv and not initial:
            raise errors.bad_request(
                "resourceVersionMatch is forbidden unless resourceVersion is provided"
            )
        return cls(
            label_selector=args.get("labelSelector", ""),
            field_selector=args.get("fieldSelector", ""),
            limit=max(0, integer("limit") or 0),
            continue_token=args.get("continue", ""),
            resource_version=rv,
            resource_version_match=match,
            timeout_seconds=integer("timeoutSeconds"),
            allow_bookmarks=args.get("allowWatchBookmarks", "") in ("1", "true"),
            send_initial_events=initial,
        )


@dataclass
class DeleteOptions:
    grace_period: int | None = None
    propagation: str = ""
    precondition_uid: str = ""
    precondition_rv: str = ""
    dry_run: bool = False

    @classmethod
    def parse(cls, args: dict[str, str], body: Object | None) -> DeleteOptions:
        body = body or {}
        grace = body.get("gracePeriodSeconds", args.get("gracePeriodSeconds"))
        policy = body.get("propagationPolicy", args.get("propagationPolicy", ""))
        if body.get("orphanDependents") is True or args.get("orphanDependents") == "true":
            policy = policy or "Orphan"
        if policy not in ("", "Orphan", "Background", "Foreground"):
            raise errors.bad_request(
                f'propagationPolicy: Unsupported value: "{policy}": supported values: '
                '"Foreground", "Background", "Orphan"'
            )
        pre = body.get("preconditions") or {}
        if not isinstance(pre, dict):
            raise errors.bad_request("preconditions must be an object")
        dry = body.get("dryRun") or args.get("dryRun")
        try:
            grace_value = None if grace in (None, "") else int(grace)
        except (TypeError, ValueError):
            raise errors.bad_request("gracePeriodSeconds must be an integer") from None
        return cls(
            grace_value,
            policy,
            str(pre.get("uid") or ""),
            str(pre.get("resourceVersion") or ""),
            parse_dry_run(dry),
        )


def _semantics(resource_version: str) -> str:
    """The semantics of a read's resourceVersion (`traces.read_source`)."""
    if resource_version == "":
        return "most-recent"
    return "any" if resource_version == "0" else "not-older-than"


def parse_dry_run(value: Any) -> bool:
    if not value:
        return False
    values = value if isinstance(value, list) else [value]
    for v in values:
        if v != "All":
            raise errors.bad_request(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return True


def decode_body(data: bytes, content_type: str) -> Object:
    """A request body as JSON, YAML or Kubernetes protobuf (kubectl's typed commands send
    protobuf); anything else is a clear 400/415."""
    media = content_type.split(";")[0].strip().lower()
    if media == protobuf.PROTOBUF:
        try:
            return protobuf.decode(data)
        except protobuf.UnsupportedProtobuf as exc:
            raise errors.StatusError(415, "UnsupportedMediaType", str(exc)) from None
        except protobuf.ProtobufError as exc:
            raise errors.bad_request(f"the protobuf request body is not valid: {exc}") from None
    if media in ("", "application/json", "*/*"):
        duplicated = False

        def pairs(items: list[tuple[str, Any]]) -> Object:
            nonlocal duplicated
            obj = dict(items)
            duplicated = duplicated or len(obj) != len(items)
            return obj

        try:
            obj = json.loads(data or b"null", object_pairs_hook=pairs)
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None
        if duplicated:
            fieldvalidation.note_duplicates(data)
    elif media in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            obj = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"the request body is not valid YAML: {exc}") from None
    else:
        raise errors.unsupported_media_type(content_type)
    if not isinstance(obj, dict):
        raise errors.bad_request(
            "the request body must be a JSON object with apiVersion, kind and metadata"
        )
    return obj


_PATCH_REASONS = {400: "BadRequest", 415: "UnsupportedMediaType", 422: "Invalid"}


def patch_error(exc: patch.PatchError) -> errors.StatusError:
    """A patch that cannot apply, with the code the patch module chose (400/415/422)."""
    return errors.StatusError(exc.code, _PATCH_REASONS.get(exc.code, "BadRequest"), str(exc))


class EventStream(Protocol):
    """What a watch handler streams: watch events, then `close()`."""

    def __iter__(self) -> Iterator[Object]: ...

    def close(self) -> None: ...


class WatchStream:
    """One client's watch: the replayed or synthetic first events, then live ones, with
    bookmarks when the client asked for them; `close()` releases the cache watcher
    whether or not the stream was ever read."""

    def __init__(
        self,
        cacher: Cacher,
        r: Resource,
        watcher: Watcher,
        first: list[Event],
        revision: int,
        opts: ListOptions,
        deadline: float,
        bookmark_every: float,
    ) -> None:
        self.cacher, self.r, self.watcher, self.first = cacher, r, watcher, first
        self.revision, self.opts = revision, opts
        self.deadline, self.bookmark_every = deadline, bookmark_every
        self.sent = time.monotonic()
        """When the stream last sent something (an event or a bookmark)."""

    def __iter__(self) -> Iterator[Object]:
        opts, w = self.opts, self.watcher
        last = max([e.revision for e in self.first], default=self.revision)
        for ev in self.first:
            yield {"type": ev.type, "object": ev.object}
        if opts.send_initial_events and opts.allow_bookmarks:
            last = max(last, self.revision)
            yield _bookmark(self.r, last, initial_end=True)
        # A silent watch sleeps until its deadline or its next bookmark is due, not on a
        # fixed tick: an idle cluster holds a hundred watches per apiserver, and waking
        # each once a second was most of an idle apiserver's CPU.
        for item in self.cacher.events(w, timeout=self._quiet_for):
            now = time.monotonic()
            if now >= self.deadline:
                return
            if item is not None:
                last, self.sent = item.revision, now
                yield {"type": item.type, "object": item.object}
            elif opts.allow_bookmarks and now - self.sent >= self.bookmark_every:
                current = self.cacher.revision
                if current > last and not w.closed:
                    last, self.sent = current, now
                    yield _bookmark(self.r, last)
        if w.reason.startswith("resource version too old"):
            yield {"type": ERROR, "object": errors.gone(w.reason).status()}

    def _quiet_for(self) -> float:
        """Seconds the stream may wait for an event before it must act: end at the
        deadline, or (if the client asked for bookmarks) send one `bookmark_every` after
        the last thing it sent, checked at most once a second."""
        now = time.monotonic()
        wait = self.deadline - now
        if self.opts.allow_bookmarks:
            wait = min(wait, max(1.0, self.bookmark_every - (now - self.sent)))
        return max(0.0, wait)

    def close(self) -> None:
        self.cacher.unwatch(self.r, self.watcher)


class ExpiredStream:
    """The watch of a resourceVersion older than the cache's history, as Kubernetes'
    watch cache answers it: the request succeeds (HTTP 200) and the stream carries one
    ERROR event, a 410 Expired Status, then ends. Clients (client-go's reflector,
    `kubectl get -w`) read the 410 from the event and list again."""

    def __init__(self, error: errors.StatusError) -> None:
        self.error = error

    def __iter__(self) -> Iterator[Object]:
        yield {"type": ERROR, "object": self.error.status()}

    def close(self) -> None:
        """Nothing to release: no cache watcher was taken."""


def _bookmark(r: Resource, revision: int, initial_end: bool = False) -> Object:
    meta: Object = {"resourceVersion": str(revision)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {
        "type": BOOKMARK,
        "object": {"kind": r.kind, "apiVersion": r.api_version, "metadata": meta},
    }


class UpdateStrategy:
    """What a write through one REST path of a resource may change, and how the result is
    judged: the main resource's (this class), its status subresource's (`STATUS`), or
    another subresource's (a pod's binding, in `subresources.pod`). Kubernetes gives each
    subresource's REST object its own update strategy (StatusREST keeps everything but
    the status as stored); so does the registry's write path here, which never asks
    which subresource it serves. The kind's own rules come from its `Strategy`."""

    subresource: ClassVar[str] = ""
    """The subresource's name, as admission sees the write ("" for the main resource)."""
    stamps_trace: ClassVar[bool] = True
    """Whether a write keeps its request's trace context on the object (module
    docstring): the writes of a desired state do, status writes do not."""

    def prepare_for_update(self, strategy: Strategy, new: Object, old: Object) -> Object:
        """The object to store when a client sent `new` over the stored `old`."""
        strategy.prepare_for_update(new, old)
        return new

    def validate_update(self, strategy: Strategy, new: Object, old: Object) -> list[FieldError]:
        """Every problem of `new` as an update of `old`."""
        return strategy.validate_update(new, old)


class StatusUpdateStrategy(UpdateStrategy):
    """The status subresource: only the status moves (`Strategy.prepare_for_status_update`)."""

    subresource = "status"
    stamps_trace = False

    def prepare_for_update(self, strategy: Strategy, new: Object, old: Object) -> Object:
        return strategy.prepare_for_status_update(new, old)


MAIN = UpdateStrategy()
STATUS = StatusUpdateStrategy()


def patcher(kind: str, body: bytes, content_type: str) -> Callable[[Object], Object]:
    """The change a PATCH request makes to an object of `kind` (415 for a patch type the
    API does not take, 400/415/422 from applying it)."""
    media = content_type.split(";")[0].strip().lower()
    if media not in patch.PATCH_TYPES:
        raise errors.unsupported_media_type(content_type)

    def patched(old: Object) -> Object:
        try:
            return patch.apply_patch(kind, old, body, media)
        except patch.PatchError as exc:
            raise patch_error(exc) from None

    return patched


class Registry:
    """REST operations over the store and the watch cache (see the module doc)."""

    def __init__(
        self,
        storage: Storage,
        cacher: Cacher,
        api: ServedAPI,
        admission: Admission | None = None,
        allocator: Callable[[Attributes], tuple[list[tuple[str, bytes]], list[str]]] | None = None,
        traced: tracing.Tracing = tracing.DISABLED,
    ) -> None:
        self.storage = storage
        self.tracing = traced
        self.cacher = cacher
        # The apiserver's resources' rules: strategies, field-validation schemas.
        self.api = api
        # Consistent reads from the cache share their store round trips.
        self.revisions = RevisionReader(storage.current_revision)
        self.admission = admission or Admission()
        # Keys a write of a resource whose strategy `allocates` must also create /
        # release in the same transaction (a Service's cluster IP and node ports); see
        # `services`.
        self.allocator = allocator
        # Seconds a watch that asked for bookmarks may stay silent before it gets one:
        # a minute, as Kubernetes' watch cache (its defaultBookmarkFrequency); tests of
        # clients shorten it (`lab.testenv`).
        self.bookmark_every = 60.0

    # -- reads ---------------------------------------------------------------------------

    def get(self, r: Resource, namespace: str, name: str, resource_version: str = "") -> Object:
        """One object from the watch cache: at once with resourceVersion "0", else once
        the cache has caught up with the store's current revision (consistent, like a
        quorum read) or with the given one (not older than it)."""
        wanted: int | None = None
        if resource_version == "":
            wanted = self._store_call(self.revisions.current)
        elif resource_version != "0":
            if not resource_version.isdigit():
                raise errors.bad_request(
                    f'resourceVersion: Invalid value: "{resource_version}": must be an '
                    "unsigned integer"
                )
            wanted = int(resource_version)
        if wanted is not None:
            self._wait_fresh(wanted)
        traces.read_source(traces.WATCH_CACHE, _semantics(resource_version), wanted)
        obj = self.cacher.get(r, r.key(namespace, name))
        if obj is None:
            raise errors.not_found(r.plural, name, r.group)
        return obj

    def list_objects(
        self, r: Resource, namespace: str, opts: ListOptions, matches: Filter | None = None
    ) -> Object:
        """`matches` replaces the selectors of `opts` (a converted view filters its own
        form of the objects)."""
        index_value = self._index_value(r, opts, matches)
        matches = matches or self.matcher(r, opts)
        prefix = r.collection_prefix(namespace)
        exact = opts.resource_version_match == "Exact"
        if (opts.limit and opts.resource_version != "0") or opts.continue_token or exact:
            revision = int(opts.resource_version or 0) if exact else 0
            try:
                res = self._store_call(
                    lambda: self.storage.list_objects(
                        prefix,
                        limit=opts.limit,
                        continue_token=opts.continue_token,
                        revision=revision,
                        keep=matches,
                    )
                )
            except InvalidContinue as exc:
                raise errors.bad_request(str(exc)) from None
            semantics = (
                "continue"
                if opts.continue_token
                else "exact"
                if exact
                else _semantics(opts.resource_version)
            )
            traces.read_source(traces.STORE, semantics)
            return self._list_body(r, res)
        wanted: int | None = None
        if opts.resource_version != "0":
            wanted = (
                int(opts.resource_version)
                if opts.resource_version
                else self._store_call(self.revisions.current)
            )
            self._wait_fresh(wanted)
        traces.read_source(traces.WATCH_CACHE, _semantics(opts.resource_version), wanted)
        items, revision = self.cacher.list_objects(r, prefix, matches, index_value)
        return self._list_body(r, ListResult(items, revision))

    def _list_body(self, r: Resource, res: ListResult) -> Object:
        meta: Object = {"resourceVersion": str(res.revision)}
        if res.continue_token:
            meta["continue"] = res.continue_token
            if res.remaining is not None:
                meta["remainingItemCount"] = res.remaining
        return {
            "kind": r.list_kind,
            "apiVersion": r.api_version,
            "metadata": meta,
            "items": res.items,
        }

    def watch(
        self,
        r: Resource,
        namespace: str,
        opts: ListOptions,
        matches: Filter | None = None,
    ) -> WatchStream | ExpiredStream:
        """Watch events as Kubernetes sends them: {"type": ..., "object": ...}."""
        index_value = self._index_value(r, opts, matches)
        matches = matches or self.matcher(r, opts)
        prefix = r.collection_prefix(namespace)
        since: int | None = None
        if opts.resource_version not in ("", "0") and not opts.send_initial_events:
            since = int(opts.resource_version)
            self._wait_fresh(since)
        elif opts.resource_version == "":
            self._wait_fresh(self._store_call(self.revisions.current))
        try:
            watcher, first, revision = self.cacher.watch(r, prefix, matches, since, index_value)
        except TooOldResourceVersion as exc:
            return ExpiredStream(errors.gone(str(exc)))
        timeout = opts.timeout_seconds if opts.timeout_seconds else 1800
        return WatchStream(
            self.cacher,
            r,
            watcher,
            first,
            revision,
            opts,
            time.monotonic() + timeout,
            self.bookmark_every,
        )

    # -- writes --------------------------------------------------------------------------

    def create(
        self,
        r: Resource,
        namespace: str,
        obj: Object,
        user: Any,
        dry_run: bool = False,
    ) -> Object:
        """POST. The creator is not recorded in ``metadata.managedFields`` (Kubernetes
        records it as an Update owner): on this machine that cost every create about a
        sixth more CPU and doubled the time of a large LIST, for the one thing it gives,
        conflicts between a creator and a later applier. Updates, patches and applies
        are recorded (`_write`, `apply`)."""
        strategy = self.api.strategies.for_resource(r)
        self._check_type(r, obj)
        self.api.field_schemas.prune(r, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        self._check_namespace(r, namespace, meta)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = strategy.generate_name(str(meta["generateName"]))
        name = str(meta.get("name") or "")
        if not name:
            raise errors.invalid_object(
                r.kind,
                "",
                [errors.required("metadata.name", "name or generateName is required")],
                r.group,
            )
        strategy.prepare_for_create(obj, user)
        strategy.default(obj)
        attrs = Attributes("CREATE", r, "", namespace, name, obj, None, user, dry_run)
        self.admission.admit(attrs)
        with traces.step(self.tracing, traces.VALIDATION_SECONDS):
            self._refuse(r, obj, strategy.validate(obj))
        self.admission.validate(attrs)
        if not dry_run:
            tracing.inject(meta)
        key = r.key(namespace, name)
        # Randomly picked addresses (a Service's cluster IP) may collide: pick again from
        # the object as it was before allocation (only an allocation changes it).
        allocator = self.allocator if strategy.allocates else None
        unallocated = copy.deepcopy(obj) if strategy.allocates else obj
        for attempt in range(5):
            candidate = copy.deepcopy(unallocated) if unallocated is not obj else obj
            attrs.object = candidate
            acquire, _ = allocator(attrs) if allocator else ([], [])
            if dry_run:
                return candidate
            try:
                return self._store_call(partial(self.storage.create, key, candidate, acquire))
            except KeyExists as exc:
                if exc.key == key:
                    raise errors.already_exists(r.plural, name, r.group) from None
                if attempt == 4:
                    raise errors.invalid_object(
                        r.kind,
                        name,
                        [
                            errors.invalid(
                                "spec",
                                exc.key.rsplit("/", 1)[-1],
                                "provided value is already allocated",
                            )
                        ],
                        r.group,
                    ) from None
        raise AssertionError("unreachable")

    def update(
        self,
        r: Resource,
        namespace: str,
        name: str,
        obj: Object,
        user: Any,
        update: UpdateStrategy = MAIN,
        dry_run: bool = False,
        manager: str = "",
    ) -> Object:
        """PUT: replace the object (or what `update`, a subresource's strategy, lets it
        change: `STATUS` takes only the status); `manager`: see `_write`."""
        self._check_type(r, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        self._check_namespace(r, namespace, meta)
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        meta["name"] = name
        wanted = str(meta.get("resourceVersion") or "")
        key = r.key(namespace, name)
        current = None
        cached = self._cached(r, key) if wanted else None
        # The cache holding the version the client read (a Lease renewal, a controller's
        # update): the write's revision check decides, no read of the store first.
        if cached is None or cached["metadata"]["resourceVersion"] != wanted:
            current = self._store_call(lambda: self.storage.get(key))
            if current is None:
                raise errors.not_found(r.plural, name, r.group)
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise errors.conflict(r.plural, name, r.group)
        return self._write(
            r,
            namespace,
            name,
            lambda _old: fastjson.copy(obj),
            user,
            update,
            dry_run,
            current=current,
            retry=not wanted,
            manager=manager,
        )

    def patch(
        self,
        r: Resource,
        namespace: str,
        name: str,
        body: bytes,
        content_type: str,
        user: Any,
        update: UpdateStrategy = MAIN,
        dry_run: bool = False,
        manager: str = "",
    ) -> Object:
        """PATCH (JSON merge, strategic merge, JSON patch) of what `update` lets change;
        `manager`: see `_write`."""
        patched = patcher(self.api.strategies.for_resource(r).patch_kind, body, content_type)
        return self._write(r, namespace, name, patched, user, update, dry_run, manager=manager)

    def apply(
        self,
        r: Resource,
        namespace: str,
        name: str,
        body: bytes,
        user: Any,
        manager: str,
        dry_run: bool = False,
        force: bool = False,
    ) -> Object:
        """Server-side apply (``kubectl apply --server-side``) by field manager `manager`.

        The applied configuration creates the object, or is merged into it as a strategic
        merge patch (a merge patch for kinds without patch metadata). The fields it sets
        become the manager's Apply entry in ``metadata.managedFields``
        (`controlplane.apiserver.managedfields`). Setting a field another manager owns to another
        value is a 409 conflict naming them, unless `force` takes the field over. A field
        the manager applied before and applies no more is removed, unless another
        manager owns it too."""
        config = decode_body(body, "application/yaml")
        meta = config.get("metadata")
        if not isinstance(meta, dict) or meta.get("name", name) != name:
            raise errors.bad_request(
                "the applied object must have metadata.name equal to the name in the URL"
            )
        if "managedFields" in meta:
            raise errors.bad_request(
                "metadata.managedFields must be nil: the applied configuration names the "
                "fields it sets; remove managedFields from it"
            )
        self._check_type(r, config)
        patch_kind = self.api.strategies.for_resource(r).patch_kind
        applied = managedfields.field_set(patch_kind, config)
        now = now_rfc3339()
        mine = managedfields.entry(manager, "Apply", r.api_version, now, applied)

        def applied_to(old: Object) -> Object:
            entries = old["metadata"].get("managedFields")
            clashes = managedfields.conflicts(entries, manager, applied, config, old)
            if clashes and not force:
                raise _apply_conflict(r, clashes)
            try:
                merged = patch.strategic_merge_patch(patch_kind, old, config)
            except patch.UnsupportedPatchError:
                merged = patch.merge_patch(old, config)
            except patch.PatchError as exc:
                raise patch_error(exc) from None
            before, previous = managedfields.find(entries, manager, "Apply")
            taken = {p for paths in clashes.values() for p in paths}
            others = managedfields.without(entries, taken, now, replacing=before)
            kept = set().union(*(fields for _, fields in managedfields.owned(others)))
            # Whole list elements first: their fields' paths find them by key.
            for path in sorted(previous - applied - kept, key=lambda p: p[-1] != "."):
                managedfields.remove(merged, path)
            merged["metadata"]["managedFields"] = [*others, mine]
            return merged

        # Update or, when there is nothing to update, create: one read of the store, the
        # update's own, rather than a look first.
        try:
            return self._write(r, namespace, name, applied_to, user, MAIN, dry_run)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
        meta["managedFields"] = [mine]
        return self.create(r, namespace, config, user, dry_run)

    def _cached(self, r: Resource, key: str) -> Object | None:
        """The watch cache's copy of `key` (it may lag the store), or None: a first guess
        for a read-modify-write, which the write's revision check verifies."""
        try:
            return self.cacher.get(r, key)
        except (KeyError, CacheNotReady):
            return None

    def update_with(
        self,
        r: Resource,
        namespace: str,
        name: str,
        change: Callable[[Object], Object],
        user: Any,
        update: UpdateStrategy = MAIN,
        dry_run: bool = False,
        manager: str = "",
    ) -> Object:
        """A change computed from the current object (a binding, a patch of a converted
        view) through the full write path."""
        return self._write(r, namespace, name, change, user, update, dry_run, manager=manager)

    def _write(
        self,
        r: Resource,
        namespace: str,
        name: str,
        change: Callable[[Object], Object],
        user: Any,
        update: UpdateStrategy,
        dry_run: bool,
        current: Object | None = None,
        retry: bool = True,
        manager: str = "",
    ) -> Object:
        """Read-modify-write with the full write path; conflicts retry from the winner's
        value unless the client pinned a resourceVersion (then 409 is the answer).

        With a field `manager`, a change of the main resource is recorded: the manager
        owns the fields it changed, and other managers no longer do
        (``metadata.managedFields``, operation Update)."""
        key = r.key(namespace, name)
        strategy = self.api.strategies.for_resource(r)
        allocator = self.allocator if strategy.allocates else None
        side: list[tuple[list[tuple[str, bytes]], list[str]]] = [([], [])]

        def mutate(old: Object) -> Object | None:
            new = change(fastjson.copy(old))
            if not isinstance(new, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            self._check_type(r, new)
            self.api.field_schemas.prune(r, new)
            pinned = str(new.get("metadata", {}).get("resourceVersion") or "")
            if pinned and pinned != old["metadata"]["resourceVersion"]:
                raise errors.conflict(r.plural, name, r.group)
            new.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
            new = update.prepare_for_update(strategy, new, old)
            # Compared and recorded without a new trace context, stamped last.
            tracing.carry_over(new["metadata"], old["metadata"])
            strategy.default(new)
            attrs = Attributes(
                "UPDATE", r, update.subresource, namespace, name, new, old, user, dry_run
            )
            self.admission.admit(attrs)
            with traces.step(self.tracing, traces.VALIDATION_SECONDS):
                self._refuse(r, new, update.validate_update(strategy, new, old))
            self.admission.validate(attrs)
            if manager and not update.subresource:
                changed, removed = managedfields.changes(strategy.patch_kind, old, new)
                if changed or removed:
                    new["metadata"]["managedFields"] = managedfields.record_update(
                        new["metadata"].get("managedFields"),
                        manager,
                        r.api_version,
                        now_rfc3339(),
                        changed,
                        removed,
                    )
            if allocator is not None:
                side[0] = allocator(attrs)
            if new == old:
                return None
            if update.stamps_trace and not dry_run:
                tracing.inject(new["metadata"])
            return new

        if dry_run:
            old = current or self._store_call(lambda: self.storage.get(key))
            if old is None:
                raise errors.not_found(r.plural, name, r.group)
            return mutate(old) or old
        guess = None if current is not None else self._cached(r, key)
        try:
            stored, _ = self._store_call(
                lambda: self.storage.guaranteed_update(
                    key,
                    mutate,
                    current=current,
                    guess=guess,
                    retries=16 if retry else 1,
                    side_keys=lambda: side[0],
                )
            )
        except KeyNotFound:
            raise errors.not_found(r.plural, name, r.group) from None
        except RevisionConflict:
            raise errors.conflict(r.plural, name, r.group) from None
        except KeyExists as exc:
            raise errors.invalid_object(
                r.kind,
                name,
                [
                    errors.invalid(
                        "spec", exc.key.rsplit("/", 1)[-1], "provided value is already allocated"
                    )
                ],
                r.group,
            ) from None
        if self._ready_to_go(r, stored):
            # The last finalizer is gone: the deletion it held back can complete.
            return self._finalize(r, stored)
        return stored

    def delete(
        self,
        r: Resource,
        namespace: str,
        name: str,
        opts: DeleteOptions,
        user: Any,
        attempts: int = 5,
    ) -> Object:
        key = r.key(namespace, name)
        current = self._store_call(lambda: self.storage.get(key))
        if current is None:
            raise errors.not_found(r.plural, name, r.group)
        meta = current["metadata"]
        if opts.precondition_uid and opts.precondition_uid != meta.get("uid"):
            raise errors.conflict(
                r.plural,
                name,
                r.group,
                why=(
                    f"Precondition failed: UID in precondition: {opts.precondition_uid}, UID in "
                    f"object meta: {meta.get('uid')}"
                ),
            )
        if opts.precondition_rv and opts.precondition_rv != meta.get("resourceVersion"):
            raise errors.conflict(
                r.plural,
                name,
                r.group,
                why=(
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{opts.precondition_rv}, ResourceVersion in object meta: "
                    f"{meta.get('resourceVersion')}"
                ),
            )
        attrs = Attributes("DELETE", r, "", namespace, name, None, current, user, opts.dry_run)
        self.admission.validate(attrs)
        strategy = self.api.strategies.for_resource(r)
        grace = strategy.grace_period(current, opts.grace_period)
        propagation = {"Foreground": FOREGROUND, "Orphan": ORPHAN}.get(opts.propagation)
        held = bool(meta.get("finalizers")) or propagation is not None
        if opts.dry_run:
            return current
        if grace == 0 and not held and strategy.immediate_delete:
            try:
                return self._remove(r, current)
            except RevisionConflict:
                # It changed since we read it (a finalizer may have been added): decide
                # again on the new state.
                if attempts <= 1:
                    raise errors.conflict(r.plural, name, r.group) from None
                return self.delete(r, namespace, name, opts, user, attempts - 1)

        def mark(obj: Object) -> Object | None:
            m = obj["metadata"]
            changed = False
            if not m.get("deletionTimestamp"):
                at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=grace)
                m["deletionTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
                if int(m.get("generation", 0)) > 0:
                    m["generation"] = int(m["generation"]) + 1
                changed = True
            # The kind's own marks (a pod's grace period, a namespace's phase).
            if strategy.mark_deleting(obj, grace):
                changed = True
            if propagation is not None and propagation not in m.setdefault("finalizers", []):
                m["finalizers"].append(propagation)
                changed = True
            if not changed:
                return None
            tracing.inject(m)  # what reacts to the deletion continues its trace
            return obj

        try:
            stored, _ = self._store_call(
                lambda: self.storage.guaranteed_update(key, mark, current=current)
            )
        except KeyNotFound:
            # Gone meanwhile: its last finalizer went (the garbage collector finishing a
            # cascade) or another delete removed it.
            raise errors.not_found(r.plural, name, r.group) from None
        return stored

    def delete_collection(
        self,
        r: Resource,
        namespace: str,
        lopts: ListOptions,
        dopts: DeleteOptions,
        user: Any,
        matches: Filter | None = None,
    ) -> Object:
        listed = self.list_objects(
            r,
            namespace,
            ListOptions(label_selector=lopts.label_selector, field_selector=lopts.field_selector),
            matches,
        )
        deleted = []
        for obj in listed["items"]:
            meta = obj["metadata"]
            try:
                deleted.append(self.delete(r, meta.get("namespace", ""), meta["name"], dopts, user))
            except errors.StatusError as exc:
                if exc.code != 404:
                    raise
        listed["items"] = deleted
        return listed

    def _remove(self, r: Resource, obj: Object) -> Object:
        """Delete `obj` from the store if it is still at its resourceVersion, releasing
        what it held (a Service's addresses); RevisionConflict if it changed."""
        meta = obj["metadata"]
        releases: list[str] = []
        if self.allocator is not None and self.api.strategies.for_resource(r).allocates:
            attrs = Attributes(
                "DELETE", r, "", meta.get("namespace", ""), meta["name"], None, obj, None, False
            )
            _, releases = self.allocator(attrs)
        key = r.key(meta.get("namespace", ""), meta["name"])
        revision = int(meta["resourceVersion"])
        try:
            return self._store_call(lambda: self.storage.delete(key, revision, releases))
        except KeyNotFound:
            raise errors.not_found(r.plural, meta["name"], r.group) from None

    def _finalize(self, r: Resource, obj: Object) -> Object:
        """Complete a deletion whose last finalizer just went, unless the object changed
        meanwhile into something that must stay (a finalizer added back)."""
        for _ in range(5):
            try:
                return self._remove(r, obj)
            except RevisionConflict as exc:
                if exc.current is None or not self._ready_to_go(r, exc.current):
                    return exc.current or obj
                obj = exc.current
        meta = obj["metadata"]
        raise errors.conflict(r.plural, meta["name"], r.group)

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _check_type(r: Resource, obj: Object) -> None:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version is None and kind is None:
            obj["apiVersion"], obj["kind"] = r.api_version, r.kind
            return
        if api_version != r.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({r.api_version})"
            )
        if kind != r.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({r.kind}) "
                f"for {r.group_resource}"
            )

    @staticmethod
    def _check_namespace(r: Resource, namespace: str, meta: Object) -> None:
        if not r.namespaced:
            if meta.get("namespace"):
                meta.pop("namespace")
            return
        given = meta.get("namespace") or namespace
        if namespace and given != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        if not given:
            raise errors.bad_request("a namespace is required for " + r.group_resource)
        meta["namespace"] = given

    def _ready_to_go(self, r: Resource, obj: Object) -> bool:
        """A deleted object whose finalizers are all gone and that nobody else holds (a
        Namespace's spec.finalizers, a pod in its grace period: see the kind's strategy)."""
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        return not self.api.strategies.for_resource(r).holds_deletion(obj)

    @staticmethod
    def _refuse(r: Resource, obj: Object, problems: list[FieldError]) -> None:
        """422 listing every problem of `obj`, if it has any."""
        if problems:
            name = str(obj.get("metadata", {}).get("name", ""))
            raise errors.invalid_object(r.kind, name, problems, r.group)

    @staticmethod
    def matcher(r: Resource, opts: ListOptions) -> Filter:
        """The label and field selectors of `opts`, for objects of `r`."""
        labels = selectors.parse_label_selector(opts.label_selector)
        fields = selectors.parse_field_selector(opts.field_selector, r)
        if labels.empty() and fields.empty():
            return _everything

        def matches(obj: Object) -> bool:
            return labels.matches(obj.get("metadata", {}).get("labels") or {}) and fields.matches(
                obj
            )

        return matches

    def _index_value(self, r: Resource, opts: ListOptions, custom: Filter | None) -> str | None:
        """The value the field selector of `opts` pins the watch cache's indexed field of
        `r` to (pods: `spec.nodeName`); None without one, or with a `custom` filter in
        place of the selectors."""
        if custom is not None or not opts.field_selector:
            return None
        field = self.cacher.cache_for(r).index_field
        if field is None:
            return None
        return selectors.parse_field_selector(opts.field_selector, r).requires_exact_match(field)

    def _wait_fresh(self, revision: int) -> None:
        try:
            self.cacher.wait_fresh(revision)
        except CacheNotReady as exc:
            raise errors.timeout(f"Too large resource version: {exc}") from None

    @staticmethod
    def _store_call(call: Callable[[], _T]) -> _T:
        """Store failures as Status errors: 410 for compacted history, 503 for no quorum,
        500 saying what to do for a store out of space."""
        try:
            return call()
        except storeclient.CompactedError as exc:
            raise errors.gone(
                "The provided continue parameter or resourceVersion is too old: the store has "
                f"compacted that history ({exc}). "
                "Start a new list without it."
            ) from None
        except storeclient.FutureRevisionError:
            raise errors.timeout(
                "Too large resource version: the store has not reached it yet"
            ) from None
        except (storeclient.Unavailable, storeclient.DeadlineExceeded) as exc:
            raise errors.service_unavailable(
                f"the store is unavailable ({exc}); the apiserver will retry, try again"
            ) from None
        except storeclient.ResourceExhausted as exc:
            if "space exceeded" not in exc.message:  # etcd's "too many requests"
                raise errors.service_unavailable(
                    f"the store is overloaded ({exc}); try again"
                ) from None
            raise errors.internal_error(
                f"the store refuses writes: {exc}. Reads still work. To recover, delete "
                "what is not needed, then compact the store's history and lift the alarm: "
                "labctl store compaction <current revision>; labctl store alarm disarm "
                "(or raise --quota-backend-bytes)"
            ) from None


def _apply_conflict(
    r: Resource, clashes: dict[str, list[managedfields.Path]]
) -> errors.StatusError:
    """Kubernetes' answer to an apply that would change other managers' fields."""
    count = sum(len(paths) for paths in clashes.values())
    lines, causes = [], []
    for who, paths in clashes.items():
        rendered = [managedfields.render(p) for p in paths]
        if len(rendered) == 1:
            lines.append(f'conflict with "{who}" using {r.api_version}: {rendered[0]}')
        else:
            listed = "".join(f"\n- {p}" for p in rendered)
            lines.append(f'conflicts with "{who}" using {r.api_version}:{listed}')
        causes += [
            {
                "reason": "FieldManagerConflict",
                "message": f'conflict with "{who}" using {r.api_version}',
                "field": p,
            }
            for p in rendered
        ]
    plural = "conflict" if count == 1 else "conflicts"
    return errors.StatusError(
        409,
        "Conflict",
        f"Apply failed with {count} {plural}: " + "\n".join(lines),
        {"causes": causes},
    )


def _everything(obj: Object) -> bool:
    return True
