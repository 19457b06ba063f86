import type { Job } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';
import { fetchLimits, type JobOutcome, type JobScanOptions, type JobWork } from './job-work.js';
import { downloadToSpool } from './remote-content.js';

/**
 * A fetch's first stage: its content is downloaded into the spool under the job's id, synced (the
 * job then waits for a scanning slot with only that file to go on), within the fetch deadline.
 * The outcome moves the job to the scan stage with its `downloaded` trace line, in one
 * transaction. A failure the remote is to blame for is a RemoteContentError naming it.
 */
export class DownloadJob implements JobWork {
  constructor(
    private readonly store: Store,
    private readonly spool: ContentSpool,
    private readonly options: JobScanOptions,
  ) {}

  async run(job: Job): Promise<JobOutcome> {
    const spooled = await downloadToSpool(job.location ?? '', fetchLimits(job, this.options), {
      spool: this.spool,
      spoolId: job.id,
      durable: true,
    });
    return {
      // The scan reads the file.
      spoolDone: false,
      next: 'scan',
      record: () =>
        this.store.transaction(async (store) => {
          const { message, timestamp } = spooled.downloaded;
          await store.trace.append(job.id, message, timestamp);
          await store.jobs.downloaded(job.id, spooled, new Date().toISOString());
        }),
    };
  }
}
