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
      await sleep(20_000);
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

  test('a callback to a refused address is never sent, and the attempt says why', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_CALLBACK_RETRY_BASE_MS: '100',
    });
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('hello', { callback: 'http://169.254.169.254/hook' }),
    });
    const { id } = (await upload.json()) as { id: string };
    await sleep(500);
    const trace = (await (
      await fetch(`${svc.url}/v2.2/files/${id}/trace`, { headers: { authorization: svc.auth } })
    ).json()) as { events: Array<{ message: string }> };
    const attempt = trace.events.find((e) => e.message.startsWith('callback attempt 1'));
    assert.match(attempt?.message ?? '', /refused.*link-local/, JSON.stringify(trace.events));
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
