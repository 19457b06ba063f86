import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { newId } from '../../src/accounts/credentials.js';
import { ResultRecorder } from '../../src/processing/result-recorder.js';
import { callbackLimitsEnv, traceMessages, uploadWithFields } from '../helpers/callbacks.js';
import { startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const env = callbackLimitsEnv(clamd);

/** `count` metadata entries of `size` copies of `char`. */
function metadata(count: number, size: number, char: string): Record<string, string> {
  return Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`metadata[k${i}]`, char.repeat(size)]),
  );
}

describe('callback limits', () => {
  test('a callback body is capped by the metadata as sent (JSON), not as received', async (t) => {
    const svc = await buildService(t, env());
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    const callback = `${receiver.url}/hook`;

    // 200 KB of control characters is 1.2 MB as JSON (each one is \u0001): refused at once.
    const escaped = metadata(4, 50_000, '\u0001');
    const refused = await uploadWithFields(svc, 'escaped', { ...escaped, callback });
    assert.equal(refused.status, 400);
    assert.match(
      ((await refused.json()) as { error: string }).error,
      /metadata takes \d+ bytes as JSON; with a callback .* limited to 1048576 bytes/,
    );
    const viaFetch = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: new URLSearchParams({ location: `${receiver.url}/x`, callback, ...escaped }),
    });
    assert.equal(viaFetch.status, 400, 'the fetch route applies the same limit');
    // Without a callback nothing is sent, so the same metadata is taken.
    assert.equal((await uploadWithFields(svc, 'escaped', escaped)).status, 201);

    // 900 KB of plain letters is 900 KB as JSON: within the limit, and delivered whole.
    const accepted = await uploadWithFields(svc, 'plain', {
      ...metadata(15, 60_000, 'a'),
      callback,
    });
    assert.equal(accepted.status, 201);
    const result = await accepted.text();
    const [delivered] = await receiver.waitFor(1, 10_000);
    assert.equal(delivered?.body.toString(), result);
    assert.ok((delivered?.body.length ?? 0) <= 1024 * 1024);
    await sleep(300);
    assert.equal(receiver.requests.length, 1, 'nothing was sent for the refused submissions');
  });

  test('a result whose callback body would still pass the cap is recorded, its callback not sent', async (t) => {
    // Not reachable through the API's limits (the submission check leaves room for the rest of
    // a result): the recorder's own guard, with the service's store and a real receiver.
    const svc = await buildService(t, env());
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    const id = newId();
    const recorded = await new ResultRecorder(svc.store, () => {}).complete({
      file: {
        id,
        accountId: svc.accountId,
        apiKeyId: svc.keyId,
        checksum: null,
        sha256: null,
        contentLength: null,
        contentType: null,
        findings: null,
        metadata: { big: 'x'.repeat(1024 * 1024) },
        callback: `${receiver.url}/hook?secret=1`,
        error: 'download failed',
        creationDate: new Date().toISOString(),
      },
      version: 'v2.2',
      legacy: null,
      events: [],
      creditHeld: false,
    });
    assert.equal(recorded, true);
    assert.equal((await svc.store.callbacks.listForFile(id)).length, 0, 'nothing queued');
    const messages = await traceMessages(svc.url, svc.auth, id);
    assert.ok(
      messages.some((m) =>
        /^callback to http:\/\/127\.0\.0\.1:\d+\/hook\?… not sent: its body of \d+ bytes is over the limit of 1048576$/.test(
          m,
        ),
      ),
      messages.join(' | '),
    );
    const read = await fetch(`${svc.url}/v2.2/files/${id}`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(read.status, 200, 'the result itself is recorded');
  });
});
