import type { Logger } from 'pino';
import type { AccountService } from '../accounts/account-service.js';
import type { RequestLimits } from '../accounts/request-limits.js';
import type { RateLimitSetting } from '../config.js';
import type { IcapMetrics } from '../metrics/icap-metrics.js';
import type { ContentProcessor } from '../processing/process-content.js';
import type { ServiceTag } from '../processing/service-tag.js';
import type { SyncScanLimit } from '../processing/sync-scan-limit.js';
import type { BodyCopies } from './body-copies.js';

/** What content over ASSAY_MAX_FILE_SIZE gets: blocked, or passed unscanned with a header. */
export type IcapOversize = 'block' | 'pass';

/** The ICAP listener's settings (ASSAY_ICAP_*), as config.ts reads them. */
export interface IcapSettings {
  /** Plain ICAP's port, or null when off. */
  port: number | null;
  /** ICAPS (TLS, with ASSAY_TLS_CERT and ASSAY_TLS_KEY) port, or null when off. */
  tlsPort: number | null;
  /** Client addresses and CIDRs that may connect, as given (checked at start). */
  allow: string;
  /** ICAP service name to the id of the API key it acts as. */
  services: ReadonlyMap<string, string>;
  oversize: IcapOversize;
}

/** The domain services and settings every ICAP connection works with. */
export interface IcapContext {
  settings: IcapSettings;
  accounts: AccountService;
  requestLimits: RequestLimits;
  /** The service's default key rate limit (ASSAY_RATE_LIMIT), the ceiling of each key's. */
  rateLimit: RateLimitSetting;
  syncScans: SyncScanLimit;
  processor: ContentProcessor;
  copies: BodyCopies;
  tag: ServiceTag;
  metrics: IcapMetrics;
  logger: Logger;
  maxFileSize: number;
  /** The longest a client may send nothing in the middle of a request. */
  idleMs: number;
  /** The longest a persistent connection may wait for its next request. */
  keepAliveMs: number;
  /** `Max-Connections` in OPTIONS: what a service's key's synchronous-scan slots can take. */
  maxConnections: number;
  /** `Service` in OPTIONS. */
  serverName: string;
}
