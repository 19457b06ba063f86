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
}

/**
 * Downloads content through the SSRF guard into the spool, then scans the spool file, all within
 * `options.totalTimeoutMs` (ASSAY_FETCH_TIMEOUT): at the deadline the download or the scan is
 * abandoned, so a slow remote cannot hold a job slot past it. A remote that sends nothing for
 * `options.idleTimeoutMs` (ASSAY_FETCH_IDLE_TIMEOUT) has stalled and fails the fetch at once.
 *
 * Why download first: streamed straight into clamd, a remote's pause tripped the clamd session's
 * idle timeout (30 s), which looked like an engine failure and was retried; and a slow remote held
 * one of clamd's threads as long as it liked. INSTREAM has no keep-alive (only data resets clamd's
 * timer), so the content is spooled and clamd reads it at the disk's pace. The disk holds at most
 * `options.maxBytes` per fetch, for as long as the fetch runs.
 *
 * Engine failures propagate as they are; everything the remote is to blame for (a stall and the
 * deadline included) becomes a RemoteContentError naming it.
 */
export async function fetchAndScan(
  processor: ContentProcessor,
  location: string,
  options: OutboundOptions & { maxBytes: number },
  context: FetchContext,
): Promise<{ scanned: ScannedContent; downloaded: TraceEvent }> {
  const { spool } = context;
  const deadline = new AbortController();
  let remote: FetchedContent | null = null;
  let spooledKey: string | null = null;
  const timer = setTimeout(() => {
    deadline.abort();
    remote?.abort();
  }, options.totalTimeoutMs);
  const late = new Promise<never>((_resolve, reject) => {
    deadline.signal.addEventListener('abort', () => reject(new Error('deadline')), { once: true });
  });
  const work = (async () => {
    remote = await fetchContent(location, options);
    const { body, finalUrl } = remote;
    const spooled = await spool.write(context.spoolId, body, options.maxBytes, {
      durable: false,
    });
    spooledKey = spooled.key;
    const downloaded = event(`downloaded: ${spooled.size} bytes from ${redactUrl(finalUrl)}`);
    const scanned = await processor.scan(spool.read(spooled.key), {
      categories: context.categories,
      receivedAt: context.receivedAt,
      maxBytes: options.maxBytes,
      signal: deadline.signal,
    });
    return { scanned, downloaded };
  })();
  // A file that cannot be removed never changes the outcome: the orphan sweep takes it later.
  const removeSpooled = () =>
    spooledKey === null ? undefined : spool.remove(spooledKey).catch(() => {});
  try {
    // Whatever part is still running at the deadline (download, clamd, an engine), the job ends.
    const outcome = await Promise.race([work, late]);
    await removeSpooled();
    return outcome;
  } catch (error) {
    if (deadline.signal.aborted) {
      // The abandoned part settles later; its spool file goes then (or to the orphan sweep).
      work.catch(() => {}).finally(removeSpooled);
      const doing =
        spooledKey === null
          ? `downloading ${redactUrl(location)}`
          : `downloading and scanning ${redactUrl(location)}`;
      throw new RemoteContentError(
        `${doing} took longer than ${options.totalTimeoutMs / 1000} s (ASSAY_FETCH_TIMEOUT)`,
        'unavailable',
      );
    }
    await removeSpooled();
    if (error instanceof OutboundRefusedError)
      throw new RemoteContentError(error.message, 'refused');
    if (error instanceof ContentTooLargeError || error instanceof SpoolTooLargeError) {
      throw new RemoteContentError(
        `the content at ${redactUrl(location)} exceeds the limit of ${options.maxBytes} bytes`,
        'too-large',
      );
    }
    if (error instanceof OutboundError) throw new RemoteContentError(error.message, 'unavailable');
    if (error instanceof EmptyContentError) {
      throw new RemoteContentError(`the content at ${redactUrl(location)} is empty`, 'unavailable');
    }
    throw error;
  } finally {
    clearTimeout(timer);
    late.catch(() => {});
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
