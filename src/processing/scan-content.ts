import { createHash } from 'node:crypto';
import { type ClamdClient, ClamdUnavailableError } from '../engines/clamav/clamd-client.js';
import { clamdSignatureToFinding, type FindingsStyle } from '../engines/clamav/findings.js';
import { type ContentTypeDetector, SNIFF_BYTES } from '../engines/content-type.js';
import { ContentTooLargeError, EmptyContentError, EngineUnavailableError } from './errors.js';

/** Everything the engines say about one piece of content. */
export interface ContentVerdict {
  checksum: string;
  sha256: string;
  contentLength: number;
  contentType: string;
  findings: string[];
  /** What each engine said, for the trace. */
  engineReports: string[];
}

export interface ScanOptions {
  maxBytes: number;
}

/**
 * Scans content in one streaming pass: SHA-1 and SHA-256, the media type from the first bytes, and
 * clamd's INSTREAM, with backpressure from clamd to the source. The content is never held whole.
 */
export class ContentScanner {
  constructor(
    private readonly clamd: ClamdClient,
    private readonly detector: ContentTypeDetector,
    private readonly findingsStyle: FindingsStyle,
  ) {}

  async scan(source: AsyncIterable<Buffer>, options: ScanOptions): Promise<ContentVerdict> {
    const sha1 = createHash('sha1');
    const sha256 = createHash('sha256');
    const head: Buffer[] = [];
    let headBytes = 0;
    let length = 0;
    // Detection runs in a worker; it starts once the head is known, in parallel with the scan.
    let contentType: Promise<string> | null = null;
    const detect = (complete: boolean) =>
      this.detector.detect(Buffer.concat(head).subarray(0, SNIFF_BYTES), complete);
    const instream = this.clamd.instream();
    try {
      for await (const chunk of source) {
        length += chunk.length;
        if (length > options.maxBytes) throw new ContentTooLargeError(options.maxBytes);
        sha1.update(chunk);
        sha256.update(chunk);
        if (headBytes < SNIFF_BYTES) {
          head.push(chunk);
          headBytes += chunk.length;
          if (headBytes >= SNIFF_BYTES) contentType = detect(false);
        }
        await instream.write(chunk);
      }
      if (length === 0) throw new EmptyContentError();
      contentType ??= detect(true);
      const verdict = await instream.finish();
      return {
        checksum: sha1.digest('hex'),
        sha256: sha256.digest('hex'),
        contentLength: length,
        contentType: await contentType,
        findings:
          verdict.signature === null
            ? []
            : [clamdSignatureToFinding(verdict.signature, this.findingsStyle)],
        engineReports: [
          `engine clamav (MALWARE): ${verdict.signature === null ? 'clean' : `found ${verdict.signature}`}`,
        ],
      };
    } catch (error) {
      instream.abort();
      if (error instanceof ClamdUnavailableError) {
        throw new EngineUnavailableError('malware', error.message);
      }
      throw error;
    }
  }
}
