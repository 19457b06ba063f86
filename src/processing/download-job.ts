import type { Job } from '../domain/records.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';
import { fetchLimits, type JobOutcome, type JobScanOptions, type JobWork } from './job-work.js';
import type { ObjectSource } from './object-source.js';
import { downloadToSpool } from './remote-content.js';

/**
 * A fetch's first stage: its content is downloaded into the spool under the job's id, synced (the
 * job then waits for a scanning slot with only that file to go on), within the fetch deadline.
 * The outcome moves the job to the scan stage with its `downloaded` trace line, in one
 * transaction. A failure the remote is to blame for is a RemoteContentError naming it. An object
 * of a watched bucket (kind `bucket`) comes from `objects` the same way.
 */
export class DownloadJob implements JobWork {
  constructor(
    private readonly store: Store,
    private readonly spool: ContentSpool,
    private readonly options: JobScanOptions,
    private readonly objects: ObjectSource | null = null,
  ) {}

  async run(job: Job): Promise<JobOutcome> {
    // A bucket's object is still in its bucket: a copy lost in a crash is read again, unsynced.
    const target = { spool: this.spool, spoolId: job.id, durable: job.kind !== 'bucket' };
    const limits = fetchLimits(job, this.options);
    let spooled: Awaited<ReturnType<typeof downloadToSpool>>;
    if (job.kind === 'bucket') {
      if (this.objects === null) throw new Error('this process reads no watched bucket');
      spooled = await this.objects.download(job, limits.maxBytes, target);
    } else {
      spooled = await downloadToSpool(job.location ?? '', limits, target);
    }
    return {
      // The scan reads the file.
      spoolDone: false,
      record: async () => {
        const moved = await this.store.transaction(async (store) => {
          if (!(await store.jobs.downloaded(job.id, spooled, new Date().toISOString()))) {
            return false;
          }
          const { message, timestamp } = spooled.downloaded;
          await store.trace.append(job.id, message, timestamp);
          return true;
        });
        // Erased while it downloaded (its account deleted): nothing will read or sweep soon what
        // it spooled, which no row names (issue 25). Another worker's claim keeps its row.
        if (!moved && (await this.store.jobs.find(job.id)) === null) {
          await this.spool.remove(spooled.key);
        }
      },
    };
  }
}
