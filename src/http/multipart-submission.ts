import type { FastifyRequest } from 'fastify';
import { keptFileName } from '../domain/file-name.js';
import type { AddressPolicy } from '../outbound/address-policy.js';
import { redactUrl } from '../outbound/target.js';
import {
  MAX_CALLBACK_BODY_BYTES,
  MAX_CALLBACK_METADATA_BYTES,
} from '../processing/result-recorder.js';
import { HttpError } from './http-error.js';
import {
  isMultipartFormData,
  type MultipartLimits,
  multipartBoundary,
  multipartParts,
} from './multipart-reader.js';
import { fromClient } from './request-body.js';

/** Bytes a multipart body may carry beyond the file itself: boundaries, headers, text fields. */
export const MULTIPART_OVERHEAD = 1024 * 1024;
export const MAX_METADATA_ENTRIES = 100;
export const MAX_METADATA_KEY_LENGTH = 256;
export const MAX_FIELD_BYTES = 64 * 1024;

export interface SubmissionFields {
  metadata: Record<string, string>;
  callback: string | null;
  /** v2.2: a URL to download instead of a `file` part. */
  location: string | null;
}

const METADATA_FIELD = /^metadata\[(.*)\]$/s;

/** C0 controls and DEL, which no URL holds (RFC 3986) and the WHATWG parser strips or escapes. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Validates a URL argument: absolute http(s), nothing else. */
export function parseHttpUrl(name: string, value: string): string {
  // Refused, not cleaned up: the value is kept as sent, and PostgreSQL cannot store a NUL in
  // text (such a fetch was a 500 there, and accepted on SQLite).
  if (CONTROL.test(value)) throw new HttpError(400, `${name} must not contain control characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new HttpError(400, `${name} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new HttpError(400, `${name} must be an http or https URL`);
  }
  return value;
}

/**
 * Validates a callback URL: absolute http(s), and not a literal address the policy refuses (such
 * a delivery could never be made; a host name is vetted when the callback is sent).
 */
export function parseCallbackUrl(name: string, value: string, policy: AddressPolicy): string {
  const hostname = new URL(parseHttpUrl(name, value)).hostname;
  const reason = policy.literalRefusal(hostname);
  if (reason !== null) {
    throw new HttpError(
      400,
      policy.refusalMessage(`${name} ${redactUrl(value)} is refused`, reason),
    );
  }
  return value;
}

/** Collects `callback`, `location` (v2.2) and `metadata[key]` fields; other names are ignored. */
export class FieldCollector {
  readonly fields: SubmissionFields = { metadata: {}, callback: null, location: null };
  private metadataCount = 0;
  /** Each metadata entry's size as a callback sends it: `"key":"value"`, JSON-encoded. */
  private readonly metadataEntryBytes = new Map<string, number>();
  private metadataBytes = 2; // {}

  constructor(
    /** Refuses a callback to a literal address it refuses. */
    private readonly policy: AddressPolicy,
    private readonly acceptMetadata: boolean,
    private readonly acceptLocation = false,
  ) {}

  add(name: string, value: string, truncated = false): void {
    if (truncated)
      throw new HttpError(400, `field ${name} is longer than ${MAX_FIELD_BYTES} bytes`);
    if (name === 'callback') {
      this.fields.callback = parseCallbackUrl('callback', value, this.policy);
      this.checkCallbackBody();
      return;
    }
    if (name === 'location' && this.acceptLocation) {
      this.fields.location = parseHttpUrl('location', value);
      return;
    }
    const metadata = METADATA_FIELD.exec(name);
    if (metadata?.[1] === undefined || !this.acceptMetadata) return;
    const key = metadata[1].trim();
    if (key === '' || key.length > MAX_METADATA_KEY_LENGTH) {
      throw new HttpError(
        400,
        `metadata keys must have 1 to ${MAX_METADATA_KEY_LENGTH} characters`,
      );
    }
    if (!Object.hasOwn(this.fields.metadata, key)) this.metadataCount += 1;
    if (this.metadataCount > MAX_METADATA_ENTRIES) {
      throw new HttpError(400, `at most ${MAX_METADATA_ENTRIES} metadata entries are allowed`);
    }
    // defineProperty: a key such as "__proto__" must become data, not change the prototype.
    Object.defineProperty(this.fields.metadata, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    this.countMetadata(key, value);
    this.checkCallbackBody();
  }

  /** Keeps the size of the metadata as sent (escapes included: \u0001 is 6 bytes), not as received. */
  private countMetadata(key: string, value: string): void {
    const entry =
      Buffer.byteLength(JSON.stringify(key)) + 1 + Buffer.byteLength(JSON.stringify(value));
    const previous = this.metadataEntryBytes.get(key);
    // One comma per entry after the first.
    this.metadataBytes +=
      previous === undefined
        ? entry + (this.metadataEntryBytes.size > 0 ? 1 : 0)
        : entry - previous;
    this.metadataEntryBytes.set(key, entry);
  }

  /**
   * A callback body is at most MAX_CALLBACK_BODY_BYTES: a submission whose metadata alone would
   * not leave room for the rest of its result is refused now, not when its callback is due.
   */
  private checkCallbackBody(): void {
    if (this.fields.callback === null || this.metadataBytes <= MAX_CALLBACK_METADATA_BYTES) return;
    throw new HttpError(
      400,
      `metadata takes ${this.metadataBytes} bytes as JSON; with a callback it may take at most ${MAX_CALLBACK_METADATA_BYTES} (callback bodies are limited to ${MAX_CALLBACK_BODY_BYTES} bytes)`,
    );
  }
}

/** The request's declared Content-Length; 0 when it declares none (chunked). */
export function declaredLength(request: FastifyRequest): number {
  const declared = Number(request.headers['content-length']);
  return Number.isSafeInteger(declared) && declared > 0 ? declared : 0;
}

/** Refuses what cannot be an acceptable upload before reading a byte of it. */
export function checkUploadHeaders(request: FastifyRequest, maxFileSize: number): void {
  if (!isMultipartFormData(request.headers['content-type'])) {
    throw new HttpError(400, 'the request must be multipart/form-data with a part named file');
  }
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxFileSize + MULTIPART_OVERHEAD) {
    throw new HttpError(413, `the content exceeds the limit of ${maxFileSize} bytes`);
  }
}

const MALFORMED = 'malformed multipart body';

/**
 * What the console's uploads may hold (@fastify/multipart and busboy: text fields buffer at most
 * MAX_FIELD_BYTES each, a part too many ends the body with 413; one byte over the file size
 * reaches the consumer, which refuses it with 413).
 */
export function uploadPartLimits(maxFileSize: number) {
  return {
    fileSize: maxFileSize + 1,
    fieldSize: MAX_FIELD_BYTES,
    fields: MAX_METADATA_ENTRIES + 10,
  };
}

/** What one API upload's body may hold (see multipart-reader.ts). */
function uploadLimits(maxFileSize: number): MultipartLimits {
  return {
    bodyBytes: maxFileSize + MULTIPART_OVERHEAD,
    fieldBytes: MAX_FIELD_BYTES,
    fields: MAX_METADATA_ENTRIES + 10,
    parts: 1000,
  };
}

/**
 * Walks a multipart upload: text fields are collected, the one `file` part is handed to `onFile`
 * as it streams (fields may come before or after it), other file parts are skipped unread.
 * `fileName`: the file part's filename as kept (keptFileName), null without one.
 */
export async function readUploadForm<T>(
  request: FastifyRequest,
  options: {
    maxFileSize: number;
    acceptMetadata: boolean;
    acceptLocation: boolean;
    policy: AddressPolicy;
  },
  onFile: (content: AsyncIterable<Buffer>) => Promise<T>,
): Promise<{ file: T | null; fileName: string | null; fields: SubmissionFields }> {
  checkUploadHeaders(request, options.maxFileSize);
  const boundary = multipartBoundary(request.headers['content-type']);
  if (boundary === null) throw new HttpError(400, `${MALFORMED}: its Content-Type has no boundary`);
  const collector = new FieldCollector(
    options.policy,
    options.acceptMetadata,
    options.acceptLocation,
  );
  let file: { value: T } | null = null;
  let fileName: string | null = null;
  // Not destroyed when left early: the error handler drains or closes what is left of the body.
  const body = fromClient<Buffer>(request.raw.iterator({ destroyOnReturn: false }), MALFORMED);
  for await (const part of multipartParts(body, boundary, uploadLimits(options.maxFileSize))) {
    if (part.kind === 'field') {
      collector.add(part.name, part.value, part.truncated);
    } else if (part.name !== 'file') {
      // not ours: skipped unread
    } else if (file !== null) {
      throw new HttpError(400, 'send exactly one part named file');
    } else {
      fileName = keptFileName(part.filename);
      file = { value: await onFile(part.content) };
    }
  }
  if (file !== null && collector.fields.location !== null) {
    throw new HttpError(400, 'send either a file or a location, not both');
  }
  return { file: file?.value ?? null, fileName, fields: collector.fields };
}
