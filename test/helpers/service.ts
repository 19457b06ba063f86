import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Logger, pino } from 'pino';
import { AccountService } from '../../src/accounts/account-service.js';
import { type Config, loadConfig } from '../../src/config.js';
import { findClamdBinary, ManagedClamd } from '../../src/engines/clamav/managed-clamd.js';
import { type RunningService, type ServiceTestHooks, startService } from '../../src/service.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { prepareStore, TEST_POOL_ENV } from './test-database.js';

/**
 * How long a test service reuses credentials (ASSAY_CREDENTIAL_CACHE_MS) unless the test says
 * otherwise: short, so that waiting for a change made behind its back costs little.
 */
export const TEST_CREDENTIAL_CACHE_MS = 100;

/** Beyond a cache's time, so that a wait for its expiry never ends a timer's tick early. */
const EXPIRY_MARGIN_MS = 50;

/**
 * Waits until the service sees what a test changed in its store behind its back (keys, accounts,
 * tokens): it reuses credentials for ASSAY_CREDENTIAL_CACHE_MS, as it would a change from another
 * process.
 */
export function credentialsRefreshed(svc: TestService): Promise<void> {
  return sleep(svc.config.credentialCacheMs + EXPIRY_MARGIN_MS);
}

/**
 * Waits until the service reads clamd's versions and the store's verdict-cache version again
 * (ASSAY_ENGINE_VERSIONS_MAX_AGE_MS): a change made since is then part of the verdict cache's key.
 */
export function engineVersionsReread(svc: TestService): Promise<void> {
  return sleep(svc.config.engineVersionsMaxAgeMs + EXPIRY_MARGIN_MS);
}

export const quietLogger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** The names of the files in a service's spool. */
export function spoolOf(dataDir: string): string[] {
  return readdirSync(join(dataDir, 'spool'));
}

export function tempDir(prefix = 'assay-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * One real clamd per test file: starting one per test would dominate the suite's time. Its limits
 * sit above `maxFileSize` (a smaller one makes a clamd that refuses larger streams).
 */
export async function startSharedClamd(
  maxFileSize = 200 * 1024 * 1024,
  /** Official and third-party databases it loads beside Assay's own; default none. */
  systemDatabaseDir?: string,
): Promise<{
  socket: string;
  clamd: ManagedClamd;
  stop(): Promise<void>;
}> {
  const clamdPath = findClamdBinary();
  if (clamdPath === null)
    throw new Error('clamd is not installed; run ./setup.sh or apt-get install clamav-daemon');
  const dataDir = tempDir('assay-clamd-');
  const clamd = new ManagedClamd({
    dataDir,
    clamdPath,
    maxFileSize,
    // Assay's own databases only by default: what the machine has in /var/lib/clamav is not the
    // tests'.
    systemDatabaseDir: systemDatabaseDir ?? join(dataDir, 'no-official-databases'),
    // Changes are loaded when a test says so (RELOAD, a restart), never by the hourly look.
    signatureCheckMs: 3_600_000,
    logger: quietLogger,
  });
  await clamd.start();
  const address = clamd.address;
  if (address.kind !== 'unix') throw new Error('managed clamd listens on a unix socket');
  return {
    socket: address.path,
    clamd,
    async stop() {
      await clamd.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The shared clamd of a test file: started before its tests, stopped after them. Read `socket`
 * inside tests (it exists only once the file's `before` has run).
 */
export function useSharedClamd(): { readonly socket: string } {
  let clamd: Awaited<ReturnType<typeof startSharedClamd>> | null = null;
  before(async () => {
    clamd = await startSharedClamd();
  });
  after(async () => {
    await clamd?.stop();
  });
  return {
    get socket() {
      if (clamd === null) throw new Error('the shared clamd is not started yet');
      return clamd.socket;
    },
  };
}

export interface TestService {
  url: string;
  dataDir: string;
  /** The configuration it was started with. */
  config: Config;
  keyId: string;
  secret: string;
  accountId: string;
  /** `Authorization` header value of the test key. */
  auth: string;
  service: RunningService;
  /** The service's store, for setting up what the API cannot (users, balances). */
  store: Store;
  /** Signs the account's callbacks. */
  callbackSecret: string;
  /** Creates another account with one key, for isolation tests. */
  createAccountKey(): Promise<{
    accountId: string;
    keyId: string;
    secret: string;
    auth: string;
    callbackSecret: string;
  }>;
}

export function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

/**
 * Builds and starts the real service (real HTTP on a free port, a fresh data dir and database: SQLite, or PostgreSQL with ASSAY_TEST_STORE=postgres)
 * with one account and key; stopped and removed when the test ends. `hooks` inject faults. It
 * reuses credentials for TEST_CREDENTIAL_CACHE_MS unless `env` sets ASSAY_CREDENTIAL_CACHE_MS.
 */
export async function buildService(
  t: TestContext,
  env: Record<string, string> = {},
  logger: Logger = quietLogger,
  hooks: ServiceTestHooks = {},
  /** Runs on the data dir and its migrated store before the service starts. */
  beforeStart?: (dataDir: string, store: Store) => Promise<void>,
): Promise<TestService> {
  // A data dir given in `env` is another service's (a restart): its store is that service's too.
  const dataDir = env.ASSAY_DATA_DIR ?? tempDir();
  const config = loadConfig({
    ASSAY_PORT: '0',
    ASSAY_DATA_DIR: dataDir,
    ASSAY_CREDENTIAL_CACHE_MS: String(TEST_CREDENTIAL_CACHE_MS),
    ...TEST_POOL_ENV,
    ...(await prepareStore(dataDir)),
    ...env,
  });
  const store = await openStore(config);
  const accounts = new AccountService(store);
  const createAccountKey = async () => {
    const account = await accounts.createAccount({ name: 'Test account' });
    const { key, secret } = await accounts.createKey(account.id);
    return {
      accountId: account.id,
      keyId: key.id,
      secret,
      auth: basic(key.id, secret),
      callbackSecret: account.callbackSecret,
    };
  };
  const first = await createAccountKey();
  await beforeStart?.(dataDir, store);
  const service = await startService(config, logger, hooks);
  t.after(async () => {
    await service.stop();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return { url: service.url, dataDir, config, service, store, ...first, createAccountKey };
}
