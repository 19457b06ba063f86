import { newId } from '../accounts/credentials.js';
import { SpoolTooLargeError } from '../domain/failures.js';
import type { DetectionCategory, TraceEvent } from '../domain/records.js';
import {
  type FetchedContent,
  fetchContent,
  OutboundError,
  type OutboundOptions,
  OutboundRefusedError,
} from '../outbound/guarded-http.js';
import { redactUrl } from '../outbound/target.js';
import type { ContentSpool } from '../spool/content-spool.js';
import { ContentTooLargeError, EmptyContentError } from './errors.js';
import { type ContentProcessor, event, type ScannedContent } from './process-content.js';

/** Content at a URL could not be had: refused by policy, unreachable, failing, empty, too large. */
export class RemoteContentError extends Error {
  constructor(
    message: string,
    readonly reason: 'refused' | 'too-large' | 'unavailable',
  ) {
    super(message);
  }
}

/** What a fetch needs besides the URL and the outbound options. */
export interface FetchContext {
  /** The spool holds the download until it is scanned; the file is removed afterwards. */
  spool: ContentSpool;
  /** The spool file's name: the job's id, or a new id for a synchronous fetch. */
  spoolId: string;
  receivedAt: string;
  categories: readonly DetectionCategory[];
  /** The item's account: an earlier verdict for the same content may answer (VerdictCache). */
  accountId: string;
}

/** The deadline passed: whatever was still running is abandoned. */
const LATE = Symbol('late');

/**
 * Runs `work` for at most `ms`; at the deadline its signal aborts, `onLate` runs (to cut what the
 * signal cannot reach) and LATE is returned while the abandoned work settles on its own.
 */
async function withinDeadline<T>(
  ms: number,
  work: (signal: AbortSignal) => Promise<T>,
  onLate: () => void = () => {},
): Promise<T | typeof LATE> {
  const deadline = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof LATE>((resolve) => {
    timer = setTimeout(() => {
      deadline.abort();
      onLate();
      resolve(LATE);
    }, ms);
  });
  const running = work(deadline.signal);
  try {
    return await Promise.race([running, late]);
  } finally {
    clearTimeout(timer);
    running.catch(() => {});
  }
}

/** What the remote is to blame for (refused, too large, failing, empty) as a RemoteContentError. */
function remoteFailure(error: unknown, location: string, maxBytes: number): unknown {
  if (error instanceof OutboundRefusedError)
    return new RemoteContentError(error.message, 'refused');
  if (error instanceof ContentTooLargeError || error instanceof SpoolTooLargeError) {
    return new RemoteContentError(
      `the content at ${redactUrl(location)} exceeds the limit of ${maxBytes} bytes`,
      'too-large',
    );
  }
  if (error instanceof OutboundError) return new RemoteContentError(error.message, 'unavailable');
  if (error instanceof EmptyContentError) {
    return new RemoteContentError(`the content at ${redactUrl(location)} is empty`, 'unavailable');
  }
  return error;
}

function tooLong(doing: string, location: string, timeoutMs: number): RemoteContentError {
  return new RemoteContentError(
    `${doing} ${redactUrl(location)} took longer than ${timeoutMs / 1000} s (ASSAY_FETCH_TIMEOUT)`,
    'unavailable',
  );
}

/**
 * Downloads content through the SSRF guard into the spool within `options.totalTimeoutMs`
 * (ASSAY_FETCH_TIMEOUT); a remote that sends nothing for `options.idleTimeoutMs`
 * (ASSAY_FETCH_IDLE_TIMEOUT) has stalled and fails it at once. Everything the remote is to blame
 * for (the deadline included) is a RemoteContentError naming it; nothing is left in the spool then.
 *
 * Why download first: streamed straight into clamd, a remote's pause tripped the clamd session's
 * idle timeout (30 s), which looked like an engine failure and was retried; and a slow remote held
 * one of clamd's threads as long as it liked. INSTREAM has no keep-alive (only data resets clamd's
 * timer), so the content is spooled and clamd reads it at the disk's pace. It also lets a job's
 * download hold a download slot, never a scanning one (JobRunner).
 */
export async function downloadToSpool(
  location: string,
  options: OutboundOptions & { maxBytes: number },
  target: { spool: ContentSpool; spoolId: string; durable: boolean },
): Promise<{ key: string; size: number; downloaded: TraceEvent }> {
  const { spool } = target;
  let remote: FetchedContent | null = null;
  let spooledKey: string | null = null;
  // A file that cannot be removed never changes the outcome: the orphan sweep takes it later.
  const removeSpooled = () =>
    spooledKey === null ? undefined : spool.remove(spooledKey).catch(() => {});
  const download = async (signal: AbortSignal) => {
    remote = await fetchContent(location, options);
    const spooled = await spool.write(target.spoolId, remote.body, options.maxBytes, {
      durable: target.durable,
    });
    spooledKey = spooled.key;
    // Finished just after the deadline: nobody takes the file any more.
    if (signal.aborted) await removeSpooled();
    const downloaded = event(
      `downloaded: ${spooled.size} bytes from ${redactUrl(remote.finalUrl)}`,
    );
    return { ...spooled, downloaded };
  };
  let outcome: Awaited<ReturnType<typeof download>> | typeof LATE;
  try {
    outcome = await withinDeadline(options.totalTimeoutMs, download, () => remote?.abort());
  } catch (error) {
    // A spool that failed before reading the body (it does not answer) leaves the remote open.
    (remote as FetchedContent | null)?.abort();
    await removeSpooled();
    throw remoteFailure(error, location, options.maxBytes);
  }
  // The abandoned download settles later (the remote is cut off); its file goes then.
  if (outcome === LATE) throw tooLong('downloading', location, options.totalTimeoutMs);
  return outcome;
}

/**
 * Scans downloaded content within `timeoutMs` (ASSAY_FETCH_TIMEOUT): a scan that passes it is
 * abandoned (the scan takes an AbortSignal) and is the item's error result, naming the remote.
 * Engine failures propagate as they are.
 */
export async function scanDownloaded(
  processor: ContentProcessor,
  source: () => AsyncIterable<Buffer>,
  location: string,
  options: { timeoutMs: number; maxBytes: number },
  context: { receivedAt: string; categories: readonly DetectionCategory[]; accountId: string },
): Promise<ScannedContent> {
  let outcome: ScannedContent | typeof LATE;
  try {
    outcome = await withinDeadline(options.timeoutMs, (signal) =>
      processor.scan(source(), {
        categories: context.categories,
        receivedAt: context.receivedAt,
        maxBytes: options.maxBytes,
        signal,
        accountId: context.accountId,
      }),
    );
  } catch (error) {
    throw remoteFailure(error, location, options.maxBytes);
  }
  if (outcome === LATE) throw tooLong('scanning the content of', location, options.timeoutMs);
  return outcome;
}

/**
 * A synchronous fetch (the v2.2 sync `location` form): downloaded into the spool (not synced, a
 * crash just means the client asks again), scanned, removed. The download and the scan each have
 * ASSAY_FETCH_TIMEOUT.
 */
export async function fetchAndScan(
  processor: ContentProcessor,
  location: string,
  options: OutboundOptions & { maxBytes: number },
  context: FetchContext,
): Promise<{ scanned: ScannedContent; downloaded: TraceEvent }> {
  const { spool } = context;
  const spooled = await downloadToSpool(location, options, {
    spool,
    spoolId: context.spoolId,
    durable: false,
  });
  try {
    const scanned = await scanDownloaded(
      processor,
      () => spool.read(spooled.key),
      location,
      { timeoutMs: options.totalTimeoutMs, maxBytes: options.maxBytes },
      context,
    );
    return { scanned, downloaded: spooled.downloaded };
  } finally {
    // An abandoned scan may still read it: removed all the same (the read fails, nothing waits).
    await spool.remove(spooled.key).catch(() => {});
  }
}

/** Synchronous fetches (v2.2's `location` form): downloaded into the spool under a new id, scanned. */
export class RemoteScans {
  constructor(
    private readonly processor: ContentProcessor,
    private readonly spool: ContentSpool,
    private readonly options: OutboundOptions & { maxBytes: number },
  ) {}

  fetchAndScan(
    location: string,
    context: Omit<FetchContext, 'spool' | 'spoolId'>,
  ): Promise<{ scanned: ScannedContent; downloaded: TraceEvent }> {
    return fetchAndScan(this.processor, location, this.options, {
      ...context,
      spool: this.spool,
      spoolId: newId(),
    });
  }
}
