import type { Job, StoredFile, TraceEvent } from '../domain/records.js';
import type { DeliverySummary } from '../store/callback-outbox.js';
import type { FileListQuery } from '../store/files.js';
import type { Store } from '../store/store.js';
import type { ContentProcessor } from './process-content.js';

export const FILES_PER_PAGE = 50;
export const MAX_FINDING_FILTER = 100;

/** What an account's results list is narrowed to; null: not narrowed by that. */
export interface FileFilter {
  id: string | null;
  /** SHA-1, lower-case hex, as the API shows it. */
  checksum: string | null;
  /** A finding's name or part of it (`eicar`, `content.malicious.`), in any case. */
  finding: string | null;
  flaggedOnly: boolean;
  /** `YYYY-MM-DD`, UTC, both included. */
  fromDay: string | null;
  toDay: string | null;
}

/** Where a page starts: after this result, in the order newest first. */
export interface FileCursor {
  creationDate: string;
  id: string;
}

export interface FilePage {
  files: StoredFile[];
  /** The next (older) page's cursor; null on the last page. */
  next: FileCursor | null;
}

export type FileDetail =
  | { kind: 'result'; file: StoredFile; trace: TraceEvent[]; callbacks: DeliverySummary[] }
  /** Accepted (async) and not finished: no result yet, only its trace so far. */
  | { kind: 'pending'; job: Job; trace: TraceEvent[] };

// v2 ids are 32 hex digits, v1.0 ids UUIDs: letters, digits and dashes, bounded.
const ITEM_ID = /^[0-9A-Za-z-]{1,64}$/;
const SHA1 = /^[0-9a-fA-F]{40}$/;
const DAY = /^\d{4}-\d{2}-\d{2}$/;
const CONTROL = /\p{Cc}/u;
// A stored ISO date: checked loosely (it is bound as a parameter), but bounded.
const CURSOR_DATE = /^[0-9][0-9T:.+Z-]{9,39}$/;

export function isItemId(text: string): boolean {
  return ITEM_ID.test(text);
}

function validDay(text: string): boolean {
  if (!DAY.test(text)) return false;
  const time = Date.parse(`${text}T00:00:00Z`);
  return Number.isFinite(time) && new Date(time).toISOString().slice(0, 10) === text;
}

function nextDay(day: string): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
}

/**
 * A filter from a form's fields, each trimmed, bounded and checked: what is wrong with it is
 * said per field (the filter then leaves that field out).
 */
export function fileFilterOf(fields: Record<string, string | undefined>): {
  filter: FileFilter;
  problems: string[];
} {
  const problems: string[] = [];
  const text = (name: string) => (fields[name] ?? '').trim();
  const checked = (name: string, valid: (value: string) => boolean, problem: string) => {
    const value = text(name);
    if (value === '') return null;
    if (valid(value)) return value;
    problems.push(problem);
    return null;
  };
  const filter: FileFilter = {
    id: checked('id', isItemId, 'An id is letters, digits and dashes (at most 64).'),
    checksum:
      checked(
        'checksum',
        (v) => SHA1.test(v),
        'A checksum is a SHA-1: 40 hex digits.',
      )?.toLowerCase() ?? null,
    finding: checked(
      'finding',
      (v) => v.length <= MAX_FINDING_FILTER && !CONTROL.test(v),
      `A finding is at most ${MAX_FINDING_FILTER} characters.`,
    ),
    flaggedOnly: text('flagged') !== '',
    fromDay: checked('from', validDay, 'The first day is a date: YYYY-MM-DD.'),
    toDay: checked('to', validDay, 'The last day is a date: YYYY-MM-DD.'),
  };
  if (filter.fromDay !== null && filter.toDay !== null && filter.fromDay > filter.toDay) {
    problems.push('The first day is after the last day.');
  }
  return { filter, problems };
}

/** A cursor as a link carries it: `<date>~<id>`. */
export function fileCursorText(cursor: FileCursor): string {
  return `${cursor.creationDate}~${cursor.id}`;
}

/** The cursor a link carried; null when it is not one. */
export function parseFileCursor(text: string): FileCursor | null {
  const parts = text.split('~');
  if (parts.length !== 2) return null;
  const [creationDate = '', id = ''] = parts;
  return CURSOR_DATE.test(creationDate) && ITEM_ID.test(id) ? { creationDate, id } : null;
}

/** An account's results for the console: listed a page at a time in the store, and one in full. */
export class FileBrowser {
  constructor(
    private readonly store: Store,
    private readonly processor: ContentProcessor,
  ) {}

  /** A page of the account's results, newest first; unfinished async work is not a result. */
  async page(accountId: string, filter: FileFilter, before: FileCursor | null): Promise<FilePage> {
    const query: FileListQuery = { limit: FILES_PER_PAGE + 1, flaggedOnly: filter.flaggedOnly };
    if (filter.id !== null) query.id = filter.id;
    if (filter.checksum !== null) query.checksum = filter.checksum;
    if (filter.finding !== null) query.findingPart = filter.finding;
    if (filter.fromDay !== null) query.from = filter.fromDay;
    if (filter.toDay !== null) query.until = nextDay(filter.toDay);
    if (before !== null) query.before = before;
    const rows = await this.store.files.listForAccount(accountId, query);
    const files = rows.slice(0, FILES_PER_PAGE);
    const last = files.at(-1);
    const more = rows.length > FILES_PER_PAGE && last !== undefined;
    return { files, next: more ? { creationDate: last.creationDate, id: last.id } : null };
  }

  /**
   * A result with its trace (the API's trace, through the same service) and callback deliveries,
   * or unfinished work with its trace so far; null when the account has no such item.
   */
  async detail(accountId: string, id: string): Promise<FileDetail | null> {
    const owner = { accountId };
    const item = await this.processor.findItem(owner, id);
    if (item === null) return null;
    const trace = (await this.processor.findTrace(owner, id)) ?? [];
    if ('pending' in item) return { kind: 'pending', job: item.pending, trace };
    const callbacks = (await this.store.callbacks.listForFile(id))
      .filter((delivery) => delivery.accountId === accountId)
      .map(({ body: _body, ...summary }) => summary);
    return { kind: 'result', file: item.file, trace, callbacks };
  }
}
