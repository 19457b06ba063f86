import { IcapProtocolError, type SocketReader } from './socket-reader.js';

/** The longest chunk-size line (hex size and extensions such as `; ieof`). */
const MAX_CHUNK_LINE = 1024;
/** The longest trailer section after the last chunk. */
const MAX_TRAILER = 8 * 1024;
/** Data handed on at a time: one socket read's worth. */
const MAX_PIECE = 64 * 1024;

/**
 * The encapsulated body of one ICAP request: HTTP/1.1 chunked encoding, read piece by piece as it
 * arrives (never held whole). With a preview, the first zero-length chunk ends the preview: with
 * `ieof` it ends the body; without it, `continueAfterPreview` is called (the `100 Continue`) and the
 * rest follows. Chunk sizes are read as at most 8 hex digits, so no size can overflow.
 */
export class ChunkedBody {
  private remaining = 0;
  private done = false;
  private inPreview: boolean;
  /** Whether the body ended within its preview (`ieof`). */
  endedInPreview = false;
  /** Bytes of data read so far. */
  bytes = 0;

  constructor(
    private readonly reader: SocketReader,
    private readonly idleMs: number,
    preview: boolean,
    private readonly continueAfterPreview: () => Promise<void>,
  ) {
    this.inPreview = preview;
  }

  get complete(): boolean {
    return this.done;
  }

  /** The next piece of data, or null once the body has ended. */
  async read(): Promise<Buffer | null> {
    while (!this.done) {
      if (this.remaining > 0) {
        const piece = await this.reader.readSome(Math.min(this.remaining, MAX_PIECE), this.idleMs);
        this.remaining -= piece.length;
        this.bytes += piece.length;
        if (this.remaining === 0) await this.expectCrlf();
        return piece;
      }
      const line = await this.reader.readLine(
        MAX_CHUNK_LINE,
        this.idleMs,
        `a chunk-size line is longer than ${MAX_CHUNK_LINE} bytes`,
      );
      const match = /^([0-9A-Fa-f]{1,8})[ \t]*(;.*)?$/.exec(line);
      if (match === null) {
        throw new IcapProtocolError(
          `a chunk size is not a hexadecimal number: "${line.slice(0, 40)}"`,
        );
      }
      const size = Number.parseInt(match[1] ?? '', 16);
      if (size > 0) {
        this.remaining = size;
        continue;
      }
      const ieof = /;\s*ieof\b/i.test(match[2] ?? '');
      await this.skipTrailer();
      if (this.inPreview && !ieof) {
        // The preview is over and more is coming: ask for it (RFC 3507, 4.5).
        this.inPreview = false;
        await this.continueAfterPreview();
        continue;
      }
      if (this.inPreview) this.endedInPreview = true;
      this.done = true;
    }
    return null;
  }

  /** Reads and drops what is left of the body (a refused item on a connection kept open). */
  async drain(): Promise<void> {
    while ((await this.read()) !== null) {
      // Nothing kept.
    }
  }

  private async expectCrlf(): Promise<void> {
    const after = await this.reader.readExactly(2, this.idleMs);
    if (after[0] !== 0x0d || after[1] !== 0x0a) {
      throw new IcapProtocolError('a chunk is longer than its size says (no CRLF after its data)');
    }
  }

  private async skipTrailer(): Promise<void> {
    let total = 0;
    for (;;) {
      const line = await this.reader.readLine(
        MAX_TRAILER,
        this.idleMs,
        `the trailer after the last chunk exceeds ${MAX_TRAILER} bytes`,
      );
      if (line === '') return;
      total += line.length + 2;
      if (total > MAX_TRAILER) {
        throw new IcapProtocolError(
          `the trailer after the last chunk exceeds ${MAX_TRAILER} bytes`,
        );
      }
    }
  }
}
