import type { Job, TraceEvent } from '../domain/records.js';
import type { OutboundOptions } from '../outbound/guarded-http.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';
import type { SubmissionVersion } from './file-result.js';
import { LEGACY_CATEGORIES } from './legacy-result.js';
import type { ContentProcessor, ScannedContent, Submission } from './process-content.js';
import { fetchAndScan } from './remote-content.js';

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

/** The job's content, spooled or downloaded, through the engines of its key's categories. */
export async function scanJob(
  job: Job,
  submission: Submission,
  processor: ContentProcessor,
  spool: ContentSpool,
  options: JobScanOptions,
): Promise<{ scanned: ScannedContent; events: TraceEvent[] }> {
  const legacy = submission.version === 'v1.0' ? options.legacy : null;
  const categories = submission.principal.detectionCategories;
  if (job.kind === 'upload') {
    if (job.spoolKey === null) throw new Error(`upload job ${job.id} has no spool file`);
    const scanned = await processor.scan(spool.read(job.spoolKey), {
      categories,
      receivedAt: job.creationDate,
      maxBytes: legacy?.maxPostBytes,
    });
    return { scanned, events: [] };
  }
  // The download and the scan end at the fetch deadline (a RemoteContentError naming the remote).
  // Downloaded into the spool under the job's id, then scanned; the file goes with the attempt.
  const { scanned, downloaded } = await fetchAndScan(
    processor,
    job.location ?? '',
    legacy === null ? options.fetch : { ...options.fetch, maxBytes: legacy.maxFetchBytes },
    { spool, spoolId: job.id, receivedAt: job.creationDate, categories },
  );
  return { scanned, events: [downloaded] };
}
