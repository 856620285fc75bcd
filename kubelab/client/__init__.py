"""kubelab's Kubernetes client library, shaped like client-go: configuration
(`load_config`), a REST client (`RestClient`), informers and their cache
(`SharedInformer`, `Indexer`), the controllers' work queue (`WorkQueue`) and leader
election (`LeaderElector`). Each module's docstring states its contract.
"""

from kubelab.api.errors import StatusError
from kubelab.client.clock import REAL_CLOCK, Clock, FakeClock, RealClock, rfc3339
from kubelab.client.flowcontrol import Backoff, TokenBucket
from kubelab.client.informers import (
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    IndexFunc,
    Reflector,
    SharedInformer,
    Store,
    namespace_index,
    node_name_index,
    object_key,
    split_key,
)
from kubelab.client.kubeconfig import (
    ClientConfig,
    KubeconfigError,
    load_config,
    load_incluster_config,
    load_kubeconfig,
    write_kubeconfig,
)
from kubelab.client.leaderelection import LeaderElector
from kubelab.client.rest import (
    ClientClosed,
    Object,
    PatchType,
    Preconditions,
    ResourceExpired,
    RestClient,
    ServerUnreachable,
    Watch,
    WatchEvent,
    resource_for,
)
from kubelab.client.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    ShutDown,
    WorkQueue,
    default_controller_rate_limiter,
)

__all__ = [
    "NAMESPACE_INDEX",
    "NODE_NAME_INDEX",
    "REAL_CLOCK",
    "Backoff",
    "BucketRateLimiter",
    "ClientClosed",
    "ClientConfig",
    "Clock",
    "DeletedFinalStateUnknown",
    "FakeClock",
    "IndexFunc",
    "Indexer",
    "ItemExponentialFailureRateLimiter",
    "KubeconfigError",
    "LeaderElector",
    "MaxOfRateLimiter",
    "Object",
    "PatchType",
    "Preconditions",
    "RateLimiter",
    "RealClock",
    "Reflector",
    "ResourceExpired",
    "RestClient",
    "ServerUnreachable",
    "SharedInformer",
    "ShutDown",
    "StatusError",
    "Store",
    "TokenBucket",
    "Watch",
    "WatchEvent",
    "WorkQueue",
    "default_controller_rate_limiter",
    "load_config",
    "load_incluster_config",
    "load_kubeconfig",
    "namespace_index",
    "node_name_index",
    "object_key",
    "resource_for",
    "rfc3339",
    "split_key",
    "write_kubeconfig",
]
