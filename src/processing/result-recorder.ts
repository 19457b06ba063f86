import { newId } from '../accounts/credentials.js';
import type {
  CallbackDelivery,
  Job,
  LegacyJobOptions,
  StoredFile,
  TraceEvent,
} from '../domain/records.js';
import { redactUrl } from '../outbound/target.js';
import type { VerdictsToClaim } from '../store/claimed-verdicts.js';
import type { RunningJobs } from '../store/job-claims.js';
import type { ClaimWithResults, ResultRows } from '../store/results.js';
import { StatementGroups } from '../store/statement-groups.js';
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
  /** The finished job's slot, handed on with the same commit (see SlotHandOff). */
  handOff?: SlotHandOff;
}

/**
 * The slot of the job a result finishes, handed to its account's oldest due job in the commit
 * that records the result (the job runner's shortcut: claim-shortcuts.ts), so the account's count
 * toward its cap does not change. The hand-offs of a group of results are one claim, in the
 * results' own statement on PostgreSQL. `taken` hears the job once the commit is done (null: none
 * was due): a rolled-back attempt's claim is never acted on; a write retried alone claims again.
 */
export interface SlotHandOff {
  accountId: string;
  /** Jobs running in the process: never claimed again. */
  running: RunningJobs;
  leaseMs: number;
  /** The claimed jobs' earlier verdicts come with them (VerdictsToClaim); null: not looked up. */
  verdicts?: VerdictsToClaim | null;
  taken: (job: Job | null) => void;
}

interface Pending {
  rows: ResultRows;
  deliveries: CallbackDelivery[];
  handOff: SlotHandOff | undefined;
}

/**
 * Records a finished item at once: its result, its trace, its callback in the outbox, and the end
 * of its job. Either all of it is stored or none, so a crash never loses a callback or a job.
 *
 * Results finishing together (in the same turn of the event loop, or while the previous group is
 * written) are written together: on PostgreSQL one statement for all of them, in a transaction
 * only when callbacks go into the outbox with them. A group that fails is written again one item
 * at a time, so one item's failure is its own.
 */
export class ResultRecorder {
  private readonly groups: StatementGroups<Pending, boolean>;

  /**
   * @param onGroupFailed told why a group's write failed (a dropped connection, one item's
   * error) before its results are written one at a time.
   */
  constructor(
    private readonly store: Store,
    private readonly onCallbackQueued: () => void,
    private readonly events: ProcessingEvents = UNOBSERVED,
    onGroupFailed: (error: unknown, results: number) => void = () => {},
  ) {
    this.groups = new StatementGroups((group) => this.write(group), {
      alone: async (item) => (await this.write([item]))[0] === true,
      onGroupFailed,
    });
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
    handOff,
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
    // An item with a verdict costs one credit; one that ends in an error (no verdict: a failed
    // download, content no engine could decide on, a job given up) costs nothing. The credit
    // taken at acceptance is kept, or given back with the result, in the same write.
    const due = (file.findings === null ? 0 : 1) - (creditHeld ? 1 : 0);
    const rows: ResultRows = {
      file,
      ...(jobId === undefined ? {} : { jobId }),
      verdictKey,
      credits: -due,
      events: [...events, ...refused],
    };
    const recorded = await this.groups.get({ rows, deliveries, handOff });
    if (recorded) this.events.itemRecorded(file.findings);
    if (recorded && deliveries.length > 0) this.onCallbackQueued();
    return recorded;
  }

  /** The group's results, the callbacks of those written and its hand-offs, in one commit. */
  private async write(group: readonly Pending[]): Promise<boolean[]> {
    const rows = group.map((item) => item.rows);
    const handOffs = group.flatMap((item) => (item.handOff === undefined ? [] : [item.handOff]));
    // Only the one account with due jobs hands off (ClaimShortcuts.mayHandOff); should another
    // ask meanwhile, its slots are left to a round.
    const account = handOffs[0]?.accountId;
    const handing = handOffs.filter((handOff) => handOff.accountId === account);
    const claim = claimFor(handing);
    let outcome: { written: boolean[]; claimed: Job[] };
    if (group.every((item) => item.deliveries.length === 0)) {
      outcome = await this.store.results.recordFinishedClaiming(rows, claim);
    } else {
      outcome = await this.store.transaction(async (store) => {
        const recorded = await store.results.recordFinishedClaiming(rows, claim);
        for (const [i, item] of group.entries()) {
          if (!recorded.written[i]) continue;
          for (const delivery of item.deliveries) await store.callbacks.enqueue(delivery);
        }
        return recorded;
      });
    }
    const claimed = outcome.claimed.values();
    for (const handOff of handOffs) {
      handOff.taken(handOff.accountId === account ? (claimed.next().value ?? null) : null);
    }
    return outcome.written;
  }
}

/** One claim for the hand-offs of one account (none: no claim). */
function claimFor(handOffs: readonly SlotHandOff[]): ClaimWithResults | undefined {
  const first = handOffs[0];
  if (first === undefined) return undefined;
  const now = Date.now();
  return {
    stage: 'scan',
    accountId: first.accountId,
    limit: handOffs.length,
    now: new Date(now).toISOString(),
    leaseUntil: new Date(now + first.leaseMs).toISOString(),
    skip: [...first.running.keys()],
    verdicts: first.verdicts,
  };
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
