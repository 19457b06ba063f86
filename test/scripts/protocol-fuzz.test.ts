import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { failures, judge, runCases, sendCase, tally } from '../../soak/fuzz-client.js';
import { multipartBody, seeded, whole, request as withHeaders } from '../../soak/fuzz-requests.js';
import { CATEGORIES, caseSeed, generateCase } from '../../soak/protocol-fuzz.js';
import { buildService, useSharedClamd } from '../helpers/service.js';
import { TEST_STORE } from '../helpers/test-database.js';

// @run-alone: 1,000 hostile requests at concurrency 8 load the service

const clamd = useSharedClamd();
/** Short timeouts keep the slow and stalled cases to seconds; no limit refuses the burst. */
const env = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_RATE_LIMIT: '0',
  ASSAY_AUTH_FAIL_RATE: '0',
  ASSAY_REQUEST_IDLE_TIMEOUT: '2',
  ASSAY_HEADER_TIMEOUT: '4',
});
const timeouts = { idleTimeoutMs: 2000, headerTimeoutMs: 4000 };
const SEED = 20_261_122;

describe(`protocol fuzz (soak/protocol-fuzz.ts) on ${TEST_STORE}`, () => {
  test('1,000 generated requests: no 5xx but 503, every error in the service shape, no hang', async (t) => {
    const svc = await buildService(t, env());
    const port = Number(new URL(svc.url).port);
    const ctx = { auth: svc.auth, ...timeouts };
    const records = await runCases(
      1000,
      8,
      (i) => generateCase(caseSeed(SEED, i), ctx),
      () => port,
    );
    const table = tally(records, CATEGORIES).join('\n');
    t.diagnostic(table);
    assert.equal(records.length, 1000);
    assert.deepEqual(failures(records, 1000), [], table);
    // Not vacuous: every category ran, and requests got past authentication and parsing.
    for (const category of CATEGORIES) {
      const of = records.filter((r) => r.fuzzCase.category === category);
      assert.ok(of.length >= 5, `${category}: ${of.length} cases\n${table}`);
    }
    const labels = new Set(records.map((r) => r.label));
    for (const label of ['201', '202', '400', '401', '404', '405', '413', '431']) {
      assert.ok(labels.has(label), `no ${label} among ${[...labels]}\n${table}`);
    }
    // A stalled body is cut (408; v1.0: 502) and a trickled one is answered.
    const slow = records.filter((r) => r.fuzzCase.category === 'slow');
    assert.ok(
      slow.some((r) => r.label === '408' || r.label === '502'),
      table,
    );
    assert.ok(
      slow.some((r) => r.fuzzCase.kind.startsWith('trickle') && /^[1-4]\d\d$/.test(r.label)),
      table,
    );
    // Odd metadata was stored and echoed as sent (checked on every such 201).
    assert.ok(
      records.some((r) => r.fuzzCase.echoes !== undefined && r.label === '201'),
      table,
    );
    // Healthy afterwards: alive, and a clean upload is scanned.
    assert.equal((await fetch(`${svc.url}/health/live`)).status, 200);
    const form = new FormData();
    form.append('file', new Blob(['clean content after the fuzz']), 'after.txt');
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: form,
    });
    assert.equal(upload.status, 201, await upload.text());
  });

  test('a known-bad request gets the JSON shape, and the judge flags what is wrong', async (t) => {
    const svc = await buildService(t, env());
    const ctx = { auth: svc.auth, ...timeouts };
    const rng = seeded(1);
    // A multipart body whose boundary is not the declared one: 400 {"error"}.
    const body = multipartBody('actual', [{ name: 'file', filename: 'a.txt', body: 'x' }]);
    const bad = {
      category: 'multipart' as const,
      kind: 'boundary-mismatch',
      seed: 1,
      ...whole(
        withHeaders(
          rng,
          ctx,
          'POST',
          '/v2.2/files',
          'multipart/form-data; boundary=declared',
          body,
        ),
      ),
    };
    const outcome = await sendCase(bad, Number(new URL(svc.url).port));
    assert.equal(outcome.answers[0]?.status, 400);
    assert.match(outcome.answers[0]?.body.toString() ?? '', /^\{"error":"[^"]+"\}$/);
    assert.deepEqual(judge(bad, outcome), []);

    // The same request to a server that answers as the service must not: each is caught.
    const wrong = [
      'HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops!',
      'HTTP/1.1 400 Bad Request\r\nX-Service-Request-Id: x\r\nContent-Type: text/html\r\nContent-Length: 4\r\n\r\n<p/>',
      'HTTP/1.1 502 Bad Gateway\r\nX-Service-Request-Id: x\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"error":""}',
      'HTTP/1.1 503 Service Unavailable\r\nX-Service-Request-Id: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"error":"x"}',
      'garbage',
      '',
    ];
    for (const answer of wrong) {
      const server = createServer((socket) => {
        socket.on('error', () => {});
        if (answer === '') socket.destroy();
        else socket.end(answer);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      const problems = judge(bad, await sendCase(bad, port));
      server.close();
      assert.ok(problems.length > 0, `not caught: ${JSON.stringify(answer)}`);
    }
    // And a server that never answers is a hang, found within the case's wait.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    const hung = await sendCase(
      { ...bad, waitMs: 300 },
      typeof address === 'object' && address !== null ? address.port : 0,
    );
    silent.close();
    assert.match(judge(bad, hung).join(), /a hang/);
  });
});
