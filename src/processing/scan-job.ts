import { Readable } from 'node:stream';
import type { Job } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';
import { fetchLimits, type JobOutcome, type JobScanOptions, type JobWork } from './job-work.js';
import type { ContentProcessor, ScannedContent, Submission } from './process-content.js';
import { scanDownloaded } from './remote-content.js';

/**
 * The scan stage: a job's spooled content (an async upload, or a fetch's download) through the
 * engines of its key's categories; the outcome is its result, recorded with its trace, callback
 * and the item's credit in one transaction.
 */
export class ScanJob implements JobWork {
  constructor(
    private readonly processor: ContentProcessor,
    private readonly spool: ContentSpool,
    private readonly options: JobScanOptions,
  ) {}

  async run(job: Job, submission: Submission): Promise<JobOutcome> {
    const scanned = await this.scan(job, submission);
    return {
      spoolDone: true,
      record: (handOff) =>
        this.processor.record(scanned, submission, {
          jobId: job.id,
          creditHeld: job.creditHeld === true,
          ...(handOff === undefined ? {} : { handOff }),
        }),
    };
  }

  private async scan(job: Job, submission: Submission): Promise<ScannedContent> {
    const legacy = submission.version === 'v1.0' ? this.options.legacy : null;
    const categories = submission.principal.detectionCategories;
    const { spoolKey, content } = job;
    if (job.kind === 'upload' && content != null) {
      // A small upload kept in its job.
      return this.processor.scan(Readable.from([content], { objectMode: false }), {
        categories,
        receivedAt: job.creationDate,
        maxBytes: legacy?.maxPostBytes,
        accountId: job.accountId,
        earlierVerdicts: job.earlierVerdicts,
      });
    }
    if (spoolKey === null) throw new Error(`job ${job.id} has no spool file`);
    if (job.kind === 'upload') {
      return this.processor.scan(this.spool.read(spoolKey), {
        categories,
        receivedAt: job.creationDate,
        maxBytes: legacy?.maxPostBytes,
        accountId: job.accountId,
      });
    }
    // A downloaded fetch: its scan ends at the fetch deadline too (a RemoteContentError naming it).
    const limits = fetchLimits(job, this.options);
    return scanDownloaded(
      this.processor,
      () => this.spool.read(spoolKey),
      job.location ?? '',
      { timeoutMs: limits.totalTimeoutMs, maxBytes: limits.maxBytes },
      { receivedAt: job.creationDate, categories, accountId: job.accountId },
    );
  }
}
