/**
 * A multipart/form-data reader for the API's uploads: one pass over the body's own buffers, the
 * file part handed on as slices of them (no copy, no stream per part). It replaced busboy on the
 * upload routes, whose streams, events and per-part objects cost more CPU per 4 KB upload than
 * the rest of the request's parsing, and 80 MB of RSS under load in promoted garbage.
 *
 * What it accepts is busboy's reading of RFC 7578, so that clients see no change: a preamble and
 * an epilogue are ignored; a part's headers end at the first blank line and are read up to the
 * first line that is not a header; a part without a `form-data` Content-Disposition or whose name
 * or filename holds a line break is skipped; a part is a file when it has a filename or is
 * `application/octet-stream`; parameters are RFC 2231/5987 (`filename*=UTF-8''...`), quoted with
 * backslash escapes, plain values read as UTF-8; a filename is its last path segment.
 *
 * Every search is `Buffer.indexOf` over bytes not seen before, plus a bounded look at the last
 * delimiter's length: linear in the body's size, whatever the bytes and however they are split.
 */
import { HttpError } from './http-error.js';
import { decodeText, describePart, headerValue } from './multipart-headers.js';

export interface MultipartLimits {
  /** The whole body, boundaries and epilogue included (413 past it). */
  bodyBytes: number;
  /** A text field's value (longer is reported `truncated`, not kept). */
  fieldBytes: number;
  /** Text fields (413 past it). */
  fields: number;
  /** Parts of any kind (413 past it). */
  parts: number;
}

/** One part's header block, CRLFs included: longer is malformed (busboy kept 80 KiB of it). */
export const MAX_PART_HEADER_BYTES = 16 * 1024;
/** RFC 2046 allows 70; some clients send longer. A longer one only lengthens the tail search. */
export const MAX_BOUNDARY_LENGTH = 200;

export type Part =
  | { kind: 'field'; name: string; value: string; truncated: boolean }
  | {
      kind: 'file';
      name: string;
      /** As sent, reduced to its last path segment; undefined without one. */
      filename: string | undefined;
      /** The part's bytes as they arrive; what the consumer leaves unread is skipped. */
      content: AsyncIterable<Buffer>;
    };

const MALFORMED = 'malformed multipart body';
const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');
const EMPTY = Buffer.alloc(0);
const DASH = 0x2d;
const CR = 0x0d;

function malformed(reason: string): HttpError {
  return new HttpError(400, `${MALFORMED}: ${reason}`);
}

/** The boundary of a multipart/form-data Content-Type; null when it is not one or has none. */
export function multipartBoundary(contentType: string | undefined): string | null {
  if (contentType === undefined || !/^multipart\/form-data\s*(;|$)/i.test(contentType)) {
    return null;
  }
  const boundary = headerValue(contentType).parameters.find(([key]) => key === 'boundary');
  return boundary?.[1] ?? null;
}

/** Whether a request's Content-Type is multipart/form-data (with or without a boundary). */
export function isMultipartFormData(contentType: string | undefined): boolean {
  return contentType !== undefined && /^multipart\/form-data\s*(;|$)/i.test(contentType);
}

/**
 * The parts of a multipart body read from `source` (the request's buffers). A file part's
 * `content` must be read, or left, before the next part is asked for: the parts share the source.
 * Throws an HttpError: 400 for a malformed body, 413 past a limit.
 */
export async function* multipartParts(
  source: AsyncIterable<Buffer>,
  boundary: string,
  limits: MultipartLimits,
): AsyncGenerator<Part> {
  if (boundary.length === 0 || boundary.length > MAX_BOUNDARY_LENGTH) {
    throw malformed(`the boundary must have 1 to ${MAX_BOUNDARY_LENGTH} characters`);
  }
  const iterator = source[Symbol.asyncIterator]();
  const reader = new DelimitedReader(iterator, boundary, limits.bodyBytes);
  try {
    await reader.skipPart(); // the preamble
    let parts = 0;
    let fields = 0;
    for (;;) {
      const block = await reader.nextHeaderBlock();
      if (block === null) break;
      parts += 1;
      if (parts > limits.parts)
        throw new HttpError(413, `at most ${limits.parts} parts are allowed`);
      const part = describePart(block);
      if (part === null) {
        await reader.skipPart();
      } else if (part.file) {
        yield {
          kind: 'file',
          name: part.name,
          filename: part.filename,
          content: reader.partBody(),
        };
        await reader.skipPart();
      } else {
        fields += 1;
        if (fields > limits.fields) {
          throw new HttpError(413, `at most ${limits.fields} fields are allowed`);
        }
        const { bytes, truncated } = await reader.readPart(limits.fieldBytes);
        yield { kind: 'field', name: part.name, value: decodeText(bytes, part.charset), truncated };
      }
    }
    await reader.skipEpilogue();
  } finally {
    // Lets go of the source: a body left half read is then drained or closed by the error handler.
    await iterator.return?.();
  }
}

/**
 * The body's bytes, cut at each delimiter (CRLF, two dashes, the boundary). `pending` holds what
 * was read but not yet handed on; in a part's body, its tail that could begin a delimiter is held
 * back until the next buffer tells.
 */
class DelimitedReader {
  private readonly delimiter: Buffer;
  /** The preamble is read as a part's body that the CRLF before a first delimiter begins. */
  private pending: Buffer = CRLF;
  private inBody = true;
  private received = 0;

  constructor(
    private readonly source: AsyncIterator<Buffer>,
    boundary: string,
    private readonly maxBytes: number,
  ) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1');
  }

  private async pull(): Promise<Buffer | null> {
    const next = await this.source.next();
    if (next.done === true) return null;
    this.received += next.value.length;
    if (this.received > this.maxBytes) {
      throw new HttpError(413, `the request body exceeds the limit of ${this.maxBytes} bytes`);
    }
    return next.value;
  }

  /** The current part's next bytes; null once its delimiter is reached. */
  async nextBodyChunk(): Promise<Buffer | null> {
    while (this.inBody) {
      const data = this.pending;
      const at = data.indexOf(this.delimiter);
      if (at !== -1) {
        this.pending = data.subarray(at + this.delimiter.length);
        this.inBody = false;
        return at > 0 ? data.subarray(0, at) : null;
      }
      const held = heldBackFrom(data, this.delimiter);
      if (held > 0) {
        this.pending = data.subarray(held);
        return data.subarray(0, held);
      }
      const next = await this.pull();
      if (next === null) throw malformed('the body ended inside a part');
      // At most the delimiter's length is copied again: each byte is searched a bounded number
      // of times, however small the buffers.
      this.pending = data.length === 0 ? next : Buffer.concat([data, next]);
    }
    return null;
  }

  /** The current part's bytes for a consumer; leaving the loop early leaves the rest unread. */
  partBody(): AsyncIterable<Buffer> {
    return {
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<Buffer>> => {
          const value = await this.nextBodyChunk();
          return value === null ? { done: true, value: undefined } : { done: false, value };
        },
        return: async (): Promise<IteratorResult<Buffer>> => ({ done: true, value: undefined }),
      }),
    };
  }

  async skipPart(): Promise<void> {
    while ((await this.nextBodyChunk()) !== null);
  }

  /** The current part's bytes up to `max` (beyond it, counted as truncated and dropped). */
  async readPart(max: number): Promise<{ bytes: Buffer; truncated: boolean }> {
    const kept: Buffer[] = [];
    let size = 0;
    let truncated = false;
    for (
      let chunk = await this.nextBodyChunk();
      chunk !== null;
      chunk = await this.nextBodyChunk()
    ) {
      if (size + chunk.length > max) {
        truncated = true;
        chunk = chunk.subarray(0, max - size);
      }
      size += chunk.length;
      if (chunk.length > 0) kept.push(chunk);
    }
    return { bytes: kept.length === 1 ? (kept[0] as Buffer) : Buffer.concat(kept), truncated };
  }

  /**
   * After a delimiter: null when it closes the body (`--`), else the part's header block, from
   * the delimiter's end to the blank line; the reader is then in the part's body. A delimiter
   * before the blank line ends the part there (busboy drops such a part): its block is empty.
   */
  async nextHeaderBlock(): Promise<Buffer | null> {
    let data = this.pending;
    while (data.length < 2) {
      const next = await this.pull();
      if (next === null) throw malformed('the body ended after a boundary');
      data = Buffer.concat([data, next]);
    }
    if (data[0] === DASH && data[1] === DASH) {
      this.pending = data.subarray(2);
      return null;
    }
    const end = this.blockEnd(data, 0);
    if (end !== null) {
      if (end.at > MAX_PART_HEADER_BYTES) throw malformed(headerTooLong());
      return this.enterPart(data.subarray(end.at + end.length), data.subarray(0, end.at), end);
    }
    // The block spans buffers: gathered in one bounded buffer, each new byte searched once.
    const block = Buffer.allocUnsafe(MAX_PART_HEADER_BYTES + this.delimiter.length);
    let used = data.copy(block, 0, 0, Math.min(data.length, block.length));
    for (;;) {
      if (used === block.length) throw malformed(headerTooLong());
      const next = await this.pull();
      if (next === null) throw malformed('the body ended inside part headers');
      const before = used;
      used += next.copy(block, used, 0, Math.min(next.length, block.length - used));
      const found = this.blockEnd(block.subarray(0, used), before);
      if (found !== null) {
        const rest = next.subarray(found.at + found.length - before);
        return this.enterPart(rest, Buffer.from(block.subarray(0, found.at)), found);
      }
    }
  }

  /** Where a header block ends in `data` (searched from where `fresh` new bytes begin). */
  private blockEnd(data: Buffer, fresh: number): BlockEnd | null {
    const blank = data.indexOf(HEADER_END, Math.max(0, fresh - HEADER_END.length + 1));
    const limit = blank === -1 ? data.length : blank;
    const delimiter = data
      .subarray(0, limit + this.delimiter.length - 1)
      .indexOf(this.delimiter, Math.max(0, fresh - this.delimiter.length + 1));
    if (delimiter !== -1 && delimiter < limit) {
      return { at: delimiter, length: this.delimiter.length, byDelimiter: true };
    }
    return blank === -1 ? null : { at: blank, length: HEADER_END.length, byDelimiter: false };
  }

  /** Past a header block: in the part's body, or (a delimiter ended it) after the part. */
  private enterPart(rest: Buffer, block: Buffer, end: BlockEnd): Buffer {
    this.pending = rest;
    this.inBody = !end.byDelimiter;
    return end.byDelimiter ? EMPTY : block;
  }

  /** Reads what follows the closing delimiter to the body's end, within the body's limit. */
  async skipEpilogue(): Promise<void> {
    this.pending = EMPTY;
    while ((await this.pull()) !== null);
  }
}

interface BlockEnd {
  at: number;
  length: number;
  /** A delimiter came before the blank line. */
  byDelimiter: boolean;
}

function headerTooLong(): string {
  return `a part's headers are longer than ${MAX_PART_HEADER_BYTES} bytes`;
}

/**
 * Where the tail of `data` that could begin `delimiter` starts (data.length when none could): only
 * the last delimiter-length bytes are looked at, and only from a CR.
 */
function heldBackFrom(data: Buffer, delimiter: Buffer): number {
  let from = data.indexOf(CR, Math.max(0, data.length - delimiter.length + 1));
  while (from !== -1) {
    const tail = data.length - from;
    if (data.compare(delimiter, 0, tail, from) === 0) return from;
    from = data.indexOf(CR, from + 1);
  }
  return data.length;
}
