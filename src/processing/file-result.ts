import type { StoredFile } from '../domain/records.js';

export type ApiVersion = 'v2.0' | 'v2.1' | 'v2.2';
/** The API an item was submitted through: a v2.x version, or the deprecated v1.0. */
export type SubmissionVersion = ApiVersion | 'v1.0';

/** v2.0 predates metadata: its results never carry the field. */
export function hasMetadata(version: ApiVersion): boolean {
  return version !== 'v2.0';
}

/**
 * The file result of the spec; a processed item without a verdict renders as `error` and never
 * with `findings`, so it cannot be read as clean.
 */
export function renderFileResult(file: StoredFile, version: ApiVersion): Record<string, unknown> {
  const metadata = hasMetadata(version) ? { metadata: file.metadata } : {};
  if (file.findings === null) {
    return {
      id: file.id,
      creation_date: file.creationDate,
      error: file.error ?? 'not processed',
      ...metadata,
    };
  }
  return {
    id: file.id,
    checksum: file.checksum,
    content_length: file.contentLength,
    findings: file.findings,
    creation_date: file.creationDate,
    content_type: file.contentType,
    ...metadata,
  };
}
