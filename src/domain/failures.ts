// Failures the domain tells apart whatever backend raised them: the transport maps them to
// statuses, the job runner to waits. Pure predicates on error codes: no backend is imported.

export class SpoolTooLargeError extends Error {}

/**
 * What a failure says about itself in a client's words: a system error's code (ENOENT), an S3
 * error's name (NoSuchBucket), when it is a plain identifier; never its message, which may name a
 * path, a bucket or a key. Looks a few causes down.
 */
export function publicCode(error: unknown): string | null {
  let current = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Za-z][A-Za-z0-9_]{1,40}$/.test(code)) return code;
    if (current.name !== 'Error' && /^[A-Z][A-Za-z0-9]{1,40}$/.test(current.name)) {
      return current.name;
    }
    current = current.cause;
  }
  return null;
}

/**
 * The spool (its directory or bucket) cannot be written or read: the service's outage, not the
 * item's fault. A request answers 503; a job waits without using its attempts. The message names
 * no path, bucket or key (it reaches clients, in results and traces); the cause has the detail,
 * for the log.
 */
export class SpoolUnavailableError extends Error {
  override readonly name = 'SpoolUnavailableError';

  constructor(doing: string, cause: unknown) {
    const code = publicCode(cause);
    super(`the spool is not answering (${doing}${code === null ? '' : `: ${code}`})`, { cause });
  }
}

/**
 * One item's spooled content is missing or unreadable while the spool itself answers: the item's
 * failure, counted like any other. The message names no path or key; the cause has the detail.
 */
export class SpooledContentError extends Error {
  override readonly name = 'SpooledContentError';

  constructor(
    readonly missing: boolean,
    cause: unknown,
  ) {
    super(
      missing
        ? "the item's spooled content is missing"
        : `the item's spooled content could not be read (${publicCode(cause) ?? 'error'})`,
      { cause },
    );
  }
}

/** Error codes of a write that found no room: the file system's, a quota's, SQLite's. */
const NO_SPACE_CODES = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL']);

/** Whether a failure (or what caused it, a few levels down) is a full disk. */
export function isDiskFull(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NO_SPACE_CODES.has(code)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Text the store cannot hold: PostgreSQL refuses a NUL character in text (22021) and in JSON
 * (22P05), which SQLite keeps. Only a client's input carries one, where no check refused it first.
 */
const UNSTORABLE_TEXT_CODES = new Set(['22021', '22P05']);

export function isUnstorableText(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && UNSTORABLE_TEXT_CODES.has(code)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Errors that mean the database cannot be reached or cannot take work right now (a PostgreSQL
 * restart, a dropped network, a full pool; SQLite locked past its busy timeout): the request is
 * worth retrying, so it is a 503, never a 500, and a job waits instead of failing.
 */
const UNAVAILABLE_CODES = new Set([
  // The network, as node reports it.
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // PostgreSQL: shutting down, restarting, not accepting connections yet, too many connections.
  '57P01',
  '57P02',
  '57P03',
  '53300',
  // SQLite: another writer held the database past busy_timeout.
  'SQLITE_BUSY',
]);

/** pg's and pg-pool's own errors for a lost or unobtainable connection carry no code. */
const DRIVER_MESSAGES = [
  'Connection terminated unexpectedly',
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
];

export class StoreUnavailableError extends Error {}

export function isStoreUnavailable(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    if (current instanceof StoreUnavailableError) return true;
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) {
      return true;
    }
    if (DRIVER_MESSAGES.includes(current.message)) return true;
    // AggregateError: a connect to every address of a name failed.
    if (current instanceof AggregateError && current.errors.some(isStoreUnavailable)) return true;
    current = current.cause;
  }
  return false;
}

/** A row with that key exists already (SQLite's constraint codes, PostgreSQL's 23505). */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    code === '23505' ||
    code === 'SQLITE_CONSTRAINT_PRIMARYKEY' ||
    code === 'SQLITE_CONSTRAINT_UNIQUE'
  );
}

/**
 * A watched bucket (its S3 server) does not answer, or will not say who we are (credentials
 * missing): the service's outage, not the object's. A job waits without using its attempts.
 * The message names no key; the cause has the detail, for the log.
 */
export class BucketUnavailableError extends Error {
  override readonly name = 'BucketUnavailableError';

  constructor(source: string, cause: unknown) {
    const code = publicCode(cause);
    super(`the bucket of ${source} is not answering${code === null ? '' : ` (${code})`}`, {
      cause,
    });
  }
}
