import { randomBytes } from 'node:crypto';
import { request } from 'node:http';

export const MB = 1024 * 1024;
const BOUNDARY = 'assay-test-boundary';
const HEAD = Buffer.from(
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
    'Content-Type: application/octet-stream\r\n\r\n',
);
const TAIL = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);

export interface Answer {
  status: number;
  body: string;
  /** Bytes of the upload written before the answer arrived. */
  written: number;
}

/**
 * Streams a multipart upload of `size` bytes in 1 MiB chunks, with or without Content-Length, and
 * stops writing as soon as the answer arrives (an over-limit upload is answered early).
 */
export function streamUpload(
  url: string,
  auth: string,
  size: number,
  chunked: boolean,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const total = HEAD.length + size + TAIL.length;
    const headers: Record<string, string | number> = {
      authorization: auth,
      'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
    };
    if (!chunked) headers['content-length'] = total;
    const req = request(`${url}/v2.2/files`, { method: 'POST', headers });
    let written = 0;
    let answered = false;
    req.on('response', (response) => {
      answered = true;
      let body = '';
      response.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body, written }));
    });
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    const chunk = randomBytes(MB);
    const pump = () => {
      while (!answered && written < size) {
        const n = Math.min(MB, size - written);
        written += n;
        // A fresh tail byte per chunk keeps the content unique (clamd caches clean hashes).
        chunk[0] = written & 0xff;
        if (!req.write(n === MB ? chunk : chunk.subarray(0, n)))
          return void req.once('drain', pump);
      }
      if (!answered) req.end(TAIL);
    };
    req.write(HEAD);
    pump();
  });
}
