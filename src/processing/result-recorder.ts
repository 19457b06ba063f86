import { newId } from '../accounts/credentials.js';
import type { StoredFile, TraceEvent } from '../store/records.js';
import type { Store } from '../store/store.js';
import { type ApiVersion, renderFileResult } from './file-result.js';

export interface Completion {
  file: StoredFile;
  /** The result is rendered for callbacks as this version's `GET /files/{id}` renders it. */
  version: ApiVersion;
  /** The job this result finishes, removed in the same transaction. */
  jobId?: string;
  events: TraceEvent[];
}

/**
 * Records a finished item at once: its result, its trace, its callback in the outbox, and the end
 * of its job. Either all of it is stored or none, so a crash never loses a callback or a job.
 */
export class ResultRecorder {
  constructor(
    private readonly store: Store,
    private readonly onCallbackQueued: () => void,
  ) {}

  /** False when the job was already finished (by an earlier run that outlived a restart). */
  async complete({ file, version, jobId, events }: Completion): Promise<boolean> {
    const now = new Date().toISOString();
    const recorded = await this.store.transaction(async (store) => {
      if (jobId !== undefined && !(await store.jobs.delete(jobId))) return false;
      await store.files.insert(file);
      // Each processed item costs one credit; a failed download processed nothing.
      if (file.findings !== null) await store.accounts.consume(file.accountId, 1);
      await store.trace.appendAll(file.id, events);
      if (file.callback !== null) {
        await store.callbacks.enqueue({
          id: newId(),
          fileId: file.id,
          accountId: file.accountId,
          url: file.callback,
          body: JSON.stringify(renderFileResult(file, version)),
          state: 'pending',
          attempts: 0,
          nextAttemptAt: now,
          lastError: null,
          creationDate: now,
          finishedDate: null,
        });
      }
      return true;
    });
    if (recorded && file.callback !== null) this.onCallbackQueued();
    return recorded;
  }
}
