# Contract constants, plan limits and the /capabilities document.
# Pure data: no I/O, no state.  Values follow shared/mainbrella-api.md.

API_VERSION = "2026-10-05"

MAX_FILE_BYTES = 1048576
MAX_OUTPUT_BYTES = 1048576
MAX_COMMAND_BYTES = 16384
MAX_TIMEOUT_MS = 60000
DEFAULT_TIMEOUT_MS = 30000
MAX_MANAGED_TIMEOUT_MS = 900000
MAX_CONCURRENT_OPS = 4
RETENTION_MS = 3600000
MAX_RETAINED_EXECUTIONS = 32
MAX_EXECUTION_EVENTS = 512
IMMEDIATE_EVENTS = MAX_EXECUTION_EVENTS - 128 - 4
MAX_EXECUTION_STREAMS = 8
EXECUTION_STREAM_MS = 30000
MAX_CHUNK_UNITS = 8192
MAX_STDIN_CHUNK = 65536
MAX_STDIN_TOTAL = 1048576
MAX_STDIN_PENDING = 262144
STDIN_WRITE_MS = 30000
EXEC_BODY_CAP = 32768
FS_BODY_CAP = 16384
CONTAINERS_BODY_CAP = 32768
MAX_DIR_ENTRIES = 1000
MAX_DIR_OFFSET = 1000000
DEFAULT_LIST_LIMIT = 100
MAX_METADATA_BYTES = 1048576
MAX_PATH_BYTES = 4096
FILES_TIMEOUT_MS = 30000
EXPORT_CAP = 16777216
EXPORT_TIMEOUT_MS = 60000
BOOT_TIMEOUT_MS = 60000
IDEMPOTENCY_MS = 86400000
JOB_RENEW_MS = 15000
STARTING_VISIBLE_MS = 90000

GUEST_UID = 1000              # degraded mode only: the unprivileged user commands run as
GUEST_GID = 1000
UID_BASE = 100000             # isolated mode: guest uid 0 of slot N is host uid UID_BASE + N*UID_RANGE
UID_RANGE = 65536
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

ALLOWED_ORIGINS = frozenset({
    "https://mainbrella.com", "https://www.mainbrella.com",
    "http://localhost:5173", "http://127.0.0.1:5173",
})

PLANS = {
    "builder": {"maxComputeUnitHours": 250, "maxConcurrentComputeUnits": 28, "maxContainers": 5,
                "maxStartsPerMonth": 1000, "maxSessionMs": 3600000, "idleTimeoutMs": 600000},
    "pro": {"maxComputeUnitHours": 9000, "maxConcurrentComputeUnits": 128, "maxContainers": 100,
            "maxStartsPerMonth": 10000, "maxSessionMs": 86400000, "idleTimeoutMs": 1800000},
    "scale": {"maxComputeUnitHours": 50000, "maxConcurrentComputeUnits": 640, "maxContainers": 500,
              "maxStartsPerMonth": 100000, "maxSessionMs": 259200000, "idleTimeoutMs": 3600000},
}

RESOURCES = [
    {"id": "lite", "name": "lite", "instance": "lite", "cpuVcpu": 0.0625, "memoryMiB": 256, "diskGB": 2, "computeUnits": 1},
    {"id": "small", "name": "small", "instance": "standard-1", "cpuVcpu": 0.5, "memoryMiB": 4096, "diskGB": 8, "computeUnits": 6},
    {"id": "medium", "name": "medium", "instance": "standard-2", "cpuVcpu": 1, "memoryMiB": 6144, "diskGB": 12, "computeUnits": 10},
    {"id": "large", "name": "large", "instance": "standard-3", "cpuVcpu": 2, "memoryMiB": 8192, "diskGB": 16, "computeUnits": 16},
    {"id": "xl", "name": "xl", "instance": "standard-4", "cpuVcpu": 4, "memoryMiB": 12288, "diskGB": 20, "computeUnits": 28},
]
SIZES = {r["id"]: r for r in RESOURCES}

IMAGE_CATALOG = [
    {"id": "node", "name": "Node 24 + TypeScript"},
    {"id": "python", "name": "Python 3.14"},
    {"id": "rust", "name": "Rust development"},
    {"id": "go", "name": "Go development"},
    {"id": "devops", "name": "DevOps \u00b7 AWS, Terraform, Wrangler"},
]
# WORKDIR of each catalog image (containers/Dockerfile, containers/catalog/*.Dockerfile):
# only node works in /root and has no /workspace.
IMAGE_WORKDIR = {"node": "/root", "python": "/workspace", "rust": "/workspace", "go": "/workspace",
                 "devops": "/workspace"}
CATALOG_IDS = ("node", "python", "rust", "go", "devops")
DEFAULT_CATALOG = "node"       # what POST /containers without catalogId starts (hosted: node)


def capabilities():
    """The /capabilities document (a fresh dict each call)."""
    execution = {k: True for k in (
        "foreground", "streaming", "background", "cancellation", "reconnect", "programmaticPty",
        "ptyResize", "stdin", "signals", "argv", "managedProcessListing", "pty")}
    execution.update({
        "processListing": False,
        "maxStdinChunkBytes": MAX_STDIN_CHUNK, "maxStdinBytes": MAX_STDIN_TOTAL,
        "maxPendingStdinBytes": MAX_STDIN_PENDING, "maxCommandBytes": MAX_COMMAND_BYTES,
        "maxTimeoutMs": MAX_TIMEOUT_MS, "maxOutputBytes": MAX_OUTPUT_BYTES,
        "maxConcurrentOperations": MAX_CONCURRENT_OPS, "maxManagedTimeoutMs": MAX_MANAGED_TIMEOUT_MS,
        "retentionMs": RETENTION_MS, "maxRetainedExecutions": MAX_RETAINED_EXECUTIONS,
    })
    files = {k: True for k in ("read", "write", "binary", "atomicReplacement", "list", "stat",
                               "mkdir", "delete", "move", "chmod")}
    files.update({
        "watch": False, "maxDirectoryEntries": MAX_DIR_ENTRIES, "maxDirectoryOffset": MAX_DIR_OFFSET,
        "maxMetadataBytes": MAX_METADATA_BYTES, "maxFileBytes": MAX_FILE_BYTES,
        "maxPathBytes": MAX_PATH_BYTES, "timeoutMs": FILES_TIMEOUT_MS, "sharedExecutionPool": True,
    })
    return {
        "apiVersion": API_VERSION,
        "authentication": {"apiKeys": True, "browserSessions": True, "browserTerminalCookieOnly": True},
        "containers": {"idempotentCreate": True, "creationRetentionMs": IDEMPOTENCY_MS,
                       "generationRequired": True, "accountLimitsPath": "/containers",
                       "configurableDeadline": False},
        "execution": execution,
        "files": files,
        "persistence": {"filesystemAfterStop": False, "snapshots": False, "workspaces": False,
                        "exports": True, "memory": False, "volumes": False},
        "observability": {"lifecycleEvents": True, "activityWebSocket": False, "metrics": False,
                          "webhooks": False, "otlp": False, "eventRetentionMs": 604800000,
                          "maxLifecycleEvents": 256, "maxMetricRangeMs": 86400000,
                          "metricBucketMs": 60000},
        "previews": {"supported": False, "signedUrls": False},
        "images": {"catalog": True, "availableCatalogPath": "/containers", "customBuilds": False,
                   "limits": {"maxBuildsPerMonth": 10, "maxSavedImages": 3, "maxContextBytes": 524288,
                              "maxDockerfileBytes": 16384, "maxBuildSeconds": 300}},
        "resources": [dict(r) for r in RESOURCES],
        "networking": {"outboundInternet": True, "internetControl": True, "privateServices": False,
                       "egressPolicies": False, "regionSelection": False},
        "access": {"maxTerminalConnections": 4, "maxSSHAccessTokens": 10, "sshTokenLifetimeMs": 900000},
    }
