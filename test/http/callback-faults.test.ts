import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { traceMessages, verifySignature } from '../helpers/callbacks.js';
import { uploadForm } from '../helpers/content.js';
import { deleteUnchecked, failWrites } from '../helpers/failing-writes.js';
import { startLocalServer } from '../helpers/local-server.js';
import { capturedLogger } from '../helpers/logs.js';
import { buildService, type TestService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

const env = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  ASSAY_CALLBACK_RETRY_BASE_MS: '100',
});

async function uploadWithCallback(svc: TestService, callback: string): Promise<string> {
  const response = await fetch(`${svc.url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: svc.auth },
    body: uploadForm(`content for ${callback}`, { callback }),
  });
  assert.equal(response.status, 201);
  return ((await response.json()) as { id: string }).id;
}

/** Waits until `check` holds, polling; fails with `what` after `timeoutMs`. */
async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe('callback faults', () => {
  test('an account without a callback secret gets one: nothing is signed with an empty key', async (t) => {
    const { lines, logger } = capturedLogger();
    const svc = await buildService(t, env(), logger);
    await svc.store.db
      .updateTable('accounts')
      .set({ callback_secret: '' })
      .where('id', '=', svc.accountId)
      .execute();
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    await uploadWithCallback(svc, `${receiver.url}/hook`);
    const [delivered] = await receiver.waitFor(1, 10_000);
    assert.ok(delivered);
    const signature = String(delivered.headers['x-assay-signature']);
    assert.equal(verifySignature(signature, delivered.body, ''), false, 'not keyed with ""');
    const secret = (await svc.store.accounts.find(svc.accountId))?.callbackSecret ?? '';
    assert.match(secret, /^[0-9a-f]{64}$/, 'a new secret is stored for the account');
    assert.ok(verifySignature(signature, delivered.body, secret), 'signed with the new secret');
    assert.ok(
      lines.some((line) => line.includes('the account had no callback secret')),
      'the operator is told',
    );
    assert.ok(!lines.some((line) => line.includes(secret)), 'the new secret is not logged');
  });

  test('a deleted account: its callback is given up, never sent unsigned', async (t) => {
    const svc = await buildService(t, env());
    const receiver = await startLocalServer((_request, response) => {
      response.writeHead(500);
      response.end();
    });
    t.after(() => receiver.close());
    const id = await uploadWithCallback(svc, `${receiver.url}/hook`);
    await receiver.waitFor(1, 10_000);
    // Removed behind the service's back, as an account deletion racing a delivery would.
    await deleteUnchecked(svc.store.db, 'accounts', svc.accountId);
    // The delivery is settled first and its trace line written next: both are awaited.
    let messages: string[] = [];
    await eventually('the delivery to be given up, and traced', async () => {
      const [delivery] = await svc.store.callbacks.listForFile(id);
      messages = (await svc.store.trace.list(id)).map((event) => event.message);
      return (
        delivery?.state === 'failed' &&
        messages.some((m) => /callback attempt \d+ .*account no longer exists; given up/.test(m))
      );
    }).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${messages.join(' | ')}`);
    });
    const sent = receiver.requests.length;
    await sleep(500);
    assert.equal(receiver.requests.length, sent, 'nothing is sent once given up');
  });

  test('a store write refused while recording an attempt is retried until taken; deliveries go on meanwhile', async (t) => {
    const { lines, logger } = capturedLogger();
    const svc = await buildService(t, env(), logger);
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    // Writes that fail as on a full disk: settling one delivery, and another one's trace line.
    const broken = await failWrites(svc.store.db, [
      {
        table: 'callback_deliveries',
        on: 'UPDATE',
        columns: ['last_error'],
        when: "OLD.url LIKE '%/broken-settle'",
      },
      {
        table: 'trace_events',
        on: 'INSERT',
        when: "NEW.message LIKE 'callback attempt % to %/broken-trace: delivered%'",
      },
    ]);

    const brokenSettle = await uploadWithCallback(svc, `${receiver.url}/broken-settle`);
    await receiver.waitFor(1, 10_000);
    const brokenTrace = await uploadWithCallback(svc, `${receiver.url}/broken-trace`);
    await receiver.waitFor(2, 10_000);
    const later = await uploadWithCallback(svc, `${receiver.url}/later`);
    await receiver.waitFor(3, 10_000);

    await eventually('the later delivery in its trace', async () =>
      (await traceMessages(svc.url, svc.auth, later)).some((m) => /delivered/.test(m)),
    );
    const [settled] = await svc.store.callbacks.listForFile(brokenTrace);
    assert.equal(settled?.state, 'delivered', 'the settle before the failed trace line holds');
    const [unsettled] = await svc.store.callbacks.listForFile(brokenSettle);
    assert.equal(unsettled?.state, 'pending', 'its outcome is not recorded yet');
    // Each refused write is logged once, not once per try.
    await sleep(1500);
    const failures = lines.filter((line) =>
      /could not (record a callback attempt|append to a trace)/.test(line),
    );
    assert.equal(failures.length, 2, lines.join('\n'));
    assert.match(failures[0] ?? '', /injected write failure/);
    assert.equal((await fetch(`${svc.url}/health/live`)).status, 200);

    // The store takes writes again: both outcomes are recorded within seconds, not at the end of
    // the delivery's 2-minute lease, and neither callback is sent again.
    await broken.heal();
    await eventually('the held outcome to be recorded', async () => {
      const [delivery] = await svc.store.callbacks.listForFile(brokenSettle);
      return delivery?.state === 'delivered';
    });
    await eventually('the held trace line to be written', async () =>
      (await traceMessages(svc.url, svc.auth, brokenTrace)).some((m) => /delivered/.test(m)),
    );
    assert.equal(receiver.requests.length, 3, 'each callback was sent once');
    assert.ok(
      lines.some((line) => /done once the store took it/.test(line)),
      lines.join('\n'),
    );
  });
});
