import type { Config } from './config.js';
import { clamdInDataDir, engineCapacity } from './engine-setup.js';
import type { OutboundOptions } from './outbound/guarded-http.js';
import type { JobRunnerOptions } from './processing/job-work.js';
import type { ObjectSource } from './processing/object-source.js';
import type { VerdictsToClaim } from './store/claimed-verdicts.js';

/** The job runner's options from the settings: its stages' slots, retries, leases and limits. */
export function jobRunnerOptions(
  config: Config,
  parts: {
    fetch: OutboundOptions & { maxBytes: number };
    verdictsToClaim: () => VerdictsToClaim | null;
    objects: ObjectSource;
  },
): JobRunnerOptions {
  return {
    stages: {
      scan: { slots: config.jobConcurrency, perAccount: config.accountJobConcurrency },
      download: { slots: config.fetchConcurrency, perAccount: config.accountFetchConcurrency },
    },
    engineRetryMs: config.engineRetryMs,
    maxAttempts: config.jobMaxAttempts,
    maxAgeMs: config.jobMaxAgeMs,
    leaseMs: config.jobLeaseMs,
    credentialCacheMs: config.credentialCacheMs,
    verdictsToClaim: parts.verdictsToClaim,
    objects: parts.objects,
    engineSharesDataDisk: clamdInDataDir(config),
    fetch: parts.fetch,
    legacy: {
      maxPostBytes: config.legacyMaxPostSize,
      maxFetchBytes: engineCapacity(config),
    },
  };
}
