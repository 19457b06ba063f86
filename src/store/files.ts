import type { Kysely, Selectable } from 'kysely';
import type { StoredFile } from '../domain/records.js';
import type { Database, FilesTable } from './schema.js';

function toStoredFile(row: Selectable<FilesTable>): StoredFile {
  return {
    id: row.id,
    accountId: row.account_id,
    apiKeyId: row.api_key_id,
    checksum: row.checksum,
    sha256: row.sha256,
    contentLength: row.content_length === null ? null : Number(row.content_length),
    contentType: row.content_type,
    findings: row.findings === null ? null : (JSON.parse(row.findings) as string[]),
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    callback: row.callback,
    error: row.error,
    creationDate: row.creation_date,
  };
}

export class FileRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(file: StoredFile): Promise<void> {
    await this.db
      .insertInto('files')
      .values({
        id: file.id,
        account_id: file.accountId,
        api_key_id: file.apiKeyId,
        checksum: file.checksum,
        sha256: file.sha256,
        content_length: file.contentLength,
        content_type: file.contentType,
        findings: file.findings === null ? null : JSON.stringify(file.findings),
        metadata: JSON.stringify(file.metadata),
        callback: file.callback,
        error: file.error,
        creation_date: file.creationDate,
      })
      .execute();
  }

  /** Another account's file reads as absent, so ids never leak across accounts. */
  async findForAccount(accountId: string, id: string): Promise<StoredFile | null> {
    const row = await this.db
      .selectFrom('files')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return row ? toStoredFile(row) : null;
  }
}
