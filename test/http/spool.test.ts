import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import { waitUntil } from '../helpers/client.js';
import { asBlob, randomContent, uploadForm } from '../helpers/content.js';
import { failWrites } from '../helpers/failing-writes.js';
import { buildService, spoolOf, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
// Small content would be kept in its job (ASSAY_ASYNC_INLINE_BYTES): these tests are the spool's.
const env = () => ({ ASSAY_CLAMD: clamd.socket, ASSAY_ASYNC_INLINE_BYTES: '0' });

/**
 * Sends the head and the start of a multipart upload by hand, waits until the spool shows
 * `spooled`, then drops the connection, as a client that goes away mid-upload does.
 */
async function abandonUpload(
  url: string,
  auth: string,
  path: string,
  body: Buffer,
  declared: number,
  spooled: () => boolean,
  contentType = 'multipart/form-data; boundary=B',
): Promise<void> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on('error', () => {});
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: ${auth}\r\n` +
      `Content-Type: ${contentType}\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  socket.write(body);
  await waitUntil('the upload reached the spool', spooled);
  socket.destroy();
}

const FILE_HEAD = Buffer.from(
  '--B\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n' +
    'Content-Type: application/octet-stream\r\n\r\n',
);

describe('a failed async submission leaves nothing in the spool', () => {
  test('a second file part, a bad callback or bad metadata after the file: 400, spool empty', async (t) => {
    const svc = await buildService(t, env());
    const twoFiles = uploadForm(randomContent(200_000));
    twoFiles.append('file', asBlob(randomContent(1000)), 'second.bin');
    const cases: Array<[string, FormData]> = [
      ['two file parts', twoFiles],
      ['a bad callback after the file', uploadForm(randomContent(200_000), { callback: 'nope' })],
      [
        'a metadata key too long after the file',
        uploadForm(randomContent(200_000), { [`metadata[${'k'.repeat(300)}]`]: 'v' }),
      ],
    ];
    for (const [name, body] of cases) {
      const response = await fetch(`${svc.url}/v2.2/files/async`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body,
      });
      assert.equal(response.status, 400, name);
      await response.arrayBuffer();
      assert.deepEqual(spoolOf(svc.dataDir), [], name);
    }
  });

  test('the client goes away in the file or after it: spool empty', async (t) => {
    const svc = await buildService(t, env());
    const path = '/v2.2/files/async';
    // Mid-file: a part file is being written.
    await abandonUpload(
      svc.url,
      svc.auth,
      path,
      Buffer.concat([FILE_HEAD, randomBytes(512 * 1024)]),
      4 * 1024 * 1024,
      () => spoolOf(svc.dataDir).some((name) => name.endsWith('.part')),
    );
    await waitUntil('the spool is empty', () => spoolOf(svc.dataDir).length === 0);
    // After the file: it is complete (renamed), the next part has begun.
    await abandonUpload(
      svc.url,
      svc.auth,
      path,
      Buffer.concat([
        FILE_HEAD,
        randomBytes(64 * 1024),
        Buffer.from('\r\n--B\r\nContent-Disposition: form-data; name="metadata[a]"\r\n\r\nva'),
      ]),
      1024 * 1024,
      () => spoolOf(svc.dataDir).some((name) => !name.endsWith('.part')),
    );
    await waitUntil('the spool is empty', () => spoolOf(svc.dataDir).length === 0);
    // v1.0: the raw body is the content.
    await abandonUpload(
      svc.url,
      svc.auth,
      '/api/scan/async',
      randomBytes(512 * 1024),
      4 * 1024 * 1024,
      () => spoolOf(svc.dataDir).length > 0,
      'application/octet-stream',
    );
    await waitUntil('the spool is empty', () => spoolOf(svc.dataDir).length === 0);
  });

  test('the job cannot be committed (a store write fails): 5xx, spool empty, on v2 and v1.0', async (t) => {
    const svc = await buildService(t, env());
    const failure = await failWrites(svc.store.db, [{ table: 'jobs', on: 'INSERT' }]);
    const v2 = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(randomContent(100_000)),
    });
    assert.equal(v2.status, 500);
    await v2.arrayBuffer();
    assert.deepEqual(spoolOf(svc.dataDir), []);
    const v1 = await fetch(`${svc.url}/api/scan/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: asBlob(randomContent(100_000)),
    });
    assert.equal(v1.status, 500);
    await v1.arrayBuffer();
    assert.deepEqual(spoolOf(svc.dataDir), []);
    // Once the store takes writes again, submissions work (and spool) as before.
    await failure.heal();
    const ok = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(randomContent(1000)),
    });
    assert.equal(ok.status, 202);
  });
});

describe('orphan spool files', () => {
  test('at start, an orphan older than the grace is removed and logged; young and referenced ones stay', async (t) => {
    const logs: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _encoding, done) {
          logs.push(JSON.parse(String(chunk)) as Record<string, unknown>);
          done();
        },
      }),
    );
    const id = () => randomBytes(16).toString('hex');
    const names = { orphan: id(), orphanPart: `${id()}.part`, young: id(), referenced: id() };
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    const svc = await buildService(t, env(), logger, {}, async (dataDir, store) => {
      const spool = join(dataDir, 'spool');
      await mkdir(spool, { recursive: true });
      for (const [what, name] of Object.entries(names)) {
        await writeFile(join(spool, name), randomBytes(what === 'orphan' ? 1000 : 500));
        if (what !== 'young') await utimes(join(spool, name), twoHoursAgo, twoHoursAgo);
      }
      const account = await store.accounts.list();
      const accountId = account[0]?.id ?? '';
      const keys = await store.apiKeys.list(accountId);
      // A job that waits (not due for an hour) refers to its spool file.
      const later = new Date(Date.now() + 3600_000).toISOString();
      await store.jobs.insert({
        id: names.referenced,
        accountId,
        apiKeyId: keys[0]?.id ?? '',
        apiVersion: 'v2.2',
        kind: 'upload',
        state: 'pending',
        location: null,
        spoolKey: names.referenced,
        metadata: {},
        callback: null,
        attempts: 0,
        runAfter: later,
        creationDate: twoHoursAgo.toISOString(),
      });
    });
    await waitUntil('the old orphans are removed', () => spoolOf(svc.dataDir).length === 2);
    assert.deepEqual(spoolOf(svc.dataDir).sort(), [names.referenced, names.young].sort());
    const line = logs.find((entry) => entry.msg === 'removed orphan spool files');
    assert.ok(line, JSON.stringify(logs.map((entry) => entry.msg)));
    assert.equal(line.files, 2);
    assert.equal(line.bytes, 1500);
  });
});
