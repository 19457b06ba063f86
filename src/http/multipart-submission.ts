import type { FastifyRequest } from 'fastify';
import { HttpError } from './http-error.js';

/** Bytes a multipart body may carry beyond the file itself: boundaries, headers, text fields. */
export const MULTIPART_OVERHEAD = 1024 * 1024;
export const MAX_METADATA_ENTRIES = 100;
export const MAX_METADATA_KEY_LENGTH = 256;
export const MAX_FIELD_BYTES = 64 * 1024;

export interface SubmissionFields {
  metadata: Record<string, string>;
  callback: string | null;
}

const METADATA_FIELD = /^metadata\[(.*)\]$/s;

/** Validates a callback URL: absolute http(s), nothing else. */
export function parseCallback(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new HttpError(400, `callback is not a valid URL: ${JSON.stringify(value.slice(0, 200))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new HttpError(400, 'callback must be an http or https URL');
  }
  return value;
}

/** Collects `callback` and `metadata[key]` text fields; other names are ignored. */
export class FieldCollector {
  readonly fields: SubmissionFields = { metadata: {}, callback: null };
  private metadataCount = 0;

  constructor(private readonly acceptMetadata: boolean) {}

  add(name: string, value: string, truncated: boolean): void {
    if (truncated)
      throw new HttpError(400, `field ${name} is longer than ${MAX_FIELD_BYTES} bytes`);
    if (name === 'callback') {
      this.fields.callback = parseCallback(value);
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
  }
}

/** Refuses what cannot be an acceptable upload before reading a byte of it. */
export function checkUploadHeaders(request: FastifyRequest, maxFileSize: number): void {
  if (!request.isMultipart()) {
    throw new HttpError(400, 'the request must be multipart/form-data with a part named file');
  }
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxFileSize + MULTIPART_OVERHEAD) {
    throw new HttpError(413, `the content exceeds the limit of ${maxFileSize} bytes`);
  }
}
