import {
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
 * Downloads content through the SSRF guard and scans it as it streams in. Engine failures
 * propagate as they are; everything the remote is to blame for becomes a RemoteContentError.
 */
export async function fetchAndScan(
  processor: ContentProcessor,
  location: string,
  options: OutboundOptions & { maxBytes: number },
  receivedAt: string,
  categories: readonly DetectionCategory[],
): Promise<{ scanned: ScannedContent; downloaded: TraceEvent }> {
  let bytes = 0;
  let downloadedAt = '';
  try {
    const remote = await fetchContent(location, options);
    const counted = (async function* () {
      for await (const chunk of remote.body) {
        bytes += chunk.length;
        yield chunk;
      }
      downloadedAt = new Date().toISOString();
    })();
    const scanned = await processor.scan(counted, {
      categories,
      receivedAt,
      maxBytes: options.maxBytes,
    });
    const downloaded = event(
      `downloaded: ${bytes} bytes from ${redactUrl(remote.finalUrl)}`,
      downloadedAt,
    );
    return { scanned, downloaded };
  } catch (error) {
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
  }
}
