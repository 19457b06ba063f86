// Every ASSAY_* setting in one table, apart from their parsing (config.ts).

/** Every setting, its default and what it means: docs/CONFIGURATION.md's table follows this list. */
export const SETTINGS = {
  ASSAY_HOST: { default: '127.0.0.1', doc: 'Address to listen on.' },
  ASSAY_PORT: { default: '4000', doc: 'Port to listen on (0 picks a free port).' },
  ASSAY_DATA_DIR: { default: './data', doc: 'Database, clamd config and socket, spool.' },
  ASSAY_DATABASE_URL: {
    default: '',
    doc: '`postgres://user:password@host:port/database`: PostgreSQL; empty: SQLite in the data dir.',
  },
  ASSAY_DATABASE_POOL_SIZE: {
    default: '10',
    doc: "PostgreSQL connections of each process's store (pg-boss's are ASSAY_DISPATCH_POOL_SIZE).",
  },
  ASSAY_DISPATCH_POOL_SIZE: {
    default: '4',
    doc: "PostgreSQL connections of each process's pg-boss (callback delivery), besides its one LISTEN connection.",
  },
  ASSAY_PUBLIC_URL: {
    default: '',
    doc: 'Base URL (http(s), may end in a path the proxy strips) of every `Location`; when set, Host and X-Forwarded-* are not read for URLs.',
  },
  ASSAY_MAX_FILE_SIZE: { default: String(100 * 1024 * 1024), doc: 'Largest upload in bytes.' },
  ASSAY_HEADER_BRAND: { default: 'Service', doc: 'Brand word in `X-<Brand>-Host-Id`.' },
  ASSAY_HOST_ID: { default: '', doc: 'Host id header value; default: hash of the hostname.' },
  ASSAY_CLAMD: { default: 'managed', doc: '`managed`, a unix socket path or `tcp://host:port`.' },
  ASSAY_CLAMD_DATABASE_DIR: {
    default: '/var/lib/clamav',
    doc: "ClamAV's official and third-party databases (freshclam's directory): the managed clamd loads them beside Assay's own; for a clamd you run, a change there changes the verdict cache's key. `none`: no such folder.",
  },
  ASSAY_CLAMD_SELFCHECK: {
    default: '3600',
    doc: "For a clamd you run: seconds it may take to load a changed database (its SelfCheck; 3600 in Debian's clamd.conf). Verdicts are neither reused nor stored for that long after ASSAY_CLAMD_DATABASE_DIR changes.",
  },
  ASSAY_SIGNATURES_DIR: {
    default: 'none',
    doc: "Your own ClamAV databases and YARA rules (`.yar`, `.yara`): the managed clamd loads them beside Assay's own and the official ones. Files added, changed or removed here, in ASSAY_CLAMD_DATABASE_DIR and in Assay's own folder are loaded without a restart. `none`: no such folder.",
  },
  ASSAY_SIGNATURES_CHECK: {
    default: '10',
    doc: 'Seconds between looks at the signature folders for added, changed and removed files (the managed clamd).',
  },
  ASSAY_CLAMD_RELOAD: {
    default: 'concurrent',
    doc: '`concurrent`: the managed clamd scans on with the old signatures while it loads new ones (both sets in memory meanwhile); `blocking`: it answers nothing until the new set is loaded (half the memory).',
  },
  ASSAY_CLAMD_HANDOFF: {
    default: 'auto',
    doc: "How items reach clamd on a unix socket: `file` writes each to a file without a name (small ones in memory, larger ones under the data folder's `clamd-files`, as they arrive) and hands clamd its descriptor (FILDES), so clamd scans it without first copying a stream to its own temporary file; `stream` sends them as streams (INSTREAM), which clamd refuses past its StreamMaxLength. `auto`: `file` for the managed clamd, `stream` for a clamd you run (give it `file` once its MaxFileSize is above ASSAY_MAX_FILE_SIZE and AlertExceedsMax is on: over MaxFileSize, a file is otherwise passed unscanned). Over TCP, always streams.",
  },
  ASSAY_CLAMD_IMAGE_FUZZY_HASH: {
    default: 'yes',
    doc: "`yes`: the managed clamd computes a fuzzy hash of every image it scans, so that `fuzzy_img` signatures (in an operator's or the official databases) can match images close to a known one; about 17 ms of clamd's CPU per 1 MP JPEG (19.5 against 2.7 ms). `no`: images scan faster, and `fuzzy_img` signatures never match (Assay's own database has none). Part of the verdict cache's key.",
  },
  ASSAY_UNEXAMINED: {
    default: 'finding',
    doc: 'Content clamd could not fully examine (encrypted archives and documents; archives over the depth, file-count or size limits; scans over the time limit): `finding` reports a `content.malicious.heuristics.*` finding; `error` makes it an error (sync: 422; async: a result with `error`). Never a clean result.',
  },
  ASSAY_CONSOLE_SESSION_HOURS: {
    default: '12',
    doc: 'A console session ends this many hours after sign-in.',
  },
  ASSAY_CONSOLE_IDLE_MINUTES: {
    default: '60',
    doc: 'A console session unused this many minutes ends.',
  },
  ASSAY_BOOTSTRAP_CREDENTIALS: { default: '', doc: '`key:secret` created at start if absent.' },
  ASSAY_FINDINGS_STYLE: { default: 'content', doc: '`content` or `av` (older finding names).' },
  ASSAY_LOG_LEVEL: { default: 'info', doc: 'pino level: fatal … trace, or silent.' },
  ASSAY_FETCH_ALLOW: { default: '', doc: 'CIDRs and host names outbound requests may reach.' },
  ASSAY_FETCH_TIMEOUT: {
    default: '300',
    doc: 'Seconds a remote download and its scan may take in all.',
  },
  ASSAY_JOB_CONCURRENCY: {
    default: '8',
    doc: 'Asynchronous items scanned at once (a fetch takes a slot only once downloaded).',
  },
  ASSAY_ENGINE_RETRY_MS: {
    default: '5000',
    doc: 'Wait before retrying a job the engine missed (doubling for counted attempts).',
  },
  ASSAY_CALLBACK_RETRY_BASE_MS: { default: '10000', doc: 'First callback retry delay (doubles).' },
  ASSAY_CREDENTIAL_CACHE_MS: {
    default: '500',
    doc: 'Milliseconds each process reuses the keys, accounts and tokens it read to authenticate: a change made by another process or the admin CLI takes effect within it; 0: read on every request.',
  },
  ASSAY_ENGINE_VERSIONS_MAX_AGE_MS: {
    default: '1000',
    doc: "Milliseconds each process trusts its last reading of clamd's versions and the verdict cache's generation: a signature update or `assay admin verdict-cache clear` changes which verdicts are reused within it.",
  },
  ASSAY_CALLBACK_MAX_AGE: {
    default: '86400',
    doc: 'Seconds a callback is retried before giving up.',
  },
  ASSAY_SHUTDOWN_GRACE: { default: '10', doc: 'Seconds shutdown lets running jobs finish.' },
  ASSAY_RATE_LIMIT: {
    default: '100',
    doc: 'Requests per second per key (tokens count for their key); 0: no limit.',
  },
  ASSAY_RATE_BURST: { default: '200', doc: 'Requests a key may make at once after a pause.' },
  ASSAY_AUTH_FAIL_RATE: {
    default: '1',
    doc: 'Failed authentications per second allowed per client address.',
  },
  ASSAY_AUTH_FAIL_BURST: {
    default: '20',
    doc: 'Failed authentications per client address before 429s begin.',
  },
  ASSAY_TLS_CERT: { default: '', doc: 'PEM certificate file: set with ASSAY_TLS_KEY for HTTPS.' },
  ASSAY_TLS_KEY: { default: '', doc: 'PEM private key file of ASSAY_TLS_CERT.' },
  ASSAY_NSFW_IMAGE_THRESHOLD: {
    default: '0.5',
    doc: 'Porn + Hentai probability from which an image is flagged (0-1).',
  },
  ASSAY_NSFW_IMAGE_RUNTIME: {
    default: 'onnx',
    doc: 'What runs the image model: onnx (onnxruntime, native) or tfjs (TensorFlow.js on WASM, about 5 times slower).',
  },
  ASSAY_NSFW_IMAGE_THREADS: {
    default: '0',
    doc: 'Inference threads of each image worker (onnx); 0: one (the most images per CPU).',
  },
  ASSAY_NSFW_WORKERS: {
    default: '0',
    doc: 'Worker threads of each NSFW engine; 0: the CPU count, at most 8 (onnx images: one worker per two CPUs of ASSAY_NSFW_IMAGE_THREADS threads, the other decoding).',
  },
  ASSAY_TRUST_PROXY: {
    default: '',
    doc: 'Proxies in front: a hop count (1-16) or their addresses/CIDRs; X-Forwarded-For is read from the right. `true` (deprecated): 1.',
  },
  ASSAY_LEGACY_MAX_POST_SIZE: {
    default: String(100 * 1024 * 1024),
    doc: 'Largest raw POST body of the deprecated v1.0 API, in bytes.',
  },
  ASSAY_LEGACY_BASE_URL: { default: '', doc: 'Base URL of v1.0 (its path prefixes /api/scan).' },
  ASSAY_CALLBACK_DESTINATION_CONCURRENCY: {
    default: '4',
    doc: 'Callbacks of one account in flight to one destination (scheme, host and port) at most.',
  },
  ASSAY_REQUEST_TIMEOUT: {
    default: '300',
    doc: 'Seconds a client may take to send a whole request; then 408 and the connection closes.',
  },
  ASSAY_REQUEST_IDLE_TIMEOUT: {
    default: '30',
    doc: 'Seconds a client may send nothing while its request body is awaited.',
  },
  ASSAY_SYNC_CONCURRENCY: {
    default: '16',
    doc: 'Synchronous scans at once; beyond it 503 with Retry-After, before the body is read.',
  },
  ASSAY_ACCOUNT_SYNC_CONCURRENCY: {
    default: '8',
    doc: 'Synchronous scans of one account at once (at most ASSAY_SYNC_CONCURRENCY).',
  },
  ASSAY_JOB_MAX_ATTEMPTS: {
    default: '5',
    doc: 'Attempts of an async item (engine outages excepted) before it ends with an error.',
  },
  ASSAY_JOB_MAX_AGE: {
    default: '86400',
    doc: 'Seconds an async item waits out an engine outage before it ends with an error.',
  },
  ASSAY_JOB_LEASE: {
    default: '60',
    doc: 'Seconds a claimed job is held (renewed while it runs); a dead worker’s jobs resume after it.',
  },
  ASSAY_ACCOUNT_JOB_CONCURRENCY: {
    default: '0',
    doc: 'Async items of one account scanned at once, in all processes; 0: half of ASSAY_JOB_CONCURRENCY.',
  },
  ASSAY_FETCH_CONCURRENCY: {
    default: '32',
    doc: 'Async fetches downloading at once (slots of their own, not ASSAY_JOB_CONCURRENCY).',
  },
  ASSAY_ACCOUNT_FETCH_CONCURRENCY: {
    default: '0',
    doc: 'Fetches of one account downloading or downloaded and awaiting their scan, in all processes; 0: a quarter of ASSAY_FETCH_CONCURRENCY.',
  },
  ASSAY_CALLBACK_CONCURRENCY: { default: '16', doc: 'Callback deliveries in flight at once.' },
  ASSAY_ACCOUNT_CALLBACK_CONCURRENCY: {
    default: '0',
    doc: 'Callback deliveries of one account in flight at once; 0: half of ASSAY_CALLBACK_CONCURRENCY.',
  },
  ASSAY_FETCH_IDLE_TIMEOUT: {
    default: '30',
    doc: 'Seconds a remote may send nothing (no response head, no body bytes) before its download fails.',
  },
  ASSAY_SPOOL_MAX_BYTES: {
    default: String(5 * 1024 * 1024 * 1024),
    doc: 'Bytes of async uploads held until their results, in all; beyond it 507 with Retry-After.',
  },
  ASSAY_ASYNC_INLINE_BYTES: {
    default: '65536',
    doc: 'Async uploads of at most this many bytes are kept in their job (the database), not a spool file; 0: always the spool.',
  },
  ASSAY_ACCOUNT_SPOOL_MAX_BYTES: {
    default: String(1024 * 1024 * 1024),
    doc: 'Bytes of async uploads one account may have held (at most ASSAY_SPOOL_MAX_BYTES); beyond it 429.',
  },
  ASSAY_MAX_CONNECTIONS: {
    default: '4096',
    doc: 'Open client connections at most; beyond it the oldest idle one of the busiest address is closed.',
  },
  ASSAY_MAX_CONNECTIONS_PER_ADDRESS: {
    default: '256',
    doc: 'Open connections of one client address (IPv6: /64) at most; more are closed at once.',
  },
  ASSAY_HEADER_TIMEOUT: {
    default: '10',
    doc: 'Seconds a new connection may take to send a complete request head; then it is closed.',
  },
  ASSAY_SPOOL_DIR: {
    default: '',
    doc: 'Directory of async content (shared by every worker); default: `spool` in ASSAY_DATA_DIR.',
  },
  ASSAY_SPOOL_URL: {
    default: '',
    doc: '`s3://bucket/prefix`: async content in an S3 bucket instead of a directory.',
  },
  ASSAY_S3_ENDPOINT: {
    default: '',
    doc: 'URL of an S3-compatible server for ASSAY_SPOOL_URL (path-style); default: AWS.',
  },
  ASSAY_S3_REGION: { default: 'us-east-1', doc: 'Region of the ASSAY_SPOOL_URL bucket.' },
  ASSAY_ROLE: {
    default: 'all',
    doc: '`api` (HTTP API only), `worker` (async jobs and callbacks; serves only /health) or `all`; `serve --role` sets it.',
  },
  ASSAY_VERDICT_CACHE: {
    default: 'account',
    doc: '`account`: content an account sent before gets that verdict again without a scan while the engines and signatures are unchanged; `shared`: across accounts; `off`: every item is scanned.',
  },
  ASSAY_VERDICT_CACHE_TTL: {
    default: '86400',
    doc: 'Seconds a scanned verdict may answer later items with the same content.',
  },
  ASSAY_METRICS_TOKEN: {
    default: '',
    doc: 'Bearer token GET /metrics requires (16-256 visible ASCII characters); empty: /metrics is open to anyone who reaches the port.',
  },
  ASSAY_PROCESSES: {
    default: '1',
    doc: 'Processes on one port (node:cluster); with role `all`, one runs jobs and the others `api`. `serve --processes` sets it.',
  },
  ASSAY_RESULT_RETENTION: {
    default: '0',
    doc: 'Seconds results (with their traces) are kept, for keys without a retention of their own (`admin key update --result-retention`); 0: for good.',
  },
  ASSAY_ICAP_RESULT_RETENTION: {
    default: '604800',
    doc: 'Seconds the results of a key an ICAP service acts as are kept, unless the key has its own; 0: for good. A proxy makes millions a day.',
  },
  ASSAY_ICAP_PORT: {
    default: 'off',
    doc: 'Port of the ICAP listener (RFC 3507; 1344 by convention; 0 picks a free one) on processes of the `api` and `all` roles; `off`: none. Needs ASSAY_ICAP_SERVICES. See docs/ICAP.md.',
  },
  ASSAY_ICAPS_PORT: {
    default: 'off',
    doc: 'Port of ICAP over TLS (ICAPS; 11344 by convention), with ASSAY_TLS_CERT and ASSAY_TLS_KEY; `off`: none.',
  },
  ASSAY_ICAP_ALLOW: {
    default: '127.0.0.0/8,::1',
    doc: 'Addresses and CIDRs that may connect to the ICAP ports (ICAP has no authentication of its own): others are closed at once.',
  },
  ASSAY_ICAP_SERVICES: {
    default: '',
    doc: '`name=<key id>,…`: each ICAP service (icap://host:1344/name) and the API key it acts as (its categories, limits, balance and rate limit apply). An unknown service is ICAP 404.',
  },
  ASSAY_ICAP_OVERSIZE: {
    default: 'block',
    doc: 'ICAP content over ASSAY_MAX_FILE_SIZE: `block` (a 403 page), or `pass` unscanned with an `X-Assay-Unscanned` header and a metric (fails open for those objects).',
  },
  ASSAY_BUCKET_STATUS_TAG: {
    default: 'AssayScanStatus',
    doc: "The object tag a watched bucket's verdict is written to (NO_THREATS_FOUND, THREATS_FOUND, UNSUPPORTED, ACCESS_DENIED, FAILED), beside AssayScanTime and AssayScanFindings; `GuardDutyMalwareScanStatus` keeps bucket policies written for GuardDuty. See docs/BUCKETS.md.",
  },
  ASSAY_BUCKET_BACKLOG: {
    default: '64',
    doc: "Scans a watched bucket's listing or rescan keeps queued at most (1-10000): a bulk import waits its turn instead of filling the queue.",
  },
  ASSAY_BUCKET_RESCAN_WINDOW: {
    default: '2592000',
    doc: "Seconds: a watched object's clean verdict younger than this is scanned again when the signatures change (30 days by default; a source's --rescan-window first); 0: never.",
  },
  ASSAY_BUCKET_RESCAN_RATE: {
    default: '20',
    doc: "Objects per second a watched bucket's rescan announces at most (1-10000), per source and process that runs jobs.",
  },
  ASSAY_BUCKET_QUEUE_WAIT: {
    default: '20',
    doc: 'Seconds an SQS receive of a watched bucket waits for messages (long polling, 1-20).',
  },
} as const;

export type SettingName = keyof typeof SETTINGS;
