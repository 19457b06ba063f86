import { CredentialCache } from '../accounts/credential-cache.js';
import type { ApiKey, Job, JobStage } from '../domain/records.js';
import type { OutboundOptions } from '../outbound/guarded-http.js';
import type { VerdictsToClaim } from '../store/claimed-verdicts.js';
import type { Store } from '../store/store.js';
import type { StageLimits } from './fair-claims.js';
import type { SubmissionVersion } from './file-result.js';
import { LEGACY_CATEGORIES } from './legacy-result.js';
import type { ObjectSource } from './object-source.js';
import type { Submission } from './process-content.js';
import type { SlotHandOff } from './result-recorder.js';

/** What scanning a job's content needs to know beyond the job. */
export interface JobScanOptions {
  fetch: OutboundOptions & { maxBytes: number };
  /** v1.0 jobs' limits: uploads up to the legacy POST size, fetches up to the engine's. */
  legacy: { maxPostBytes: number; maxFetchBytes: number };
}

/**
 * The submission each job was accepted as, with its key's categories as they are now: a key is read
 * from the store at most once per `ttlMs` (the API's own credential cache time,
 * ASSAY_CREDENTIAL_CACHE_MS), not once a job.
 */
export class JobSubmissions {
  private readonly keys: CredentialCache<ApiKey | null>;

  constructor(
    private readonly store: Store,
    ttlMs: number,
  ) {
    this.keys = new CredentialCache(ttlMs);
  }

  async of(job: Job): Promise<Submission> {
    const key =
      job.apiVersion === 'v1.0'
        ? null
        : await this.keys.get(job.apiKeyId, () => this.store.apiKeys.find(job.apiKeyId));
    return {
      principal: {
        accountId: job.accountId,
        keyId: job.apiKeyId,
        tokenId: null,
        detectionCategories:
          job.apiVersion === 'v1.0' ? [...LEGACY_CATEGORIES] : (key?.detectionCategories ?? []),
        // Accepted work is finished even if the balance ran out since: it was paid for at submission.
        balanceExhausted: false,
        balanceEnforced: false,
        // Rate limits apply to requests; the job's request was already counted.
        rateLimit: null,
        accountRateLimit: null,
      },
      version: job.apiVersion as SubmissionVersion,
      metadata: job.metadata,
      callback: job.callback,
      legacy: job.legacy ?? null,
      fileName: job.fileName ?? null,
    };
  }
}

/** The most a job's content may be: v1.0 has limits of its own. */
export function fetchLimits(job: Job, options: JobScanOptions): JobScanOptions['fetch'] {
  if (job.apiVersion !== 'v1.0') return options.fetch;
  return { ...options.fetch, maxBytes: options.legacy.maxFetchBytes };
}

/** What came of a job's work, to be recorded. */
export interface JobOutcome {
  /**
   * Records it (a store write: a failure here is the store's, never the item's); `handOff`: the
   * job's slot, handed on with the same commit where the stage records a result (the scan).
   */
  record(handOff?: SlotHandOff): Promise<unknown>;
  /** The job's spool file is no longer needed once the outcome is recorded. */
  spoolDone: boolean;
}

/**
 * The work of one job stage (download-job.ts, scan-job.ts): a claimed job's work, resolving to
 * its outcome. A failure the item is to blame for (RemoteContentError, ContentNotExaminedError)
 * is thrown for the runner to record; anything else is retried.
 */
export interface JobWork {
  run(job: Job, submission: Submission): Promise<JobOutcome>;
}

/** What the job runner is given: how each job is scanned, and its stages, retries and leases. */
export interface JobRunnerOptions extends JobScanOptions {
  /**
   * Slots in this process and per-account caps (in all processes) of each stage: `scan`
   * (ASSAY_JOB_CONCURRENCY, ASSAY_ACCOUNT_JOB_CONCURRENCY) and `download` (ASSAY_FETCH_CONCURRENCY,
   * ASSAY_ACCOUNT_FETCH_CONCURRENCY: fetches downloading or downloaded and not yet scanned).
   */
  stages: Record<JobStage, StageLimits>;
  /** Wait before trying again a job whose engine could not scan (doubling for counted failures). */
  engineRetryMs: number;
  /** Attempts (outages excepted) after which a job ends as an error result. */
  maxAttempts: number;
  /** A job waiting out an engine outage ends as an error result once this old. */
  maxAgeMs: number;
  /** How long a claim holds a job; renewed while it runs, so a dead worker's jobs come back. */
  leaseMs: number;
  /** A job's key (its categories) is read from the store at most this often (0: every job). */
  credentialCacheMs: number;
  /**
   * The engine's temporary files are on the data dir's disk (managed clamd): a scan that fails
   * while that disk has no room for the content is a full disk to wait out, not the item's fault.
   */
  engineSharesDataDisk?: boolean;
  /**
   * What a claim of scans looks up with its jobs (VerdictCache.toClaim): their content's earlier
   * verdicts, in the claim's statement; absent or null, none.
   */
  verdictsToClaim?: () => VerdictsToClaim | null;
  /** Where the objects of watched buckets are read (their jobs' download stage). */
  objects?: ObjectSource;
}
