import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AccountService } from '../accounts/account-service.js';
import type { RequestLimits } from '../accounts/request-limits.js';
import type { Config } from '../config.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import { packageVersion } from '../paths.js';
import type { ContentProcessor } from '../processing/process-content.js';
import { ServiceTag } from '../processing/service-tag.js';
import type { SyncScanLimit } from '../processing/sync-scan-limit.js';
import { BodyCopies } from './body-copies.js';
import { IcapServer } from './icap-server.js';

/** How long a persistent ICAP connection may wait for its next request (c-icap's default). */
const KEEP_ALIVE_MS = 600_000;

export interface RunningIcap {
  urls: { icap: string | null; icaps: string | null };
  stop(): Promise<void>;
}

/**
 * Starts the ICAP listener where a port is set and the role serves the API (null otherwise), on
 * the same domain services as the API.
 */
export async function startIcap(
  config: Config,
  parts: {
    accounts: AccountService;
    requestLimits: RequestLimits;
    syncScans: SyncScanLimit;
    processor: ContentProcessor;
    metrics: ServiceMetrics;
    signatureParts: () => Promise<readonly string[] | null>;
    logger: Logger;
  },
): Promise<RunningIcap | null> {
  const settings = config.icap;
  // Workers serve no API, so no ICAP either.
  if (config.role === 'worker' || (settings.port === null && settings.tlsPort === null)) {
    return null;
  }
  const { logger } = parts;
  for (const [service, keyId] of settings.services) {
    if ((await parts.accounts.principalForKey(keyId)) === null) {
      logger.warn(
        { service, key: keyId },
        'the key of an ICAP service is missing or disabled: its requests get ICAP errors until it exists',
      );
    }
  }
  const copies = new BodyCopies(join(config.dataDir, 'icap'));
  await copies.init();
  const server = new IcapServer(
    {
      settings,
      accounts: parts.accounts,
      requestLimits: parts.requestLimits,
      rateLimit: config.rateLimit,
      syncScans: parts.syncScans,
      processor: parts.processor,
      copies,
      tag: new ServiceTag(parts.signatureParts),
      metrics: parts.metrics.icap([...settings.services.keys()]),
      logger,
      maxFileSize: config.maxFileSize,
      idleMs: config.requestIdleTimeoutMs,
      keepAliveMs: KEEP_ALIVE_MS,
      // Per service, so per key: its account's synchronous-scan slots in every process (more
      // connections would only get 503 busy). Squid shares it among its workers.
      maxConnections: config.accountSyncConcurrency * config.processes,
      serverName: `Assay ${packageVersion()} ICAP`,
    },
    { host: config.host, maxConnections: config.maxConnections, tls: config.tls },
  );
  let urls: RunningIcap['urls'];
  try {
    urls = await server.start();
  } catch (error) {
    await server.stop();
    await copies.close();
    throw error;
  }
  logger.info(urls, 'ICAP listening');
  return {
    urls,
    async stop() {
      await server.stop();
      await copies.close();
    },
  };
}
