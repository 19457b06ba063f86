import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import { multipartTokens, mutateBytes, seeded } from '../../soak/fuzz-requests.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
// These tests are about parsing: hundreds of requests in a burst must not meet the rate limits.
const env = () => ({ ASSAY_CLAMD: clamd.socket, ASSAY_RATE_LIMIT: '0', ASSAY_AUTH_FAIL_RATE: '0' });

const BOUNDARY = 'fuzzBoundary123';
const SEED_BODY = Buffer.from(
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="metadata[a]"\r\n\r\nvalue\r\n` +
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="x.bin"\r\n` +
    `Content-Type: application/octet-stream\r\n\r\nsome file content here\r\n` +
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="callback"\r\n\r\nhttps://example.com/cb\r\n` +
    `--${BOUNDARY}--\r\n`,
);
const TOKENS = multipartTokens(BOUNDARY);

function send(port: number, head: string, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (data) => chunks.push(data));
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
    });
    socket.on('error', reject);
    socket.end(Buffer.concat([Buffer.from(head), body]));
  });
}

describe('fuzzing what parses untrusted bytes', () => {
  test('mutated multipart bodies get 201, 400 or 413 with a JSON error, never a 5xx', async (t) => {
    const svc = await buildService(t, env());
    const port = Number(new URL(svc.url).port);
    const seen = new Map<number, number>();
    for (let seed = 1; seed <= 300; seed++) {
      // Flips, drops, duplicates and inserts bytes and multipart tokens in the seed body.
      const body = mutateBytes(seeded(seed), SEED_BODY, TOKENS);
      const head =
        `POST /v2.2/files HTTP/1.1\r\nHost: x\r\nAuthorization: ${svc.auth}\r\n` +
        `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
      const { status, text } = await send(port, head, body);
      seen.set(status, (seen.get(status) ?? 0) + 1);
      assert.ok([201, 400, 413].includes(status), `seed ${seed}: ${text.slice(0, 300)}`);
      if (status !== 201) assert.match(text, /\r\n\r\n\{"error":"[^"]+/, `seed ${seed}`);
    }
    assert.ok((seen.get(400) ?? 0) > 0 && (seen.get(201) ?? 0) > 0, JSON.stringify([...seen]));
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    assert.equal(ping.status, 200, 'the service still serves');
  });

  test('random Authorization headers get 401, never a 5xx', async (t) => {
    const svc = await buildService(t, env());
    const port = Number(new URL(svc.url).port);
    for (let seed = 1; seed <= 200; seed++) {
      const rng = seeded(seed);
      const printable = Array.from({ length: rng.int(120) }, () =>
        String.fromCharCode(0x20 + rng.int(95)),
      );
      const value = rng.int(2) === 0 ? `Basic ${printable.join('')}` : printable.join('');
      const { status, text } = await send(
        port,
        `GET /v2.2/ping HTTP/1.1\r\nHost: x\r\nAuthorization: ${value}\r\nConnection: close\r\n\r\n`,
        Buffer.alloc(0),
      );
      assert.equal(status, 401, `seed ${seed}: ${JSON.stringify(value)} -> ${text.slice(0, 200)}`);
    }
  });
});
