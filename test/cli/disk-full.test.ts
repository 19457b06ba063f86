import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { closeSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServe } from '../helpers/cli.js';
import { pollResult } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { cannotMountTmpfs, ON_TMPFS } from '../helpers/mounts.js';
import { multipartFile, rawRequest, requestHead } from '../helpers/raw-http.js';
import { basic, tempDir } from '../helpers/service.js';

const AUTH = basic('key', 'secret');
const MiB = 1024 * 1024;

/** Free bytes of the file system holding `path`. */
function freeBytes(path: string): number {
  const stats = statfsSync(path);
  return stats.bavail * stats.bsize;
}

/** Fills the file system of `path` until `leave` bytes are free. */
function fillUntil(path: string, leave: number): void {
  const fd = openSync(path, 'w');
  try {
    const chunk = Buffer.alloc(256 * 1024, 1);
    for (let free = freeBytes(path); free > leave; free = freeBytes(path)) {
      writeSync(fd, chunk, 0, Math.min(chunk.length, free - leave));
    }
  } finally {
    closeSync(fd);
  }
}

async function submit(url: string, size: number) {
  const response = await fetch(`${url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: AUTH },
    body: uploadForm(randomContent(size)),
  });
  return { response, body: (await response.json()) as Record<string, unknown> };
}

/**
 * An upload the service may refuse before reading all of it: written on a raw socket, so the
 * answer is read even when the service closes the connection on the rest of the body.
 */
async function refusedUpload(url: string, path: string, contentType: string, body: Buffer) {
  const request = rawRequest(
    url,
    Buffer.concat([
      Buffer.from(
        requestHead('POST', path, {
          authorization: AUTH,
          'content-type': contentType,
          'content-length': body.length,
        }),
      ),
      body,
    ]),
  );
  const answer = await request.answered();
  request.socket.destroy();
  const [head = '', text = ''] = answer.split('\r\n\r\n', 2);
  return {
    status: Number(head.split(' ')[1]),
    retryAfter: /\r\nretry-after: *(\d+)/i.exec(head)?.[1],
    text,
  };
}

async function ready(url: string) {
  const response = await fetch(`${url}/health/ready`);
  return { status: response.status, body: (await response.json()) as { problems: string[] } };
}

const unavailable = cannotMountTmpfs();

test('a full disk: 507 with Retry-After and readiness says so; when space returns, work resumes by itself', {
  skip: unavailable ?? false,
}, async (t) => {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  // The data dir, clamd's temporary files included (managed clamd), on a 20 MiB tmpfs.
  const serve = await startServe(
    t,
    {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_CLAMD: 'managed',
      // Streams, which clamd copies to a temporary file of its own before it scans them: with the
      // disk full it cannot, and the job waits. (Handed as a file, an item this small is a memory
      // file and needs no disk: test/clamav/clamd-files.test.ts.)
      ASSAY_CLAMD_HANDOFF: 'stream',
      ASSAY_ENGINE_RETRY_MS: '200',
      // A scan that fails for want of space is not the item's fault: it never uses an attempt.
      ASSAY_JOB_MAX_ATTEMPTS: '2',
    },
    ['unshare', '-m', 'sh', '-c', ON_TMPFS, dataDir],
  );
  // The tmpfs as the service sees it, from its own mount namespace.
  const inside = `/proc/${serve.child.pid}/root${dataDir}`;
  assert.ok(freeBytes(inside) < 21 * MiB, 'the data dir is on the small tmpfs');
  const filler = join(inside, 'filler');
  fillUntil(filler, Math.round(1.6 * MiB));

  // The first upload fits; clamd has no room left to copy it, so its job waits.
  const first = await submit(serve.url, 1_000_000);
  assert.equal(first.response.status, 202);
  // The next finds the disk full: 507, in each API's format, with Retry-After.
  const form = multipartFile(randomContent(1_000_000));
  const full = await refusedUpload(
    serve.url,
    '/v2.2/files/async',
    form.contentType,
    Buffer.concat([Buffer.from(form.before), form.content, Buffer.from(form.after)]),
  );
  assert.equal(full.status, 507);
  assert.match((JSON.parse(full.text) as { error: string }).error, /no disk space/);
  assert.match(full.retryAfter ?? '', /^\d+$/);
  const legacy = await refusedUpload(
    serve.url,
    '/api/scan/async',
    'application/octet-stream',
    randomContent(1_000_000),
  );
  assert.equal(legacy.status, 502);
  const oops = JSON.parse(legacy.text) as { status: string; reason: string };
  assert.equal(oops.status, 'oops');
  assert.match(oops.reason, /no disk space/);
  assert.match(legacy.retryAfter ?? '', /^\d+$/);
  const notReady = await ready(serve.url);
  assert.equal(notReady.status, 503);
  assert.ok(notReady.body.problems.includes('disk full'), JSON.stringify(notReady.body));

  // Long enough for several tries of the first job (one every 200 ms).
  await sleep(1500);
  const waiting = await fetch(`${serve.url}/v2.2/files/${first.body.id}`, {
    headers: { authorization: AUTH },
  });
  assert.equal(waiting.status, 404, 'the first job waits while the disk is full');

  // Space returns: nobody restarts anything.
  rmSync(filler);
  const freedAt = performance.now();
  const deadline = Date.now() + 10_000;
  let isReady = await ready(serve.url);
  while (isReady.status !== 200 && Date.now() < deadline) {
    await sleep(100);
    isReady = await ready(serve.url);
  }
  assert.equal(isReady.status, 200, JSON.stringify(isReady.body));
  const again = await submit(serve.url, 1_000_000);
  assert.equal(again.response.status, 202);
  for (const id of [first.body.id, again.body.id]) {
    const result = await pollResult(serve.url, AUTH, String(id), 30_000);
    assert.deepEqual(result.findings, [], 'scanned in full once space returned');
    assert.equal(result.error, undefined);
  }
  t.diagnostic(
    `pending work done ${Math.round(performance.now() - freedAt)} ms after space returned`,
  );
  assert.equal(serve.child.exitCode, null, 'the service never exited');
});
