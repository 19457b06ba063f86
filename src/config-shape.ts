// The typed configuration every part of Assay reads; config.ts parses it from ASSAY_* variables.

import type { BucketSettings } from './buckets/bucket-setup.js';
import type { FindingsStyle, UnexaminedOutcome } from './engines/clamav/findings.js';
import type { ClamdReloadMode } from './engines/clamav/managed-clamd.js';
import type { ImageRuntime } from './engines/nsfw-image/classifier.js';
import type { IcapSettings } from './icap/icap-context.js';
import type { VerdictCacheMode } from './processing/verdict-cache.js';

export type ClamdSetting = { mode: 'managed' } | { mode: 'external'; address: string };
/** What a process does: the HTTP API, the async work, or both (see docs/OPERATIONS.md, "Several processes"). */
export type Role = 'api' | 'worker' | 'all';
export const ROLES: readonly Role[] = ['api', 'worker', 'all'];

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface BootstrapCredentials {
  keyId: string;
  secret: string;
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** PostgreSQL's URL; empty: SQLite in `dataDir`. The password is never logged. */
  databaseUrl: string;
  /** Connections of the store's pool (PostgreSQL). */
  databasePoolSize: number;
  /** Connections of pg-boss's pool (PostgreSQL), apart from its LISTEN connection. */
  dispatchPoolSize: number;
  /** Base of `Location` headers; when null, it is taken from the request's Host header. */
  publicUrl: string | null;
  maxFileSize: number;
  headerBrand: string;
  hostId: string;
  clamd: ClamdSetting;
  /** Official and third-party ClamAV databases ('' for none): loaded, or watched for changes. */
  clamdDatabaseDir: string;
  /** How long an external clamd may take to load a changed database. */
  clamdSelfCheckMs: number;
  /** Console sessions: how long they last, and unused. */
  console: { sessionMs: number; idleMs: number };
  /** The operator's own databases and YARA rules ('' for none), loaded by the managed clamd. */
  signaturesDir: string;
  /** How often the managed clamd's signature folders are looked at for changes. */
  signatureCheckMs: number;
  clamdReload: ClamdReloadMode;
  /** Items reach clamd on a unix socket as files (FILDES) or streams (ASSAY_CLAMD_HANDOFF). */
  clamdHandoff: 'auto' | 'file' | 'stream';
  /** The managed clamd's ScanImageFuzzyHash (ASSAY_CLAMD_IMAGE_FUZZY_HASH). */
  clamdImageFuzzyHash: boolean;
  /** What content clamd could not fully examine becomes: a finding or an error. */
  unexamined: UnexaminedOutcome;
  bootstrapCredentials: BootstrapCredentials | null;
  findingsStyle: FindingsStyle;
  logLevel: LogLevel;
  /** ASSAY_FETCH_ALLOW as given; checked at start by building the address policy from it. */
  fetchAllow: string;
  fetchTimeoutMs: number;
  jobConcurrency: number;
  engineRetryMs: number;
  /** Keys, accounts and tokens read to authenticate are reused this long (0: not at all). */
  credentialCacheMs: number;
  /** clamd's versions and the store's verdict-cache version are read again once this old. */
  engineVersionsMaxAgeMs: number;
  callbackRetryBaseMs: number;
  callbackMaxAgeMs: number;
  shutdownGraceMs: number;
  /** Per-key token bucket: requests per second (0: unlimited) and burst; keys may override. */
  rateLimit: RateLimitSetting;
  /** Failed authentications per client address: the bucket that slows secret guessing. */
  authFailureLimit: RateLimitSetting;
  /** PEM certificate and key read at start: when set, the server speaks HTTPS only. */
  tls: { cert: Buffer; key: Buffer } | null;
  /** Seconds results are kept by default (0: for good), and for the keys ICAP services act as. */
  resultRetention: { defaultSeconds: number; icapSeconds: number };
  /** The ICAP listener (docs/ICAP.md): its ports, who may connect, its services. */
  icap: IcapSettings;
  /** Watched buckets (issue 42): the verdict tags' names, SQS long polling. */
  buckets: BucketSettings;
  /** Which peers' X-Forwarded-* headers are believed (`http/proxy-trust.ts` applies it). */
  trustProxy: ProxyTrust;
  nsfw: {
    imageThreshold: number;
    imageRuntime: ImageRuntime;
    /** Inference threads of each image worker's model; 0: sized to the machine (imagePoolShape). */
    imageThreads: number;
    /** Worker threads of each NSFW engine; 0: sized to the machine. */
    workers: number;
  };
  /** v1.0: largest raw POST body in bytes (413 above it). */
  legacyMaxPostSize: number;
  /** v1.0: where its API lives; its path prefixes /api/scan. Null: /api/scan on this server. */
  legacyBaseUrl: string | null;
  /** Callback deliveries in flight to one destination (scheme://host:port) at most. */
  callbackDestinationConcurrency: number;
  /** The longest a client may take to send a whole request (headers and body). */
  requestTimeoutMs: number;
  /** The longest a client may send nothing while the service waits for its request body. */
  requestIdleTimeoutMs: number;
  /** Synchronous scans (v2.x POST /files, v1.0 POST /api/scan/) at once; beyond it, 503. */
  syncConcurrency: number;
  /** Synchronous scans of one account at once (at most syncConcurrency); beyond it, 503. */
  accountSyncConcurrency: number;
  /** Attempts of a job (engine outages excepted) before it ends as an error result. */
  jobMaxAttempts: number;
  /** A job waiting out an engine outage ends as an error result once this old. */
  jobMaxAgeMs: number;
  /** How long a claimed job is held without renewal (renewed while it runs). */
  jobLeaseMs: number;
  /** Scans of one account's async items at once, in every process. */
  accountJobConcurrency: number;
  /** Fetch downloads at once in the process (separate from the scanning slots). */
  fetchConcurrency: number;
  /** Fetches of one account downloading, or downloaded and awaiting their scan, at once. */
  accountFetchConcurrency: number;
  /** Callback deliveries in flight at once in the process. */
  callbackConcurrency: number;
  /** Callback deliveries of one account in flight at once in the process. */
  accountCallbackConcurrency: number;
  /** A remote that sends nothing this long during a fetch has stalled: the fetch fails at once. */
  fetchIdleTimeoutMs: number;
  /** Bytes held in the spool for unfinished async work, in all; beyond it, 507. */
  spoolMaxBytes: number;
  /** Bytes held in the spool for one account's unfinished async work; beyond it, 429. */
  accountSpoolMaxBytes: number;
  /** Async uploads up to this size are kept in their job's row (committed with it), not spooled. */
  asyncInlineBytes: number;
  /** Open client connections at most, and per client address (IPv6: per /64). */
  maxConnections: number;
  maxConnectionsPerAddress: number;
  /** The longest a new connection may take to send its first complete request head. */
  headerTimeoutMs: number;
  /** Directory of async content when not in S3; '' for `spool` in the data directory. */
  spoolDir: string;
  /** `s3://bucket/prefix` of async content, or ''. */
  spoolUrl: string;
  /** S3-compatible server of spoolUrl, or '' for AWS. */
  s3Endpoint: string;
  s3Region: string;
  /** Whose earlier verdicts answer content sent again (VerdictCache): the account's, all, none. */
  verdictCache: VerdictCacheMode;
  /** A scanned verdict answers items received at most this long after its own item. */
  verdictCacheTtlMs: number;
  role: Role;
  /** The bearer token GET /metrics requires; '' leaves it open. Never logged. */
  metricsToken: string;
  /** Processes serving on one port (node:cluster); above 1, state is shared through the store. */
  processes: number;
}

/**
 * ASSAY_TRUST_PROXY: nobody; the last `hops` peers, whatever their address (`deprecatedTrue`: the
 * setting said `true`, which now means one hop); or the proxies at these addresses/CIDRs.
 */
export type ProxyTrust =
  | { kind: 'none' }
  | { kind: 'hops'; hops: number; deprecatedTrue: boolean }
  | { kind: 'addresses'; addresses: string[] };

export interface RateLimitSetting {
  /** Tokens added per second; 0 turns the limit off. */
  rate: number;
  /** Bucket size: requests allowed at once after a quiet spell. */
  burst: number;
}
