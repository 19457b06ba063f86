import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { randomContent, sha1 } from '../helpers/content.js';
import {
  type LegacyDocument,
  type LegacyFormat,
  legacyRequest,
  parseLegacy,
  UUID,
} from '../helpers/legacy.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { guardRefused } from '../helpers/loopback-only.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const large = randomContent(50_000);
let content: LocalServer;
before(async () => {
  // A stand-in for the internet: EICAR, content larger than the v2.x limit of the tests, a stall.
  content = await startLocalServer(async (request, response) => {
    if (request.url === '/eicar.txt') return void response.end(eicar());
    if (request.url === '/large.bin') return void response.end(large);
    if (request.url === '/stall') {
      await sleep(3_000);
      return void response.end('late');
    }
    response.writeHead(404);
    response.end('not here');
  });
});
after(async () => {
  await content.close();
  assert.deepEqual(guardRefused, [], 'Assay refused every private address before connecting');
});

/** Receivers live on 127.0.0.1, allowed by setting; retries are fast. */
const env = (extra: Record<string, string> = {}) => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  ASSAY_CALLBACK_RETRY_BASE_MS: '100',
  ...extra,
});

function submitFetch(
  url: string,
  auth: string,
  fields: Record<string, string>,
  format?: LegacyFormat,
) {
  return legacyRequest(`${url}/api/scan/fetch`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
    ...(format === undefined ? {} : { format }),
    ...(fields.format === undefined ? {} : { answeredIn: fields.format as LegacyFormat }),
  });
}

async function pollStatus(url: string, auth: string, requestId: string): Promise<LegacyDocument> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const answer = await legacyRequest(`${url}/api/scan/status/${requestId}`, {
      headers: { authorization: auth },
    });
    if (answer.body.status !== 'pending') return answer.body;
    await sleep(20);
  }
  throw new Error(`${requestId} still pending`);
}

/** A receiver that answers 500 to its first `failures` requests, then 200. */
async function flakyReceiver(t: { after(fn: () => Promise<void>): void }, failures: number) {
  let calls = 0;
  const receiver = await startLocalServer((_request, response) => {
    calls += 1;
    response.writeHead(calls <= failures ? 500 : 200);
    response.end();
  });
  t.after(() => receiver.close());
  return receiver;
}

describe('v1.0 POST /api/scan/fetch', () => {
  test('pending at once; callback gets a GET ping and post_callback the result, both retried', async (t) => {
    const svc = await buildService(t, env());
    const ping = await flakyReceiver(t, 1);
    const results = await flakyReceiver(t, 2);
    const submitted = await submitFetch(
      svc.url,
      svc.auth,
      {
        url: `${content.url}/eicar.txt`,
        callback: `${ping.url}/done?job=7`,
        post_callback: `${results.url}/results`,
      },
      'xml',
    );
    assert.equal(submitted.status, 200, submitted.text);
    assert.equal(submitted.body.status, 'pending');
    assert.match(submitted.body.request_id ?? '', UUID);

    const pings = await ping.waitFor(2);
    for (const request of pings) {
      assert.equal(request.method, 'GET');
      assert.equal(request.url, '/done?job=7');
      assert.equal(request.body.length, 0, 'a ping carries no result');
      assert.match(String(request.headers['user-agent']), /Assay/);
    }
    const posts = await results.waitFor(3);
    await sleep(300);
    assert.equal(ping.requests.length, 2, 'no ping after the delivered one');
    assert.equal(results.requests.length, 3, 'no POST after the delivered one');
    const expected = {
      status: 'infected',
      virus: ['eicar-test-signature'],
      checksum: sha1(eicar()),
      request_id: submitted.body.request_id,
    };
    for (const request of posts) {
      assert.equal(request.method, 'POST');
      const body = request.body.toString();
      assert.deepEqual(
        parseLegacy('xml', body, String(request.headers['content-type'])),
        expected,
        'the result, in the format of the submission',
      );
    }
    assert.deepEqual(
      await pollStatus(svc.url, svc.auth, submitted.body.request_id ?? ''),
      expected,
    );
  });

  test('format as a form field; no size limit but the engine: above the v2.x limit is scanned', async (t) => {
    const svc = await buildService(t, env({ ASSAY_MAX_FILE_SIZE: '10000' }));
    const receiver = await flakyReceiver(t, 0);
    const submitted = await submitFetch(svc.url, svc.auth, {
      url: `${content.url}/large.bin`,
      post_callback: `${receiver.url}/results`,
      format: 'yaml',
    });
    assert.equal(submitted.status, 200);
    assert.equal(submitted.body.status, 'pending');
    const [delivered] = await receiver.waitFor(1);
    const result = parseLegacy(
      'yaml',
      String(delivered?.body),
      String(delivered?.headers['content-type']),
    );
    assert.deepEqual(result, {
      status: 'clean',
      checksum: sha1(large),
      request_id: submitted.body.request_id,
    });
    // The same content through v2.x stops at ASSAY_MAX_FILE_SIZE.
    const v2 = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ location: `${content.url}/large.bin` }).toString(),
    });
    const { id } = (await v2.json()) as { id: string };
    let file: Record<string, unknown> = {};
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !('error' in file || 'findings' in file)) {
      await sleep(20);
      const read = await fetch(`${svc.url}/v2.2/files/${id}`, {
        headers: { authorization: svc.auth },
      });
      file = read.status === 200 ? ((await read.json()) as Record<string, unknown>) : {};
    }
    assert.match(String(file.error), /limit of 10000 bytes/);
  });

  test('answers at once for a slow remote; a failed download is oops, pinged like any result', async (t) => {
    const svc = await buildService(t, env());
    const started = Date.now();
    const slow = await submitFetch(svc.url, svc.auth, { url: `${content.url}/stall` });
    assert.equal(slow.body.status, 'pending');
    assert.ok(Date.now() - started < 1_000, 'answered before the remote did');

    const ping = await flakyReceiver(t, 0);
    const missing = await submitFetch(svc.url, svc.auth, {
      url: `${content.url}/missing`,
      callback: `${ping.url}/done`,
    });
    const result = await pollStatus(svc.url, svc.auth, missing.body.request_id ?? '');
    assert.equal(result.status, 'oops');
    assert.match(result.reason ?? '', /404/);
    await ping.waitFor(1);
  });

  test('the SSRF guard applies to the url and to both callbacks', async (t) => {
    const svc = await buildService(t, env());
    // A refused literal address for a callback can never be delivered: 400 in v1.0's format.
    const refusedCallbacks: Array<Record<string, string>> = [
      { callback: 'http://10.0.0.1/ping' },
      { post_callback: 'http://192.168.1.1/results' },
      { post_callback: 'http://[::ffff:169.254.169.254]/' },
    ];
    for (const fields of refusedCallbacks) {
      const answer = await submitFetch(svc.url, svc.auth, {
        url: `${content.url}/eicar.txt`,
        ...fields,
      });
      assert.equal(answer.status, 400, JSON.stringify(fields));
      assert.equal(answer.body.status, 'oops');
      assert.match(answer.body.reason ?? '', /callback .* is refused: .*(private|link-local)/);
    }
    assert.deepEqual(await svc.store.db.selectFrom('jobs').selectAll().execute(), []);
    // A name is vetted when the callback is sent: refused then, and given up at once.
    const resolving = await buildService(t, env(), undefined, {
      resolve: async () => [{ address: '10.0.0.5', family: 4 }],
    });
    const submitted = await submitFetch(resolving.url, resolving.auth, {
      url: 'http://169.254.169.254/latest/meta-data/',
      callback: 'http://hooks.test/ping',
      post_callback: 'http://hooks.test/results',
    });
    const result = await pollStatus(resolving.url, resolving.auth, submitted.body.request_id ?? '');
    assert.equal(result.status, 'oops');
    assert.match(result.reason ?? '', /refused.*link-local/);
    const id = (submitted.body.request_id ?? '').replaceAll('-', '');
    const deadline = Date.now() + 5_000;
    let attempts: string[] = [];
    while (Date.now() < deadline && attempts.length < 2) {
      const trace = (await (
        await fetch(`${resolving.url}/v2.2/files/${id}/trace`, {
          headers: { authorization: resolving.auth },
        })
      ).json()) as { events: Array<{ message: string }> };
      attempts = trace.events.map((e) => e.message).filter((m) => m.startsWith('callback'));
      await sleep(50);
    }
    // Retries would come every 100 ms or so: none does.
    await sleep(1_000);
    const trace = (await (
      await fetch(`${resolving.url}/v2.2/files/${id}/trace`, {
        headers: { authorization: resolving.auth },
      })
    ).json()) as { events: Array<{ message: string }> };
    attempts = trace.events.map((e) => e.message).filter((m) => m.startsWith('callback'));
    assert.equal(attempts.length, 2, attempts.join(' | '));
    for (const attempt of attempts) {
      assert.match(
        attempt,
        /^callback attempt 1 to .*refused.*10\.0\.0\.5 is a private.*; given up$/,
      );
    }
  });

  test('400 for a url or callback that is not an http(s) URL', async (t) => {
    const svc = await buildService(t, env());
    const cases: Array<Record<string, string>> = [
      { url: 'file:///etc/passwd' },
      { url: 'not a url' },
      { url: `${content.url}/eicar.txt`, callback: 'ftp://example.com/x' },
      { url: `${content.url}/eicar.txt`, post_callback: 'nope' },
    ];
    for (const fields of cases) {
      const answer = await submitFetch(svc.url, svc.auth, fields);
      assert.equal(answer.status, 400, JSON.stringify(fields));
      assert.equal(answer.body.status, 'oops');
    }
    const jobs = await svc.store.db.selectFrom('jobs').selectAll().execute();
    assert.deepEqual(jobs, []);
  });
});
