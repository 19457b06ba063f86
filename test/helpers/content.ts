import { createHash, randomBytes } from 'node:crypto';

export function sha1(data: Buffer | string): string {
  return createHash('sha1').update(data).digest('hex');
}

/** Fresh random bytes: clamd caches clean verdicts by hash, so reused content would lie. */
export function randomContent(size: number): Buffer {
  return randomBytes(size);
}

/** A multipart form with `file` first, then text fields, as the vendor's clients send it. */
export function uploadForm(
  content: Buffer | string,
  fields: Record<string, string> = {},
): FormData {
  const form = new FormData();
  form.append('file', asBlob(content), 'upload.bin');
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  return form;
}

/** Node's Buffers are typed over ArrayBufferLike; ours are never shared, so Blob can take them. */
export function asBlob(content: Buffer | string): Blob {
  return new Blob([typeof content === 'string' ? content : (content as Uint8Array<ArrayBuffer>)]);
}
