/** The two paths `npm run bench` compares: a multipart upload to Assay, and INSTREAM to clamd. */
import { Agent, request } from 'node:http';
import type { ClamdClient } from '../src/engines/clamav/clamd-client.js';

const MB = 1024 * 1024;
const BOUNDARY = 'assay-bench-boundary';
export const AUTH = `Basic ${Buffer.from('bench:bench-secret').toString('base64')}`;

const agent = new Agent({ keepAlive: true, maxSockets: 16 });

/** Closes the kept-alive connections to Assay, so the bench can exit. */
export function closeClients(): void {
  agent.destroy();
}

/**
 * One multipart upload of `content` to `path` (the sync route by default); resolves when the
 * expected answer (201, or 202 for an async upload) has been read. `field` and `auth` serve other
 * services' upload routes (bench/peer.ts).
 */
export function uploadToAssay(
  url: string,
  content: Buffer,
  {
    path = '/v2.2/files',
    status = 201,
    field = 'file',
    auth = AUTH,
  }: { path?: string; status?: number; field?: string; auth?: string | null } = {},
): Promise<void> {
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"; filename="f"\r\n` +
      'Content-Type: application/octet-stream\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, {
      method: 'POST',
      agent,
      headers: {
        ...(auth === null ? {} : { authorization: auth }),
        'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
        'content-length': head.length + content.length + tail.length,
      },
    });
    req.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        if (response.statusCode !== status) {
          reject(new Error(`assay answered ${response.statusCode}: ${Buffer.concat(chunks)}`));
        } else resolve();
      });
    });
    req.on('error', reject);
    req.write(head);
    req.write(content);
    req.end(tail);
  });
}

/** The same content straight to clamd with INSTREAM, in 1 MiB chunks as a client would send. */
export async function scanDirect(clamd: ClamdClient, content: Buffer): Promise<void> {
  const scan = clamd.instream();
  for (let offset = 0; offset < content.length; offset += MB) {
    await scan.write(content.subarray(offset, offset + MB));
  }
  const verdict = await scan.finish();
  if (verdict.signature !== null) throw new Error(`unexpected finding ${verdict.signature}`);
}
