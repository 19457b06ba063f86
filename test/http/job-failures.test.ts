import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pollResult, traceOf, waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { capturedLogger } from '../helpers/logs.js';
import { buildService, startSharedClamd } from '../helpers/service.js';

const MiB = 1024 * 1024;

// A real clamd set up for 1 MiB: it refuses streams over 2 MiB with an error, and scans the rest.
let smallClamd: Awaited<ReturnType<typeof startSharedClamd>>;
before(async () => {
  smallClamd = await startSharedClamd(MiB);
});
after(async () => {
  await smallClamd?.stop();
});

async function submitAsync(url: string, auth: string, content: Buffer | string) {
  const response = await fetch(`${url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content),
  });
  assert.equal(response.status, 202);
  return ((await response.json()) as { id: string }).id;
}

describe('a job the engine fails on', () => {
  test('while the engine scans other content: attempts count, then an error result (never clean)', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: smallClamd.socket,
      ASSAY_MAX_FILE_SIZE: String(8 * MiB),
      ASSAY_ENGINE_RETRY_MS: '50',
      ASSAY_JOB_MAX_ATTEMPTS: '3',
    });
    // clamd answers this item with an error every time: it is over clamd's stream limit.
    const id = await submitAsync(svc.url, svc.auth, randomContent(3 * MiB));
    const other = await submitAsync(svc.url, svc.auth, randomContent(4096));
    assert.deepEqual((await pollResult(svc.url, svc.auth, other)).findings, []);
    const result = await pollResult(svc.url, svc.auth, id);
    assert.equal('findings' in result, false, JSON.stringify(result));
    assert.match(String(result.error), /^gave up after 3 attempts; the last failed: .*malware/);
    const trace = await traceOf(svc.url, svc.auth, id);
    assert.equal(
      trace.filter((m) => /^attempt \d of 3 failed: /.test(m)).length,
      2,
      trace.join('\n'),
    );
    assert.match(trace.at(-1) ?? '', /^failed: gave up after 3 attempts/);
  });

  test('when the engine is down for everyone: the job waits without using attempts, then completes', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: 'managed',
      ASSAY_ENGINE_RETRY_MS: '100',
      ASSAY_JOB_MAX_ATTEMPTS: '1',
    });
    const managed = svc.service.managedClamd;
    assert.ok(managed);
    await managed.stop();
    const content = randomContent(4096);
    const id = await submitAsync(svc.url, svc.auth, content);
    // The probe tries for a few seconds before it calls the failure an outage; then many
    // retries, far more than one attempt.
    let trace: string[] = [];
    for (let waited = 0; waited < 15_000 && !trace.some((m) => /; waiting: /.test(m)); ) {
      await sleep(250);
      waited += 250;
      trace = await traceOf(svc.url, svc.auth, id);
    }
    await sleep(1_500);
    const pending = await fetch(`${svc.url}/v2.2/files/${id}`, {
      headers: { authorization: svc.auth },
    });
    const body = await pending.text();
    trace = await traceOf(svc.url, svc.auth, id);
    assert.equal(
      pending.status,
      404,
      `still waiting for the engine: ${body}; ${trace.join(' | ')}`,
    );
    // One line for the wait, not one per retry.
    assert.equal(trace.filter((m) => /; waiting: /.test(m)).length, 1, trace.join('\n'));
    await managed.start();
    const result = await pollResult(svc.url, svc.auth, id).catch(async (error: unknown) => {
      const after = await traceOf(svc.url, svc.auth, id);
      throw new Error(`${String(error)}; its trace: ${after.join(' | ')}`);
    });
    assert.equal(result.checksum, sha1(content));
    assert.deepEqual(result.findings, []);
  });

  test('a job waiting out an outage is tried again every ASSAY_ENGINE_RETRY_MS, not at the next look for due jobs (each second)', async (t) => {
    const { logger, records } = capturedLogger('warn');
    const svc = await buildService(
      t,
      { ASSAY_CLAMD: '/nonexistent/clamd.sock', ASSAY_ENGINE_RETRY_MS: '100' },
      logger,
    );
    const id = await submitAsync(svc.url, svc.auth, randomContent(4096));
    const tries = () =>
      records().filter(
        (line) => line.job === id && line.msg === 'engine unavailable; job will be retried',
      ).length;
    await waitUntil('a first try', () => tries() > 0);
    const before = tries();
    await sleep(3_000);
    // About 30 at 100 ms (a try costs a few ms more); one a second would make 3 or 4.
    const made = tries() - before;
    assert.ok(made >= 10, `${made} tries in 3 s`);
  });

  test('an outage longer than ASSAY_JOB_MAX_AGE: the job ends as an error result', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: '/nonexistent/clamd.sock',
      ASSAY_ENGINE_RETRY_MS: '100',
      ASSAY_JOB_MAX_AGE: '2',
    });
    const started = Date.now();
    const id = await submitAsync(svc.url, svc.auth, randomContent(4096));
    const result = await pollResult(svc.url, svc.auth, id);
    assert.ok(Date.now() - started >= 1_900, 'it waited for the engine first');
    assert.equal('findings' in result, false);
    assert.match(String(result.error), /ASSAY_JOB_MAX_AGE.*clamd's socket does not exist/);
    const trace = await traceOf(svc.url, svc.auth, id);
    assert.match(trace.at(-1) ?? '', /^failed: could not be processed for \d+ s/);
  });
});
