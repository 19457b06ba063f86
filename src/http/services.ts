import type { AccountService, Principal } from '../accounts/account-service.js';
import type { ConsoleAccess } from '../accounts/console-access.js';
import type { RequestLimits } from '../accounts/request-limits.js';
import type { TokenList } from '../accounts/token-list.js';
import type { BucketWebhooks } from '../buckets/bucket-webhooks.js';
import type { Config } from '../config.js';
import type { ServiceMetrics } from '../metrics/service-metrics.js';
import type { OutboundOptions } from '../outbound/guarded-http.js';
import type { AccountActivity } from '../processing/account-activity.js';
import type { CallbackBrowser } from '../processing/callback-browser.js';
import type { FileBrowser } from '../processing/file-browser.js';
import type { Intake } from '../processing/intake.js';
import type { OperationsReport } from '../processing/operations-report.js';
import type { ContentProcessor } from '../processing/process-content.js';
import type { Readiness } from '../processing/readiness.js';
import type { RemoteScans } from '../processing/remote-content.js';
import type { SyncScanLimit } from '../processing/sync-scan-limit.js';

/** What the transport layer may call; built once by the service and handed to the app. */
export interface Services {
  config: Config;
  accounts: AccountService;
  /** Keys' rate limits and failed authentications per address. */
  requestLimits: RequestLimits;
  /** Synchronous scans, results and traces. */
  processor: ContentProcessor;
  /** Accepting asynchronous work: spooled uploads and fetches, committed as jobs. */
  intake: Intake;
  /** v2.2's synchronous `location` form: download, then scan. */
  remoteScans: RemoteScans;
  readiness: Readiness;
  outbound: { fetch: OutboundOptions & { maxBytes: number } };
  /** ASSAY_SYNC_CONCURRENCY: synchronous scans at once. */
  syncScans: SyncScanLimit;
  /** The web console's users and sessions. */
  console: ConsoleAccess;
  /** Items per day, for the console. */
  activity: AccountActivity;
  /** Every node, the queue and recent errors, for the console's operators. */
  operations: OperationsReport;
  /** What the transport reports (requests, refusals, connections) and GET /metrics reads. */
  metrics: ServiceMetrics;
  /** An account's results, a page at a time, and one with its trace, for the console. */
  files: FileBrowser;
  /** An account's callback deliveries, a page at a time; retry now. */
  callbacks: CallbackBrowser;
  /** An account's temporary tokens, a page at a time (never a whole id); revoke one. */
  tokens: TokenList;
  /** Watched buckets' webhook events (POST /bucket-events/:source). */
  bucketWebhooks: BucketWebhooks | null;
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
