import type { Logger } from 'pino';
import type { Principal } from '../accounts/account-service.js';
import { newId } from '../accounts/credentials.js';
import type {
  ClaimedVerdicts,
  DetectionCategory,
  Job,
  LegacyJobOptions,
  StoredFile,
  TraceEvent,
} from '../domain/records.js';
import type { Store } from '../store/store.js';
import { BalanceSpentError } from './errors.js';
import type { SubmissionVersion } from './file-result.js';
import type { ResultRecorder, SlotHandOff } from './result-recorder.js';
import type { ContentScanner, ContentVerdict } from './scan-content.js';

export interface Submission {
  principal: Principal;
  version: SubmissionVersion;
  metadata: Record<string, string>;
  callback: string | null;
  /** v1.0 only: its callbacks and result format. */
  legacy?: LegacyJobOptions | null;
  /** The name the client gave the file (keptFileName), kept with the result for the console. */
  fileName?: string | null;
}

/** A verdict with the moments it spans, for the result's date and its trace. */
export interface ScannedContent {
  verdict: ContentVerdict;
  receivedAt: string;
  scannedAt: string;
}

/** What a synchronous item's work hands back to be recorded. */
export interface SyncItem {
  scanned: ScannedContent;
  submission: Submission;
  /** Trace events before the verdicts (the download of a `location`). */
  events?: TraceEvent[];
  /** The result's id (v1.0 ids are UUIDs); a new one by default. */
  id?: string;
}

export function event(message: string, timestamp = new Date().toISOString()): TraceEvent {
  return { timestamp, message };
}

/** Turns content into a persistent result: scan first, then record with the submission's fields. */
export class ContentProcessor {
  constructor(
    private readonly store: Store,
    private readonly scanner: ContentScanner,
    private readonly recorder: ResultRecorder,
    readonly maxFileSize: number,
    private readonly logger: Logger,
  ) {}

  /**
   * A synchronous item. An account that enforces its balance pays before any work: one credit is
   * taken first (BalanceSpentError, before a byte of the body is read, when none is left), and
   * given back when no result is recorded (no verdict, a bad request, the client gone); a process
   * that dies during the scan keeps it. Any other account is charged with the result, in its
   * transaction: one write fewer per item.
   */
  async processSync(
    principal: Pick<Principal, 'accountId' | 'balanceEnforced'>,
    work: () => Promise<SyncItem>,
  ): Promise<StoredFile> {
    const { accountId } = principal;
    if (!principal.balanceEnforced) {
      const { scanned, submission, events, id } = await work();
      return this.record(scanned, submission, { id, events, creditHeld: false });
    }
    if (!(await this.store.accounts.takeCredit(accountId))) throw new BalanceSpentError();
    try {
      const { scanned, submission, events, id } = await work();
      return await this.record(scanned, submission, { id, events, creditHeld: true });
    } catch (error) {
      // The request's own failure is what the client must see; a lost refund is logged.
      await this.store.accounts
        .addCredits(accountId, 1)
        .catch((refundError: unknown) =>
          this.logger.error(
            { err: refundError, account: accountId },
            'could not give back the credit of a synchronous item that recorded nothing',
          ),
        );
      throw error;
    }
  }

  /** Throws (recording nothing) when there is no complete verdict; v1.0 has limits of its own. */
  async scan(
    source: AsyncIterable<Buffer>,
    options: {
      /** Only these categories' engines run (the key's, or MALWARE alone for v1.0). */
      categories: readonly DetectionCategory[];
      receivedAt?: string;
      maxBytes?: number;
      /** Abandons the scan (a deadline passed). */
      signal?: AbortSignal;
      /** The item's account: an earlier verdict for the same content may answer (VerdictCache). */
      accountId?: string;
      /** Its content's earlier verdicts, found with its job's claim. */
      earlierVerdicts?: ClaimedVerdicts;
    },
  ): Promise<ScannedContent> {
    const receivedAt = options.receivedAt ?? new Date().toISOString();
    const maxBytes = options.maxBytes ?? this.maxFileSize;
    const verdict = await this.scanner.scan(source, {
      maxBytes,
      categories: options.categories,
      signal: options.signal,
      accountId: options.accountId,
      earlierVerdicts: options.earlierVerdicts,
    });
    return { verdict, receivedAt, scannedAt: new Date().toISOString() };
  }

  /**
   * Records a scanned item. `context.jobId` names the asynchronous job it finishes (whose
   * `received` event is already in the trace); `context.events` come before the verdicts;
   * `context.id` is the id a synchronous item gets (v1.0 ids are UUIDs), a new one by default;
   * `context.creditHeld`: the item's credit was taken when it was accepted; `context.handOff`:
   * the finished job's slot, handed on with the same commit (SlotHandOff).
   */
  async record(
    scanned: ScannedContent,
    submission: Submission,
    context: {
      jobId?: string;
      id?: string;
      events?: TraceEvent[];
      creditHeld: boolean;
      handOff?: SlotHandOff;
    },
  ): Promise<StoredFile> {
    const { verdict } = scanned;
    const file: StoredFile = {
      id: context.jobId ?? context.id ?? newId(),
      accountId: submission.principal.accountId,
      apiKeyId: submission.principal.keyId,
      checksum: verdict.checksum,
      sha256: verdict.sha256,
      contentLength: verdict.contentLength,
      contentType: verdict.contentType,
      findings: verdict.findings,
      metadata: submission.metadata,
      callback: submission.callback,
      error: null,
      creationDate: scanned.receivedAt,
      fileName: submission.fileName ?? null,
    };
    const events = context.jobId === undefined ? [event('received', scanned.receivedAt)] : [];
    events.push(...(context.events ?? []));
    if (verdict.reusedFrom !== null) {
      events.push(
        event(
          `verdict of item ${verdict.reusedFrom.id} (received ${verdict.reusedFrom.receivedAt}) reused: the same content (SHA-256) was scanned by the same engines, engine and signature versions, for the same categories; not scanned again`,
          scanned.scannedAt,
        ),
      );
    }
    for (const report of verdict.engineReports) events.push(event(report, scanned.scannedAt));
    events.push(
      event(
        `processed: ${verdict.contentLength} bytes, findings ${JSON.stringify(verdict.findings)}`,
      ),
    );
    await this.recorder.complete({
      file,
      version: submission.version,
      legacy: submission.legacy ?? null,
      jobId: context.jobId,
      events,
      creditHeld: context.creditHeld,
      verdictKey: verdict.cacheKey,
      ...(context.handOff === undefined ? {} : { handOff: context.handOff }),
    });
    return file;
  }

  /**
   * Records a finished job that has no verdict (its download failed, no engine could decide, it
   * was given up): an `error`, never clean, and it costs nothing.
   */
  async recordFailure(
    id: string,
    submission: Submission,
    error: string,
    receivedAt: string,
    events: TraceEvent[],
    creditHeld: boolean,
  ): Promise<StoredFile> {
    const file: StoredFile = {
      id,
      accountId: submission.principal.accountId,
      apiKeyId: submission.principal.keyId,
      checksum: null,
      sha256: null,
      contentLength: null,
      contentType: null,
      findings: null,
      metadata: submission.metadata,
      callback: submission.callback,
      error,
      creationDate: receivedAt,
      fileName: submission.fileName ?? null,
    };
    events.push(event(`failed: ${error}`));
    await this.recorder.complete({
      file,
      version: submission.version,
      legacy: submission.legacy ?? null,
      jobId: id,
      events,
      creditHeld,
    });
    return file;
  }

  async findFile(principal: Principal, id: string): Promise<StoredFile | null> {
    return this.store.files.findForAccount(principal.accountId, id);
  }

  /** The trace of a result or of work not finished yet; null when the account has no such item. */
  async findTrace(owner: Pick<Principal, 'accountId'>, id: string): Promise<TraceEvent[] | null> {
    const item = await this.findItem(owner, id);
    return item === null ? null : this.store.trace.list(id);
  }

  /**
   * A result, or accepted work not finished yet, or null. The job's row goes in the transaction
   * that records the result: read between the two (the result not there yet, the job gone by the
   * time it is read, as concurrent transactions on PostgreSQL allow), the result is read again.
   */
  async findItem(
    owner: Pick<Principal, 'accountId'>,
    id: string,
  ): Promise<{ file: StoredFile } | { pending: Job } | null> {
    const { accountId } = owner;
    const file = await this.store.files.findForAccount(accountId, id);
    if (file !== null) return { file };
    const pending = await this.store.jobs.findForAccount(accountId, id);
    if (pending !== null) return { pending };
    const finished = await this.store.files.findForAccount(accountId, id);
    return finished === null ? null : { file: finished };
  }
}
