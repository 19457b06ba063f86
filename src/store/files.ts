import { type Insertable, type Kysely, PostgresAdapter, type Selectable, sql } from 'kysely';
import type { ResultError } from '../domain/operations.js';
import type { ReusableVerdict, StoredFile } from '../domain/records.js';
import { prepared } from './prepared.js';
import { QueryTemplate } from './query-template.js';
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
    fileName: row.file_name,
  };
}

/** A file's row as a statement's arguments, in the order `fileRowValues` reads them. */
type FileRowArguments = readonly [
  id: string,
  accountId: string,
  apiKeyId: string,
  checksum: string | null,
  sha256: string | null,
  contentLength: number | null,
  contentType: string | null,
  findings: string | null,
  metadata: string,
  callback: string | null,
  error: string | null,
  creationDate: string,
  verdictKey: string | null,
  fileName: string | null,
  trace: string | null,
];

const FILE_ROW_ARGUMENTS = 15;

function fileRowArguments(
  file: StoredFile,
  verdictKey: string | null,
  trace: string | null,
): FileRowArguments {
  return [
    file.id,
    file.accountId,
    file.apiKeyId,
    file.checksum,
    file.sha256,
    file.contentLength,
    file.contentType,
    file.findings === null ? null : JSON.stringify(file.findings),
    JSON.stringify(file.metadata),
    file.callback,
    file.error,
    file.creationDate,
    verdictKey,
    file.fileName ?? null,
    trace,
  ];
}

/** The values of a file's insert; arguments passed through untouched (QueryTemplate). */
function fileRowValues(row: FileRowArguments): Insertable<FilesTable> {
  const [id, accountId, apiKeyId, checksum, sha256, contentLength, contentType, findings] = row;
  const [, , , , , , , , metadata, callback, error, creationDate, verdictKey, fileName, trace] =
    row;
  return {
    id,
    account_id: accountId,
    api_key_id: apiKeyId,
    checksum,
    sha256,
    content_length: contentLength,
    content_type: contentType,
    findings,
    metadata,
    callback,
    error,
    creation_date: creationDate,
    verdict_key: verdictKey,
    file_name: fileName,
    trace,
  };
}

// Every item runs these: built once (QueryTemplate).
const insertFile = new QueryTemplate(FILE_ROW_ARGUMENTS, (db, ...row: FileRowArguments) =>
  db.insertInto('files').values(fileRowValues(row)),
);

// The key is a cast and the limit a literal: SQLite re-prepares a statement at every run whose
// binding the planner may have read (`col = ?` beside an ORDER BY, `LIMIT ?`), and this lookup
// runs for every item; the plan is the same (files_verdict_key, key and date).
const findVerdict = new QueryTemplate(2, (db, verdictKey: string, since: string) =>
  db
    .selectFrom('files')
    .select(['id', 'content_type', 'findings', 'creation_date'])
    .where('verdict_key', '=', sql<string>`cast(${verdictKey} as text)`)
    .where('creation_date', '>=', since)
    .where('findings', 'is not', null)
    .orderBy('creation_date', 'desc')
    .limit(sql.lit(1)),
);

/** An account's results page: what it may be narrowed to, and where it starts. */
export interface FileListQuery {
  id?: string;
  /** SHA-1, lower-case hex, as the API shows it. */
  checksum?: string;
  /** Results with a finding whose name holds this, in any case. */
  findingPart?: string;
  /** Only results with at least one finding. */
  flaggedOnly?: boolean;
  /** ISO times: received at `from` or later, and before `until`. */
  from?: string;
  until?: string;
  /** The page starts after this row, in the order newest first: the keyset cursor. */
  before?: { creationDate: string; id: string };
  limit: number;
}

/** `text` taken literally in a LIKE pattern written with `ESCAPE '!'`. */
function likeLiteral(text: string): string {
  return text.replace(/[!%_]/g, (char) => `!${char}`);
}

/** The columns of a result a verdict is read from. */
export type VerdictRow = Pick<
  Selectable<FilesTable>,
  'id' | 'content_type' | 'findings' | 'creation_date'
>;

/** A result's verdict, if it has a complete one. */
export function reusable(row: VerdictRow | undefined): ReusableVerdict | null {
  if (row === undefined || row.findings === null || row.content_type === null) return null;
  return {
    fileId: row.id,
    receivedAt: row.creation_date,
    contentType: row.content_type,
    findings: JSON.parse(row.findings) as string[],
  };
}

export class FileRepository {
  /** Whether `findVerdicts` answers several keys in one statement (a round trip saved). */
  readonly findsVerdictsTogether: boolean;

  constructor(private readonly db: Kysely<Database>) {
    this.findsVerdictsTogether = db.getExecutor().adapter instanceof PostgresAdapter;
  }

  /**
   * `verdictKey`: the verdict cache's key of a result scanned now with a complete verdict;
   * `trace`: the result's events written with it (inlineTrace), null when they are rows.
   */
  async insert(
    file: StoredFile,
    verdictKey: string | null = null,
    trace: string | null = null,
  ): Promise<void> {
    await insertFile.execute(this.db, ...fileRowArguments(file, verdictKey, trace));
  }

  /**
   * The newest result stored under `verdictKey` received at `since` or later: an earlier scan's
   * complete verdict for the same content, engines, signatures and categories. One index seek.
   */
  async findVerdict(verdictKey: string, since: string): Promise<ReusableVerdict | null> {
    return reusable((await findVerdict.execute(this.db, verdictKey, since)).rows[0]);
  }

  /**
   * `findVerdict` for several keys at once (items scanned together), in their order: one statement
   * on PostgreSQL (an index seek per key), one seek each on SQLite.
   */
  async findVerdicts(
    keys: readonly string[],
    since: string,
  ): Promise<Array<ReusableVerdict | null>> {
    if (!this.findsVerdictsTogether) {
      const found: Array<ReusableVerdict | null> = [];
      for (const key of keys) found.push(await this.findVerdict(key, since));
      return found;
    }
    const { rows } = await sql<VerdictRow & { verdict_key: string }>`${prepared}
      SELECT DISTINCT ON (verdict_key) verdict_key, id, content_type, findings, creation_date
      FROM files
      WHERE verdict_key = ANY(${[...keys]}::text[]) AND creation_date >= ${since}
        AND findings IS NOT NULL
      ORDER BY verdict_key, creation_date DESC`.execute(this.db);
    const byKey = new Map(rows.map((row) => [row.verdict_key, row]));
    return keys.map((key) => reusable(byKey.get(key)));
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

  /**
   * One page of an account's results, newest first ((creation_date, id) descending): one range of
   * the (account, creation_date, id) index, read up to `limit` matching rows. A finding is matched
   * in the stored JSON array, its pattern bound as a parameter.
   */
  async listForAccount(accountId: string, query: FileListQuery): Promise<StoredFile[]> {
    let select = this.db.selectFrom('files').selectAll().where('account_id', '=', accountId);
    if (query.id !== undefined) select = select.where('id', '=', query.id);
    if (query.checksum !== undefined) select = select.where('checksum', '=', query.checksum);
    if (query.flaggedOnly === true) {
      select = select.where('findings', 'is not', null).where('findings', '<>', '[]');
    }
    if (query.findingPart !== undefined) {
      // The array holds JSON strings: the text is written the same way (quotes, backslashes), so
      // a match never spans two names (their separator has quotes that are not escaped).
      const written = JSON.stringify(query.findingPart.toLowerCase()).slice(1, -1);
      const pattern = `%${likeLiteral(written)}%`;
      select = select.where(sql<boolean>`lower(findings) like ${pattern} escape '!'`);
    }
    if (query.from !== undefined) select = select.where('creation_date', '>=', query.from);
    if (query.until !== undefined) select = select.where('creation_date', '<', query.until);
    const { before } = query;
    if (before !== undefined) {
      select = select.where((eb) =>
        eb(eb.refTuple('creation_date', 'id'), '<', eb.tuple(before.creationDate, before.id)),
      );
    }
    const rows = await select
      .orderBy('creation_date', 'desc')
      .orderBy('id', 'desc')
      .limit(query.limit)
      .execute();
    return rows.map(toStoredFile);
  }

  /**
   * Items and flagged items per UTC day (`YYYY-MM-DD`) received at `since` or later, oldest first;
   * days without items are absent. One range of the (account, date) index.
   */
  async dailyCounts(
    accountId: string,
    since: string,
  ): Promise<Array<{ day: string; items: number; flagged: number }>> {
    const day = sql<string>`substr(creation_date, 1, 10)`;
    const rows = await this.db
      .selectFrom('files')
      .select([
        day.as('day'),
        sql<number>`count(*)`.as('items'),
        sql<number>`sum(case when findings is not null and findings <> '[]' then 1 else 0 end)`.as(
          'flagged',
        ),
      ])
      .where('account_id', '=', accountId)
      .where('creation_date', '>=', since)
      .groupBy(day)
      .orderBy(day)
      .execute();
    return rows.map((row) => ({
      day: row.day,
      items: Number(row.items),
      flagged: Number(row.flagged),
    }));
  }

  /** The newest results of every account that ended in an error: a seek on a partial index. */
  async recentErrors(limit: number): Promise<ResultError[]> {
    const rows = await this.db
      .selectFrom('files')
      .select(['id', 'account_id', 'error', 'creation_date'])
      .where('error', 'is not', null)
      .orderBy('creation_date', 'desc')
      .limit(limit)
      .execute();
    return rows.map((row) => ({
      id: row.id,
      accountId: row.account_id,
      error: row.error ?? '',
      creationDate: row.creation_date,
    }));
  }

  /**
   * Deletes at most `limit` of the key's results received before `before`, oldest first, with
   * their traces and callback deliveries; returns how many results went. Run it in a transaction
   * (ResultRetention): a batch at a time keeps each transaction short.
   */
  async deleteOlderThan(apiKeyId: string, before: string, limit: number): Promise<number> {
    const ids = (
      await this.db
        .selectFrom('files')
        .select('id')
        .where('api_key_id', '=', apiKeyId)
        .where('creation_date', '<', before)
        .orderBy('creation_date')
        .limit(limit)
        .execute()
    ).map((row) => row.id);
    if (ids.length === 0) return 0;
    await this.db.deleteFrom('trace_events').where('file_id', 'in', ids).execute();
    await this.db.deleteFrom('callback_deliveries').where('file_id', 'in', ids).execute();
    const deleted = await this.db.deleteFrom('files').where('id', 'in', ids).executeTakeFirst();
    return Number(deleted.numDeletedRows);
  }
}
