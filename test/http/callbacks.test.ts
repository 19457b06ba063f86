import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { verifySignature } from '../helpers/callbacks.js';
import { uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

/** Fast retries for tests; receivers live on 127.0.0.1, allowed by setting. */
const env = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  ASSAY_CALLBACK_RETRY_BASE_MS: '100',
});

describe('callbacks', () => {
  test('a receiver that fails the first 3 deliveries gets the 4th, signed, with the GET body', async (t) => {
    const svc = await buildService(t, env());
    let calls = 0;
    const receiver = await startLocalServer((_request, response) => {
      calls += 1;
      response.writeHead(calls <= 3 ? 500 : 200);
      response.end();
    });
    t.after(() => receiver.close());
    const submitted = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(eicar(), { callback: `${receiver.url}/hook?token=abc`, 'metadata[m]': '1' }),
    });
    const { id } = (await submitted.json()) as { id: string };
    const requests = await receiver.waitFor(4);
    await sleep(200);
    assert.equal(requests.length, 4, 'no delivery after the successful one');

    const delivered = requests[3];
    assert.ok(delivered);
    assert.equal(delivered.method, 'POST');
    assert.equal(delivered.url, '/hook?token=abc');
    assert.equal(delivered.headers['content-type'], 'application/json');
    assert.match(String(delivered.headers['user-agent']), /Assay/);
    assert.ok(
      verifySignature(
        String(delivered.headers['x-assay-signature']),
        delivered.body,
        svc.callbackSecret,
      ),
      'the signature verifies with the account callback secret',
    );
    assert.equal(
      verifySignature(String(delivered.headers['x-assay-signature']), delivered.body, 'wrong'),
      false,
    );
    const read = await fetch(`${svc.url}/v2.2/files/${id}`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(delivered.body.toString(), await read.text(), 'byte for byte the GET body');
    for (const request of requests)
      assert.equal(request.body.toString(), delivered.body.toString());
    const delays = requests.slice(1).map((r, i) => r.at - (requests[i]?.at ?? 0));
    assert.ok(
      delays.every((d) => d >= 40),
      `retries wait: ${delays.join(', ')} ms`,
    );

    const trace = (await (
      await fetch(`${svc.url}/v2.2/files/${id}/trace`, { headers: { authorization: svc.auth } })
    ).json()) as { events: Array<{ message: string }> };
    const attempts = trace.events.filter((e) => e.message.startsWith('callback attempt'));
    assert.equal(attempts.length, 4, JSON.stringify(trace.events));
    assert.match(attempts[0]?.message ?? '', /HTTP 500; next attempt at/);
    assert.doesNotMatch(
      attempts[0]?.message ?? '',
      /token=abc/,
      'query strings stay out of the trace',
    );
    assert.match(attempts[3]?.message ?? '', /delivered \(HTTP 200\)/);
  });

  test('sync uploads with a callback deliver it too; a failing receiver never blocks others', async (t) => {
    const svc = await buildService(t, env());
    const slow = await startLocalServer(async (_request, response) => {
      // Unreferenced: once the test ends, this wait must not hold the file's process.
      await sleep(20_000, undefined, { ref: false });
      response.end();
    });
    const good = await startLocalServer((_request, response) => response.end('ok'));
    t.after(async () => {
      await slow.close();
      await good.close();
    });
    await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('slow one', { callback: `${slow.url}/hook` }),
    });
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('hello', { callback: `${good.url}/hook` }),
    });
    const result = await upload.text();
    const [delivered] = await good.waitFor(1, 5_000);
    assert.equal(delivered?.body.toString(), result);
  });

  test('a callback URL that is a refused literal address is refused at submission (400)', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const refused = [
      'http://10.0.0.1/hook',
      'http://169.254.169.254/',
      'http://[::1]:8080/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'http://0x7f.1/hook',
    ];
    const submit = (route: string, callback: string) => {
      if (route.endsWith('/files/fetch')) {
        return fetch(`${svc.url}${route}`, {
          method: 'POST',
          headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ location: 'https://files.example/x', callback }).toString(),
        });
      }
      return fetch(`${svc.url}${route}`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm('hello', { callback }),
      });
    };
    const routes = ['/v2.0/files', '/v2.2/files', '/v2.0/files/async', '/v2.2/files/async'];
    for (const route of [...routes, '/v2.1/files/fetch', '/v2.2/files/fetch']) {
      for (const callback of refused) {
        const answer = await submit(route, callback);
        const body = (await answer.json()) as { error?: string };
        assert.equal(answer.status, 400, `${route} ${callback}`);
        assert.match(
          body.error ?? '',
          /^callback https?:\/\/.* is refused: .* is an? (private|link-local|loopback|IPv4-mapped).*; the service allows it only if listed in ASSAY_FETCH_ALLOW$/,
        );
      }
    }
    assert.deepEqual(await svc.store.db.selectFrom('jobs').selectAll().execute(), []);
    assert.deepEqual(await svc.store.db.selectFrom('files').selectAll().execute(), []);
  });

  test('a callback refused by the address policy when sent is given up at once, not retried', async (t) => {
    // hooks.test resolves to a private address: only the attempt can find that out.
    const svc = await buildService(
      t,
      { ASSAY_CLAMD: clamd.socket, ASSAY_CALLBACK_RETRY_BASE_MS: '100' },
      undefined,
      { resolve: async () => [{ address: '10.1.2.3', family: 4 }] },
    );
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('hello', { callback: 'http://hooks.test/hook' }),
    });
    const { id } = (await upload.json()) as { id: string };
    const callbackLines = async () => {
      const trace = (await (
        await fetch(`${svc.url}/v2.2/files/${id}/trace`, { headers: { authorization: svc.auth } })
      ).json()) as { events: Array<{ message: string }> };
      return trace.events.map((e) => e.message).filter((m) => m.startsWith('callback'));
    };
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline && (await callbackLines()).length === 0) await sleep(50);
    // Retries would come about every 100 ms, doubling: none does.
    await sleep(1_500);
    const lines = await callbackLines();
    assert.equal(lines.length, 1, lines.join(' | '));
    assert.match(
      lines[0] ?? '',
      /^callback attempt 1 to http:\/\/hooks\.test\/hook: refused .*10\.1\.2\.3 is a private address.*listed in ASSAY_FETCH_ALLOW; given up$/,
    );
    const deliveries = await svc.store.db.selectFrom('callback_deliveries').selectAll().execute();
    assert.deepEqual(
      deliveries.map((d) => d.state),
      ['failed'],
    );
  });

  test('given up after the maximum age, and the trace records it', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_CALLBACK_MAX_AGE: '1' });
    const receiver = await startLocalServer((_request, response) => {
      response.writeHead(503);
      response.end();
    });
    t.after(() => receiver.close());
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('hello', { callback: `${receiver.url}/hook` }),
    });
    const { id } = (await upload.json()) as { id: string };
    const deadline = Date.now() + 10_000;
    let messages: string[] = [];
    while (Date.now() < deadline && !messages.some((m) => /given up/.test(m))) {
      await sleep(200);
      const trace = (await (
        await fetch(`${svc.url}/v2.2/files/${id}/trace`, { headers: { authorization: svc.auth } })
      ).json()) as { events: Array<{ message: string }> };
      messages = trace.events.map((e) => e.message);
    }
    assert.ok(
      messages.some((m) => /HTTP 503; given up/.test(m)),
      messages.join(' | '),
    );
    const count = receiver.requests.length;
    await sleep(700);
    assert.equal(receiver.requests.length, count, 'no attempts after giving up');
  });
});
