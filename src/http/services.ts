import type { AccountService, Principal } from '../accounts/account-service.js';
import type { RequestLimits } from '../accounts/request-limits.js';
import type { Config } from '../config.js';
import type { ClamdClient } from '../engines/clamav/clamd-client.js';
import type { OutboundOptions } from '../outbound/guarded-http.js';
import type { JobRunner } from '../processing/job-runner.js';
import type { ContentProcessor } from '../processing/process-content.js';
import type { QueueStatus } from '../processing/queue-status.js';
import type { SpoolQuota } from '../processing/spool-quota.js';
import type { SyncScanLimit } from '../processing/sync-scan-limit.js';
import type { Spool } from '../store/spool.js';
import type { Store } from '../store/store.js';

/** What the transport layer may call; built once by the service and handed to the app. */
export interface Services {
  config: Config;
  store: Store;
  accounts: AccountService;
  /** Keys' rate limits and failed authentications per address. */
  requestLimits: RequestLimits;
  processor: ContentProcessor;
  clamd: ClamdClient;
  spool: Spool;
  jobs: JobRunner;
  /** The queue as this process works it; null when it runs no jobs (role `api`). */
  queue: QueueStatus | null;
  outbound: { fetch: OutboundOptions & { maxBytes: number } };
  /** ASSAY_SYNC_CONCURRENCY: synchronous scans at once. */
  syncScans: SyncScanLimit;
  /** ASSAY_SPOOL_MAX_BYTES and ASSAY_ACCOUNT_SPOOL_MAX_BYTES: bytes held for async work. */
  spoolQuota: SpoolQuota;
}

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
  interface FastifyRequest {
    /** Set by the authentication hook on every authenticated route. */
    principal: Principal | null;
  }
}
