import { resolve } from 'node:path';
import { bucketSettings } from './config-buckets.js';
import { icapSettings } from './config-icap.js';
import {
  accountShare,
  baseUrl,
  bootstrapCredentials,
  clamd,
  databaseUrl,
  decimal,
  type Env,
  fetchAllow,
  headerBrand,
  hostId,
  integer,
  metricsToken,
  oneOf,
  optionalPath,
  rateLimit,
  read,
  spoolLocation,
  spoolQuota,
  tls,
  trustProxy,
} from './config-read.js';
import type { Config } from './config-shape.js';
import { ROLES } from './config-shape.js';
import { IMAGE_RUNTIMES } from './engines/nsfw-image/classifier.js';

export { ConfigError } from './config-read.js';
export * from './config-shape.js';

/** Reads and validates the whole configuration; throws ConfigError naming the bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const syncConcurrency = integer(env, 'ASSAY_SYNC_CONCURRENCY', 1, 10_000);
  const port = integer(env, 'ASSAY_PORT', 0, 65535);
  const tlsPair = tls(env);
  return {
    host: read(env, 'ASSAY_HOST'),
    port,
    dataDir: resolve(read(env, 'ASSAY_DATA_DIR')),
    databaseUrl: databaseUrl(env),
    databasePoolSize: integer(env, 'ASSAY_DATABASE_POOL_SIZE', 1, 1000),
    dispatchPoolSize: integer(env, 'ASSAY_DISPATCH_POOL_SIZE', 1, 1000),
    publicUrl: baseUrl(env, 'ASSAY_PUBLIC_URL'),
    // clamd's own stream limit sits below 4 GB; keep ours well inside it.
    maxFileSize: integer(env, 'ASSAY_MAX_FILE_SIZE', 1, 2 * 1024 * 1024 * 1024),
    headerBrand: headerBrand(env),
    hostId: hostId(env),
    clamd: clamd(env),
    clamdDatabaseDir: optionalPath(read(env, 'ASSAY_CLAMD_DATABASE_DIR')),
    clamdSelfCheckMs: integer(env, 'ASSAY_CLAMD_SELFCHECK', 0, 7 * 86_400) * 1000,
    console: {
      sessionMs: integer(env, 'ASSAY_CONSOLE_SESSION_HOURS', 1, 24 * 30) * 3_600_000,
      idleMs: integer(env, 'ASSAY_CONSOLE_IDLE_MINUTES', 1, 24 * 60) * 60_000,
    },
    signaturesDir: optionalPath(read(env, 'ASSAY_SIGNATURES_DIR')),
    signatureCheckMs: integer(env, 'ASSAY_SIGNATURES_CHECK', 1, 3600) * 1000,
    clamdReload: oneOf(env, 'ASSAY_CLAMD_RELOAD', ['concurrent', 'blocking'] as const),
    clamdHandoff: oneOf(env, 'ASSAY_CLAMD_HANDOFF', ['auto', 'file', 'stream'] as const),
    clamdImageFuzzyHash:
      oneOf(env, 'ASSAY_CLAMD_IMAGE_FUZZY_HASH', ['yes', 'no'] as const) === 'yes',
    unexamined: oneOf(env, 'ASSAY_UNEXAMINED', ['finding', 'error'] as const),
    bootstrapCredentials: bootstrapCredentials(env),
    findingsStyle: oneOf(env, 'ASSAY_FINDINGS_STYLE', ['content', 'av'] as const),
    fetchAllow: fetchAllow(env),
    fetchTimeoutMs: integer(env, 'ASSAY_FETCH_TIMEOUT', 1, 86_400) * 1000,
    jobConcurrency: integer(env, 'ASSAY_JOB_CONCURRENCY', 1, 256),
    engineRetryMs: integer(env, 'ASSAY_ENGINE_RETRY_MS', 10, 3_600_000),
    callbackRetryBaseMs: integer(env, 'ASSAY_CALLBACK_RETRY_BASE_MS', 10, 3_600_000),
    credentialCacheMs: integer(env, 'ASSAY_CREDENTIAL_CACHE_MS', 0, 60_000),
    engineVersionsMaxAgeMs: integer(env, 'ASSAY_ENGINE_VERSIONS_MAX_AGE_MS', 0, 60_000),
    callbackMaxAgeMs: integer(env, 'ASSAY_CALLBACK_MAX_AGE', 1, 30 * 86_400) * 1000,
    shutdownGraceMs: integer(env, 'ASSAY_SHUTDOWN_GRACE', 0, 3600) * 1000,
    rateLimit: rateLimit(env, 'ASSAY_RATE_LIMIT', 'ASSAY_RATE_BURST'),
    authFailureLimit: rateLimit(env, 'ASSAY_AUTH_FAIL_RATE', 'ASSAY_AUTH_FAIL_BURST'),
    tls: tlsPair,
    icap: icapSettings(env, port, tlsPair !== null),
    buckets: bucketSettings(env),
    resultRetention: {
      defaultSeconds: integer(env, 'ASSAY_RESULT_RETENTION', 0, 100 * 365 * 86_400),
      icapSeconds: integer(env, 'ASSAY_ICAP_RESULT_RETENTION', 0, 100 * 365 * 86_400),
    },
    trustProxy: trustProxy(env),
    nsfw: {
      imageThreshold: decimal(env, 'ASSAY_NSFW_IMAGE_THRESHOLD', 1),
      imageRuntime: oneOf(env, 'ASSAY_NSFW_IMAGE_RUNTIME', IMAGE_RUNTIMES),
      imageThreads: integer(env, 'ASSAY_NSFW_IMAGE_THREADS', 0, 64),
      workers: integer(env, 'ASSAY_NSFW_WORKERS', 0, 64),
    },
    legacyMaxPostSize: integer(env, 'ASSAY_LEGACY_MAX_POST_SIZE', 1, 2 * 1024 * 1024 * 1024),
    legacyBaseUrl: baseUrl(env, 'ASSAY_LEGACY_BASE_URL'),
    callbackDestinationConcurrency: integer(env, 'ASSAY_CALLBACK_DESTINATION_CONCURRENCY', 1, 64),
    requestTimeoutMs: integer(env, 'ASSAY_REQUEST_TIMEOUT', 1, 86_400) * 1000,
    requestIdleTimeoutMs: integer(env, 'ASSAY_REQUEST_IDLE_TIMEOUT', 1, 86_400) * 1000,
    syncConcurrency,
    accountSyncConcurrency: Math.min(
      syncConcurrency,
      integer(env, 'ASSAY_ACCOUNT_SYNC_CONCURRENCY', 1, 10_000),
    ),
    jobMaxAttempts: integer(env, 'ASSAY_JOB_MAX_ATTEMPTS', 1, 1000),
    jobMaxAgeMs: integer(env, 'ASSAY_JOB_MAX_AGE', 1, 30 * 86_400) * 1000,
    jobLeaseMs: integer(env, 'ASSAY_JOB_LEASE', 1, 86_400) * 1000,
    accountJobConcurrency: accountShare(
      env,
      'ASSAY_ACCOUNT_JOB_CONCURRENCY',
      'ASSAY_JOB_CONCURRENCY',
      256,
      1 / 2,
    ),
    fetchConcurrency: integer(env, 'ASSAY_FETCH_CONCURRENCY', 1, 1024),
    accountFetchConcurrency: accountShare(
      env,
      'ASSAY_ACCOUNT_FETCH_CONCURRENCY',
      'ASSAY_FETCH_CONCURRENCY',
      1024,
      1 / 4,
    ),
    callbackConcurrency: integer(env, 'ASSAY_CALLBACK_CONCURRENCY', 1, 1024),
    accountCallbackConcurrency: accountShare(
      env,
      'ASSAY_ACCOUNT_CALLBACK_CONCURRENCY',
      'ASSAY_CALLBACK_CONCURRENCY',
      1024,
      1 / 2,
    ),
    fetchIdleTimeoutMs: integer(env, 'ASSAY_FETCH_IDLE_TIMEOUT', 1, 86_400) * 1000,
    ...spoolQuota(env),
    asyncInlineBytes: integer(env, 'ASSAY_ASYNC_INLINE_BYTES', 0, 1024 * 1024),
    ...spoolLocation(env),
    verdictCache: oneOf(env, 'ASSAY_VERDICT_CACHE', ['account', 'shared', 'off'] as const),
    verdictCacheTtlMs: integer(env, 'ASSAY_VERDICT_CACHE_TTL', 1, 365 * 86_400) * 1000,
    role: oneOf(env, 'ASSAY_ROLE', ROLES),
    processes: integer(env, 'ASSAY_PROCESSES', 1, 256),
    metricsToken: metricsToken(env),
    maxConnections: integer(env, 'ASSAY_MAX_CONNECTIONS', 1, 1_000_000),
    maxConnectionsPerAddress: integer(env, 'ASSAY_MAX_CONNECTIONS_PER_ADDRESS', 1, 1_000_000),
    headerTimeoutMs: integer(env, 'ASSAY_HEADER_TIMEOUT', 1, 3_600) * 1000,
    logLevel: oneOf(env, 'ASSAY_LOG_LEVEL', [
      'fatal',
      'error',
      'warn',
      'info',
      'debug',
      'trace',
      'silent',
    ] as const),
  };
}
