import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { uploadForm } from '../helpers/content.js';
import { legacyRequest } from '../helpers/legacy.js';
import { buildService, type TestService, useSharedClamd } from '../helpers/service.js';

// @run-alone: uploads and pings must answer within 2 s

const clamd = useSharedClamd();
// Pings go back to back: a key's rate limit must not be what answers them.
const env = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_RATE_LIMIT: '1000000',
  ASSAY_RATE_BURST: '1000000',
});

/**
 * The audit's upload: an XML declaration and empty comments. With 29 comments (210 bytes) the old
 * SVG rule froze the event loop for 6 s; each comment doubled it.
 */
function xmlComments(count: number): string {
  return `<?xml?>${'<!---->'.repeat(count)}`;
}

/** An upload answers within this, and so does every ping while uploads run (fixed: a few ms). */
const FAST_MS = 2_000;

/**
 * Sends `uploads` concurrently while pinging without pause; returns each upload's answer and
 * time, and the slowest ping. The service runs in this process, so a frozen event loop shows in
 * the upload's own time even when no ping happened to be in flight.
 */
async function uploadWhilePinging<T>(
  svc: TestService,
  uploads: Array<() => Promise<T>>,
): Promise<{ answers: Array<{ answer: T; ms: number }>; slowestPingMs: number; pings: number }> {
  let running = true;
  let slowestPingMs = 0;
  let pings = 0;
  const pinger = (async () => {
    while (running) {
      const start = performance.now();
      const response = await fetch(`${svc.url}/v2.2/ping`, {
        headers: { authorization: svc.auth },
      });
      assert.equal(response.status, 200);
      await response.arrayBuffer();
      slowestPingMs = Math.max(slowestPingMs, performance.now() - start);
      pings++;
    }
  })();
  try {
    const answers = await Promise.all(
      uploads.map(async (send) => {
        const start = performance.now();
        const answer = await send();
        return { answer, ms: performance.now() - start };
      }),
    );
    return { answers, slowestPingMs, pings };
  } finally {
    running = false;
    await pinger;
  }
}

describe('hostile text does not stop the service', () => {
  test('v2.2: XML with 29 and 40 empty comments is typed quickly; pings stay fast', async (t) => {
    const svc = await buildService(t, env());
    // 29 first: the old code fails here after ~6 s instead of freezing the test for hours at 40.
    for (const count of [29, 40]) {
      const content = xmlComments(count);
      if (count === 29) assert.equal(Buffer.byteLength(content), 210);
      const { answers, slowestPingMs, pings } = await uploadWhilePinging(
        svc,
        Array.from({ length: 4 }, () => async () => {
          const response = await fetch(`${svc.url}/v2.2/files`, {
            method: 'POST',
            headers: { authorization: svc.auth },
            body: uploadForm(content),
          });
          return {
            status: response.status,
            body: (await response.json()) as Record<string, unknown>,
          };
        }),
      );
      for (const { answer, ms } of answers) {
        assert.ok(ms < FAST_MS, `${count} comments: answered after ${ms.toFixed(0)} ms`);
        assert.equal(answer.status, 201, JSON.stringify(answer.body));
        assert.equal(answer.body.content_type, 'text/xml', 'libmagic calls it XML too');
        assert.deepEqual(answer.body.findings, []);
      }
      assert.ok(pings > 0);
      assert.ok(slowestPingMs < FAST_MS, `${count} comments: a ping took ${slowestPingMs} ms`);
    }
  });

  test('v1.0: the same uploads are scanned quickly; pings stay fast', async (t) => {
    const svc = await buildService(t, env());
    for (const count of [29, 40]) {
      const content = xmlComments(count);
      const { answers, slowestPingMs, pings } = await uploadWhilePinging(
        svc,
        Array.from(
          { length: 4 },
          () => () =>
            legacyRequest(`${svc.url}/api/scan/`, {
              method: 'POST',
              headers: { authorization: svc.auth },
              body: content,
            }),
        ),
      );
      for (const { answer, ms } of answers) {
        assert.ok(ms < FAST_MS, `${count} comments: answered after ${ms.toFixed(0)} ms`);
        assert.equal(answer.status, 200, answer.text);
        assert.equal(answer.body.status, 'clean');
      }
      assert.ok(pings > 0);
      assert.ok(slowestPingMs < FAST_MS, `${count} comments: a ping took ${slowestPingMs} ms`);
    }
  });
});
