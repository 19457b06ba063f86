import type { Job, JobStage, TraceEvent } from '../domain/records.js';
import type { OutboundOptions } from '../outbound/guarded-http.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';
import type { StageLimits } from './fair-claims.js';
import type { SubmissionVersion } from './file-result.js';
import { LEGACY_CATEGORIES } from './legacy-result.js';
import type { ContentProcessor, ScannedContent, Submission } from './process-content.js';
import { downloadToSpool, scanDownloaded } from './remote-content.js';

/** What scanning a job's content needs to know beyond the job. */
export interface JobScanOptions {
  fetch: OutboundOptions & { maxBytes: number };
  /** v1.0 jobs' limits: uploads up to the legacy POST size, fetches up to the engine's. */
  legacy: { maxPostBytes: number; maxFetchBytes: number };
}

/** The submission a job was accepted as, with its key's categories as they are now. */
export async function submissionOf(store: Store, job: Job): Promise<Submission> {
  const key = await store.apiKeys.find(job.apiKeyId);
  return {
    principal: {
      accountId: job.accountId,
      keyId: job.apiKeyId,
      tokenId: null,
      detectionCategories:
        job.apiVersion === 'v1.0' ? [...LEGACY_CATEGORIES] : (key?.detectionCategories ?? []),
      // Accepted work is finished even if the balance ran out since: it was paid for at submission.
      balanceExhausted: false,
      // Rate limits apply to requests; the job's request was already counted.
      rateLimit: null,
    },
    version: job.apiVersion as SubmissionVersion,
    metadata: job.metadata,
    callback: job.callback,
    legacy: job.legacy ?? null,
  };
}

/** The most a job's content may be: v1.0 has limits of its own. */
function fetchLimits(job: Job, options: JobScanOptions): JobScanOptions['fetch'] {
  if (job.apiVersion !== 'v1.0') return options.fetch;
  return { ...options.fetch, maxBytes: options.legacy.maxFetchBytes };
}

/**
 * Downloads a fetch job's content into the spool under the job's id, synced (the job then waits
 * for a scanning slot with only that file to go on), within the fetch deadline; a failure the
 * remote is to blame for is a RemoteContentError naming it.
 */
export async function downloadJob(
  job: Job,
  spool: ContentSpool,
  options: JobScanOptions,
): Promise<{ key: string; size: number; downloaded: TraceEvent }> {
  return downloadToSpool(job.location ?? '', fetchLimits(job, options), {
    spool,
    spoolId: job.id,
    durable: true,
  });
}

/** The job's spooled content (uploaded or downloaded) through the engines of its key's categories. */
export async function scanJob(
  job: Job,
  submission: Submission,
  processor: ContentProcessor,
  spool: ContentSpool,
  options: JobScanOptions,
): Promise<ScannedContent> {
  const legacy = submission.version === 'v1.0' ? options.legacy : null;
  const categories = submission.principal.detectionCategories;
  const { spoolKey } = job;
  if (spoolKey === null) throw new Error(`job ${job.id} has no spool file`);
  if (job.kind === 'upload') {
    return processor.scan(spool.read(spoolKey), {
      categories,
      receivedAt: job.creationDate,
      maxBytes: legacy?.maxPostBytes,
      accountId: job.accountId,
    });
  }
  // A downloaded fetch: its scan ends at the fetch deadline too (a RemoteContentError naming it).
  const limits = fetchLimits(job, options);
  return scanDownloaded(
    processor,
    () => spool.read(spoolKey),
    job.location ?? '',
    { timeoutMs: limits.totalTimeoutMs, maxBytes: limits.maxBytes },
    { receivedAt: job.creationDate, categories, accountId: job.accountId },
  );
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
  /**
   * The engine's temporary files are on the data dir's disk (managed clamd): a scan that fails
   * while that disk has no room for the content is a full disk to wait out, not the item's fault.
   */
  engineSharesDataDisk?: boolean;
}
