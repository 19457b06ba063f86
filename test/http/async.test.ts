import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { pollResult, submitAsync, traceOf, waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });

describe('POST /files/async', () => {
  test('202 with Location and {id}; the result carries the verdict and the metadata', async (t) => {
    const svc = await buildService(t, env());
    const { response, body } = await submitAsync(svc.url, svc.auth, eicar(), {
      'metadata[ref]': 'x1',
    });
    assert.equal(response.status, 202);
    assert.deepEqual(Object.keys(body), ['id']);
    assert.match(String(body.id), /^[0-9a-f]{32}$/);
    assert.equal(response.headers.get('location'), `${svc.url}/v2.2/files/${body.id}`);
    const result = await pollResult(svc.url, svc.auth, String(body.id));
    assert.deepEqual(result.findings, ['content.malicious.eicar-test-signature']);
    assert.deepEqual(result.metadata, { ref: 'x1' });
    assert.equal(result.checksum, sha1(eicar()));
    assert.equal(result.id, body.id);
  });

  test('v2.0 results have no metadata; errors as for sync uploads', async (t) => {
    const svc = await buildService(t, env());
    const { body } = await submitAsync(svc.url, svc.auth, 'hello', { 'metadata[a]': 'b' }, 'v2.0');
    const result = await pollResult(svc.url, svc.auth, String(body.id), 15_000, 'v2.0');
    assert.equal('metadata' in result, false);
    assert.deepEqual(result.findings, []);
    const empty = await submitAsync(svc.url, svc.auth, '');
    assert.equal(empty.response.status, 400);
    const noFile = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(noFile.status, 400);
    const anonymous = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      body: uploadForm('x'),
    });
    assert.equal(anonymous.status, 401);
  });

  test('over the size limit: 413 and nothing is queued', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_MAX_FILE_SIZE: '1000' });
    const { response } = await submitAsync(svc.url, svc.auth, randomContent(1001));
    assert.equal(response.status, 413);
    const at = await submitAsync(svc.url, svc.auth, randomContent(1000));
    assert.equal(at.response.status, 202);
  });
});

describe('GET /files/{id}/trace (v2.2)', () => {
  test('lists received, the engine verdict and processed, in order, with timestamps', async (t) => {
    const svc = await buildService(t, env());
    const { body } = await submitAsync(svc.url, svc.auth, eicar());
    await pollResult(svc.url, svc.auth, String(body.id));
    const response = await fetch(`${svc.url}/v2.2/files/${body.id}/trace`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(response.status, 200);
    const trace = (await response.json()) as {
      id: string;
      events: Array<{ timestamp: string; message: string }>;
    };
    assert.equal(trace.id, body.id);
    const messages = trace.events.map((e) => e.message);
    assert.match(messages[0] ?? '', /^received: upload of 68 bytes/);
    assert.ok(
      messages.some((m) => /^engine clamav \(MALWARE\): found Eicar/.test(m)),
      messages.join(' | '),
    );
    assert.match(messages.at(-1) ?? '', /^processed/);
    for (const { timestamp } of trace.events) assert.match(timestamp, /^\d{4}-\d\d-\d\dT.*Z$/);
    const times = trace.events.map((e) => Date.parse(e.timestamp));
    assert.deepEqual(
      times,
      [...times].sort((a, b) => a - b),
    );
  });

  test('404 for unknown ids and for other accounts; not on v2.1', async (t) => {
    const svc = await buildService(t, env());
    const unknown = await fetch(`${svc.url}/v2.2/files/${'0'.repeat(32)}/trace`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(unknown.status, 404);
    const { body } = await submitAsync(svc.url, svc.auth, 'hello');
    const other = await svc.createAccountKey();
    const foreign = await fetch(`${svc.url}/v2.2/files/${body.id}/trace`, {
      headers: { authorization: other.auth },
    });
    assert.equal(foreign.status, 404);
    const v21 = await fetch(`${svc.url}/v2.1/files/${body.id}/trace`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(v21.status, 404);
  });

  test('sync uploads have a trace too', async (t) => {
    const svc = await buildService(t, env());
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('hello'),
    });
    const { id } = (await upload.json()) as { id: string };
    const trace = (await (
      await fetch(`${svc.url}/v2.2/files/${id}/trace`, { headers: { authorization: svc.auth } })
    ).json()) as { events: Array<{ message: string }> };
    assert.deepEqual(
      trace.events.map((e) => e.message.split(':')[0]),
      [
        'received',
        'engine clamav (MALWARE)',
        'engine clamav versions',
        // Text: the language engine reads it (its verdict, then its own line); images engine declines.
        'engine nsfw-language (NSFW_LANGUAGE)',
        'nsfw-language',
        'engine nsfw-image (NSFW_IMAGE)',
        'processed',
      ],
    );
  });
});

describe('when the engine is down', () => {
  test('async work waits and is retried; it never becomes a clean result', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: 'managed', ASSAY_ENGINE_RETRY_MS: '200' });
    const managed = svc.service.managedClamd;
    assert.ok(managed);
    await managed.stop();
    const { response, body } = await submitAsync(svc.url, svc.auth, eicar());
    assert.equal(response.status, 202, 'the promise is made: content and job are durable');
    // The first attempt fails (how soon depends on the machine's load): then no result yet.
    let trace: string[] = [];
    await waitUntil(
      'the trace says the engine could not scan',
      async () => {
        trace = await traceOf(svc.url, svc.auth, String(body.id));
        return trace.some((message) => /could not scan/.test(message));
      },
      15_000,
    ).catch((error: Error) => assert.fail(`${error.message}: ${JSON.stringify(trace)}`));
    const pending = await fetch(`${svc.url}/v2.2/files/${body.id}`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(pending.status, 404, 'no result while the engine is down');
    await managed.start();
    const result = await pollResult(svc.url, svc.auth, String(body.id));
    assert.deepEqual(result.findings, ['content.malicious.eicar-test-signature']);
  });
});
