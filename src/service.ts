import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import { AccountService } from './accounts/account-service.js';
import type { Config } from './config.js';
import { ClamdClient, parseClamdAddress } from './engines/clamav/clamd-client.js';
import { findClamdBinary, ManagedClamd } from './engines/clamav/managed-clamd.js';
import { ContentTypeDetector } from './engines/content-type.js';
import { buildApp } from './http/app.js';
import { ContentProcessor } from './processing/process-content.js';
import { ContentScanner } from './processing/scan-content.js';
import { openSqliteStore } from './store/store.js';

export interface RunningService {
  /** Base URL the server listens on, e.g. http://127.0.0.1:4000 */
  url: string;
  managedClamd: ManagedClamd | null;
  stop(): Promise<void>;
}

export function createLogger(config: Config, destination?: DestinationStream): Logger {
  const options: LoggerOptions = {
    level: config.logLevel,
    // Credentials never reach the logs, whatever a future serializer includes.
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.secret', 'secret'],
      censor: '[redacted]',
    },
  };
  return destination === undefined ? pino(options) : pino(options, destination);
}

async function startClamd(config: Config, logger: Logger): Promise<ManagedClamd | null> {
  if (config.clamd.mode === 'external') return null;
  const clamdPath = findClamdBinary();
  if (clamdPath === null) {
    throw new Error(
      'clamd is not installed: install it (apt-get install clamav-daemon) or set ASSAY_CLAMD to a running clamd',
    );
  }
  const managed = new ManagedClamd({
    dataDir: config.dataDir,
    clamdPath,
    maxFileSize: config.maxFileSize,
    logger: logger.child({ component: 'clamd' }),
  });
  await managed.start();
  return managed;
}

/** Opens the store, starts (or connects to) clamd, and serves the API until stop(). */
export async function startService(
  config: Config,
  logger = createLogger(config),
): Promise<RunningService> {
  const store = await openSqliteStore(config.dataDir);
  const accounts = new AccountService(store);
  if (config.bootstrapCredentials !== null) {
    const { keyId, secret } = config.bootstrapCredentials;
    const outcome = await accounts.ensureBootstrapKey(keyId, secret);
    logger.info({ key: keyId, outcome }, 'bootstrap credentials');
  }
  let managedClamd: ManagedClamd | null = null;
  let detector: ContentTypeDetector | null = null;
  const release = async () => {
    await detector?.close();
    await managedClamd?.stop();
    await store.close();
  };
  try {
    managedClamd = await startClamd(config, logger);
    const clamd = new ClamdClient(
      managedClamd?.address ??
        parseClamdAddress(config.clamd.mode === 'external' ? config.clamd.address : ''),
    );
    detector = await ContentTypeDetector.create((message) => logger.warn(message));
    const scanner = new ContentScanner(clamd, detector, config.findingsStyle);
    const processor = new ContentProcessor(store, scanner, config.maxFileSize);
    const app = await buildApp({ config, store, accounts, processor, clamd }, logger);
    const url = await app.listen({ host: config.host, port: config.port });
    let stopped: Promise<void> | null = null;
    return {
      url,
      managedClamd,
      stop() {
        // Idempotent: a signal and a caller may both ask.
        stopped ??= app.close().then(release);
        return stopped;
      },
    };
  } catch (error) {
    await release();
    throw error;
  }
}
