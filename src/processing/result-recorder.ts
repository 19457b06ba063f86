import { newId } from '../accounts/credentials.js';
import type {
  CallbackDelivery,
  LegacyJobOptions,
  StoredFile,
  TraceEvent,
} from '../domain/records.js';
import { redactUrl } from '../outbound/target.js';
import { GroupedCommits } from '../store/grouped-commits.js';
import type { Store } from '../store/store.js';
import { destinationOf } from './callback-destinations.js';
import { renderFileResult, type SubmissionVersion } from './file-result.js';
import { legacyResultOf, renderLegacy } from './legacy-result.js';
import { type ProcessingEvents, UNOBSERVED } from './processing-events.js';

/** Largest callback body Assay sends, in bytes as sent (metadata counts JSON-encoded). */
export const MAX_CALLBACK_BODY_BYTES = 1024 * 1024;
/**
 * What metadata may take, JSON-encoded, on a submission with a callback: the body's limit less
 * room for the rest of a result (id, dates, checksum, findings, an error naming a URL).
 */
export const MAX_CALLBACK_METADATA_BYTES = MAX_CALLBACK_BODY_BYTES - 64 * 1024;

export interface Completion {
  file: StoredFile;
  /** The result is rendered for callbacks as this version's `GET /files/{id}` renders it. */
  version: SubmissionVersion;
  /** v1.0: a GET ping and a POST of the legacy result instead of the v2.x callback. */
  legacy: LegacyJobOptions | null;
  /** The job this result finishes, removed in the same transaction. */
  jobId?: string;
  events: TraceEvent[];
  /** The item's credit was taken when it was accepted (false only for jobs from before 0010). */
  creditHeld: boolean;
  /** The verdict cache's key of a complete verdict scanned for this item (VerdictCache). */
  verdictKey?: string | null;
}

/**
 * Records a finished item at once: its result, its trace, its callback in the outbox, and the end
 * of its job. Either all of it is stored or none, so a crash never loses a callback or a job.
 */
export class ResultRecorder {
  /** Results finishing together share a commit. */
  private readonly commits: GroupedCommits;

  constructor(
    store: Store,
    private readonly onCallbackQueued: () => void,
    private readonly events: ProcessingEvents = UNOBSERVED,
  ) {
    this.commits = new GroupedCommits(store);
  }

  /** False when the job was already finished (by an earlier run that outlived a restart). */
  async complete({
    file,
    version,
    legacy,
    jobId,
    events,
    creditHeld,
    verdictKey = null,
  }: Completion): Promise<boolean> {
    const deliveries: CallbackDelivery[] = [];
    const refused: TraceEvent[] = [];
    for (const delivery of callbacksOf(file, version, legacy)) {
      const size = Buffer.byteLength(delivery.body);
      if (size <= MAX_CALLBACK_BODY_BYTES) deliveries.push(delivery);
      // Submissions whose metadata could not fit are refused (400); this is the last guard.
      else
        refused.push({
          timestamp: new Date().toISOString(),
          message: `callback to ${redactUrl(delivery.url)} not sent: its body of ${size} bytes is over the limit of ${MAX_CALLBACK_BODY_BYTES}`,
        });
    }
    const recorded = await this.commits.run(async (store) => {
      if (jobId !== undefined && !(await store.jobs.delete(jobId))) return false;
      // An item with a verdict costs one credit; one that ends in an error (no verdict: a failed
      // download, content no engine could decide on, a job given up) costs nothing. The credit
      // taken at acceptance is kept, or given back with the result, in this one transaction.
      const due = (file.findings === null ? 0 : 1) - (creditHeld ? 1 : 0);
      await store.results.record({
        file,
        verdictKey,
        credits: -due,
        events: [...events, ...refused],
      });
      for (const delivery of deliveries) await store.callbacks.enqueue(delivery);
      return true;
    });
    if (recorded) this.events.itemRecorded(file.findings);
    if (recorded && deliveries.length > 0) this.onCallbackQueued();
    return recorded;
  }
}

/** The outbox rows of a finished item: v2.x POSTs its result; v1.0 pings and POSTs its own. */
function callbacksOf(
  file: StoredFile,
  version: SubmissionVersion,
  legacy: LegacyJobOptions | null,
): CallbackDelivery[] {
  const now = new Date().toISOString();
  const delivery = (
    url: string,
    method: CallbackDelivery['method'],
    body: string,
    contentType: string,
  ): CallbackDelivery => ({
    id: newId(),
    fileId: file.id,
    accountId: file.accountId,
    url,
    destination: destinationOf(url),
    method,
    body,
    contentType,
    state: 'pending',
    attempts: 0,
    nextAttemptAt: now,
    lastError: null,
    creationDate: now,
    finishedDate: null,
  });
  const deliveries: CallbackDelivery[] = [];
  if (version !== 'v1.0' && file.callback !== null) {
    const body = JSON.stringify(renderFileResult(file, version));
    deliveries.push(delivery(file.callback, 'POST', body, 'application/json'));
  }
  if (legacy?.callback) deliveries.push(delivery(legacy.callback, 'GET', '', ''));
  if (legacy?.postCallback) {
    const { body, contentType } = renderLegacy(legacyResultOf(file), legacy.format);
    deliveries.push(delivery(legacy.postCallback, 'POST', body, contentType));
  }
  return deliveries;
}
