import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { uploadForm } from '../helpers/content.js';
import { legacyRequest } from '../helpers/legacy.js';
import { buildService, type TestService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

const HANG = 'TEST-HANG-4F1C';
const EXIT = 'TEST-EXIT-9B2D';

/** Binary content (typed by libmagic, not by the text rules), with a fault marker if given. */
function binary(marker = ''): Buffer {
  return Buffer.concat([Buffer.from([0, 0xff, 1, 0xfe]), randomBytes(512), Buffer.from(marker)]);
}

async function upload(svc: TestService, content: Buffer, path = '/v2.2/files') {
  const response = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { authorization: svc.auth },
    body: uploadForm(content),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as Record<string, unknown>,
  };
}

async function traceOf(svc: TestService, id: string): Promise<string[]> {
  const response = await fetch(`${svc.url}/v2.2/files/${id}/trace`, {
    headers: { authorization: svc.auth },
  });
  assert.equal(response.status, 200);
  const body = (await response.json()) as { events: Array<{ message: string }> };
  return body.events.map((event) => event.message);
}

/** Polls an async item until it has a result (200), or gives up; null while still pending. */
async function resultOf(svc: TestService, id: string, withinMs: number) {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    const response = await fetch(`${svc.url}/v2.2/files/${id}`, {
      headers: { authorization: svc.auth },
    });
    const body = (await response.json()) as Record<string, unknown>;
    if (response.status === 200) return body;
    await sleep(50);
  }
  return null;
}

/** Uploads clean binary content until it is answered 201 (the detector is back). */
async function recovered(svc: TestService, withinMs = 15_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    const { status, body } = await upload(svc, binary());
    if (status === 201) {
      assert.deepEqual(body.findings, []);
      assert.equal(body.content_type, 'application/octet-stream');
      return;
    }
    assert.equal(status, 503, JSON.stringify(body));
    await sleep(50);
  }
  throw new Error(`uploads still refused ${withinMs} ms later`);
}

describe('when content type detection fails, the item fails', () => {
  test('a hung detector: 503 with Retry-After (v2.2) and 502 (v1.0), then it comes back', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket }, undefined, {
      detector: { hangOn: HANG, timeoutMs: 1_000 },
    });
    const hung = await upload(svc, binary(HANG));
    assert.equal(hung.status, 503, JSON.stringify(hung.body));
    assert.ok(hung.retryAfter, 'Retry-After');
    assert.match(String(hung.body.error), /content type.*did not answer within 1000 ms/);
    assert.equal('findings' in hung.body, false);
    await recovered(svc);

    const legacy = await legacyRequest(`${svc.url}/api/scan/`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: new Uint8Array(binary(HANG)),
    });
    assert.equal(legacy.status, 502, legacy.text);
    assert.equal(legacy.body.status, 'oops');
    assert.match(String(legacy.body.reason), /content type/);
    await recovered(svc);
  });

  test('an async job whose detection fails is retried, not finished clean', async (t) => {
    const svc = await buildService(
      t,
      { ASSAY_CLAMD: clamd.socket, ASSAY_ENGINE_RETRY_MS: '200' },
      undefined,
      { detector: { exitOn: EXIT } },
    );
    const accepted = await upload(svc, binary(EXIT), '/v2.2/files/async');
    assert.equal(accepted.status, 202);
    const id = String(accepted.body.id);
    // Each attempt ends the worker; the job waits and is tried again, never finished.
    const deadline = Date.now() + 15_000;
    let retries: string[] = [];
    while (Date.now() < deadline && retries.length < 2) {
      retries = (await traceOf(svc, id)).filter((line) =>
        /content type engine could not scan.*trying again/.test(line),
      );
      await sleep(100);
    }
    assert.ok(retries.length >= 2, `retried: ${JSON.stringify(await traceOf(svc, id))}`);
    assert.equal(await resultOf(svc, id, 0), null, 'no result for the failing job');

    // The detector comes back by itself between the attempts: other jobs are finished.
    const other = await upload(svc, binary(), '/v2.2/files/async');
    const result = await resultOf(svc, String(other.body.id), 15_000);
    assert.ok(result, 'the other job finished');
    assert.deepEqual(result.findings, [], JSON.stringify(result));
    assert.equal(result.content_type, 'application/octet-stream');
  });

  test('a detector that cannot restart is an outage: jobs wait without using attempts, then finish', async (t) => {
    let down = false;
    const svc = await buildService(
      t,
      { ASSAY_CLAMD: clamd.socket, ASSAY_ENGINE_RETRY_MS: '200', ASSAY_JOB_MAX_ATTEMPTS: '1' },
      undefined,
      { detector: { exitOn: EXIT, failStart: (start) => down && start > 0 } },
    );
    down = true;
    // A synchronous item kills the worker, which then cannot start again.
    assert.equal((await upload(svc, binary(EXIT))).status, 503);
    const accepted = await upload(svc, binary(), '/v2.2/files/async');
    assert.equal(accepted.status, 202);
    const id = String(accepted.body.id);
    // The probe tries the engines for up to 10 s before it calls the failure an outage.
    const deadline = Date.now() + 20_000;
    let trace: string[] = [];
    while (Date.now() < deadline && !trace.some((line) => /waiting/.test(line))) {
      trace = await traceOf(svc, id);
      await sleep(200);
    }
    assert.ok(
      trace.some((line) => /content type.*waiting/.test(line)),
      `the trace says it waits: ${JSON.stringify(trace)}`,
    );
    assert.equal(await resultOf(svc, id, 0), null, 'waiting, not ended by its one attempt');
    down = false;
    const result = await resultOf(svc, id, 30_000);
    assert.ok(result, 'finished once the detector is back');
    assert.deepEqual(result.findings, [], JSON.stringify(result));
  });
});
