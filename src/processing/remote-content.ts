import {
  type FetchedContent,
  fetchContent,
  OutboundError,
  type OutboundOptions,
  OutboundRefusedError,
} from '../outbound/guarded-http.js';
import { redactUrl } from '../outbound/target.js';
import type { DetectionCategory, TraceEvent } from '../store/records.js';
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

/**
 * Downloads content through the SSRF guard and scans it as it streams in, all within
 * `options.totalTimeoutMs` (ASSAY_FETCH_TIMEOUT): at the deadline the download and the scan are
 * abandoned, so a slow remote cannot hold a job slot past it. Engine failures propagate as they
 * are; everything the remote is to blame for (the deadline included) becomes a RemoteContentError.
 */
export async function fetchAndScan(
  processor: ContentProcessor,
  location: string,
  options: OutboundOptions & { maxBytes: number },
  receivedAt: string,
  categories: readonly DetectionCategory[],
): Promise<{ scanned: ScannedContent; downloaded: TraceEvent }> {
  const deadline = new AbortController();
  let remote: FetchedContent | null = null;
  const timer = setTimeout(() => {
    deadline.abort();
    remote?.abort();
  }, options.totalTimeoutMs);
  const late = new Promise<never>((_resolve, reject) => {
    deadline.signal.addEventListener('abort', () => reject(new Error('deadline')), { once: true });
  });
  const work = (async () => {
    let bytes = 0;
    let downloadedAt = '';
    remote = await fetchContent(location, options);
    const { body, finalUrl } = remote;
    const counted = (async function* () {
      for await (const chunk of body) {
        bytes += chunk.length;
        yield chunk;
      }
      downloadedAt = new Date().toISOString();
    })();
    const scanned = await processor.scan(counted, {
      categories,
      receivedAt,
      maxBytes: options.maxBytes,
      signal: deadline.signal,
    });
    const downloaded = event(
      `downloaded: ${bytes} bytes from ${redactUrl(finalUrl)}`,
      downloadedAt,
    );
    return { scanned, downloaded };
  })();
  try {
    // Whatever part is still running at the deadline (download, clamd, an engine), the job ends.
    return await Promise.race([work, late]);
  } catch (error) {
    if (deadline.signal.aborted) {
      work.catch(() => {}); // settles later with the abandoned scan's error
      throw new RemoteContentError(
        `fetching and scanning ${redactUrl(location)} took longer than ${options.totalTimeoutMs / 1000} s (ASSAY_FETCH_TIMEOUT)`,
        'unavailable',
      );
    }
    if (error instanceof OutboundRefusedError)
      throw new RemoteContentError(error.message, 'refused');
    if (error instanceof ContentTooLargeError) {
      throw new RemoteContentError(
        `the remote content exceeds the limit of ${error.limit} bytes`,
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
