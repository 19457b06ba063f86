import type { Principal } from '../accounts/account-service.js';
import { newId } from '../accounts/credentials.js';
import type { StoredFile } from '../store/records.js';
import type { Store } from '../store/store.js';
import type { ContentScanner, ContentVerdict } from './scan-content.js';

export interface Submission {
  principal: Principal;
  metadata: Record<string, string>;
  callback: string | null;
}

/** A verdict together with the moment the content started to arrive. */
export interface ScannedContent {
  verdict: ContentVerdict;
  creationDate: string;
}

/** Turns content into a persistent result: scan first, then record with the submission's fields. */
export class ContentProcessor {
  constructor(
    private readonly store: Store,
    private readonly scanner: ContentScanner,
    readonly maxFileSize: number,
  ) {}

  /** Throws (recording nothing) when there is no complete verdict. */
  async scan(source: AsyncIterable<Buffer>): Promise<ScannedContent> {
    const creationDate = new Date().toISOString();
    const verdict = await this.scanner.scan(source, { maxBytes: this.maxFileSize });
    return { verdict, creationDate };
  }

  async record(scanned: ScannedContent, submission: Submission): Promise<StoredFile> {
    const { verdict } = scanned;
    const file: StoredFile = {
      id: newId(),
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
      creationDate: scanned.creationDate,
    };
    await this.store.files.insert(file);
    return file;
  }

  async findFile(principal: Principal, id: string): Promise<StoredFile | null> {
    return this.store.files.findForAccount(principal.accountId, id);
  }
}
