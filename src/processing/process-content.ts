import type { Principal } from '../accounts/account-service.js';
import { newId } from '../accounts/credentials.js';
import type {
  DetectionCategory,
  LegacyJobOptions,
  StoredFile,
  TraceEvent,
} from '../store/records.js';
import type { Store } from '../store/store.js';
import type { SubmissionVersion } from './file-result.js';
import type { ResultRecorder } from './result-recorder.js';
import type { ContentScanner, ContentVerdict } from './scan-content.js';

export interface Submission {
  principal: Principal;
  version: SubmissionVersion;
  metadata: Record<string, string>;
  callback: string | null;
  /** v1.0 only: its callbacks and result format. */
  legacy?: LegacyJobOptions | null;
}

/** A verdict with the moments it spans, for the result's date and its trace. */
export interface ScannedContent {
  verdict: ContentVerdict;
  receivedAt: string;
  scannedAt: string;
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
  ) {}

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
    },
  ): Promise<ScannedContent> {
    const receivedAt = options.receivedAt ?? new Date().toISOString();
    const maxBytes = options.maxBytes ?? this.maxFileSize;
    const verdict = await this.scanner.scan(source, {
      maxBytes,
      categories: options.categories,
      signal: options.signal,
    });
    return { verdict, receivedAt, scannedAt: new Date().toISOString() };
  }

  /**
   * Records a scanned item. `context.jobId` names the asynchronous job it finishes (whose
   * `received` event is already in the trace); `context.events` come before the verdicts;
   * `context.id` is the id a synchronous item gets (v1.0 ids are UUIDs), a new one by default.
   */
  async record(
    scanned: ScannedContent,
    submission: Submission,
    context: { jobId?: string; id?: string; events?: TraceEvent[] } = {},
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
    };
    const events = context.jobId === undefined ? [event('received', scanned.receivedAt)] : [];
    events.push(...(context.events ?? []));
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
    });
    return file;
  }

  /** Records a finished item that has no verdict (its download failed): an `error`, never clean. */
  async recordFailure(
    id: string,
    submission: Submission,
    error: string,
    receivedAt: string,
    events: TraceEvent[],
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
    };
    events.push(event(`failed: ${error}`));
    await this.recorder.complete({
      file,
      version: submission.version,
      legacy: submission.legacy ?? null,
      jobId: id,
      events,
    });
    return file;
  }

  async findFile(principal: Principal, id: string): Promise<StoredFile | null> {
    return this.store.files.findForAccount(principal.accountId, id);
  }
}
