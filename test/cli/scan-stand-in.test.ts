import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { assayCliAsync, type CliRunOptions } from '../helpers/cli.js';
import { randomContent } from '../helpers/content.js';
import { type ReceivedRequest, startLocalServer } from '../helpers/local-server.js';
import { tempDir } from '../helpers/service.js';

// `assay scan` against stand-in servers that misbehave as no real service would on purpose: they
// answer the ping, then do what the test says with each upload.

const NO_SETTINGS = { ASSAY_URL: '', ASSAY_KEY: '', ASSAY_SECRET: '', ASSAY_TOKEN: '' };
const CLEAN = JSON.stringify({ id: '0'.repeat(32), findings: [], metadata: {} });

function scan(url: string, args: string[], options: CliRunOptions = {}) {
  return assayCliAsync(['scan', '--url', url, '--key', 'k', '--secret', 's', ...args], {
    ...options,
    env: NO_SETTINGS,
  });
}

/** A stand-in that answers the ping, and each upload with `onUpload`. */
async function standIn(
  t: TestContext,
  onUpload: (request: ReceivedRequest, response: ServerResponse) => unknown,
) {
  const server = await startLocalServer((request, response) => {
    if (request.url === '/v2.2/ping') {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"message":"pong"}');
      return;
    }
    return onUpload(request, response);
  });
  t.after(() => server.close());
  return server;
}

function folder(t: TestContext, files: Record<string, string | Buffer>): string {
  const root = tempDir('assay-scan-stand-in-');
  for (const [name, content] of Object.entries(files)) writeFileSync(join(root, name), content);
  t.after(() => rmSync(root, { recursive: true, force: true }));
  return root;
}

const uploads = (requests: ReceivedRequest[]) => requests.filter((r) => r.method === 'POST');

describe('assay scan against a stand-in server', () => {
  test('a server that never answers ends each request at --timeout: exit 2, never clean', async (t) => {
    const root = folder(t, { 'a.txt': randomContent(1000), 'b.txt': randomContent(1000) });
    // Accepts connections and reads, never writes a byte: not even the ping is answered.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.resume();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      for (const socket of sockets) socket.destroy();
      silent.close();
    });
    const silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    const ping = await scan(silentUrl, [root, '--timeout', '2']);
    assert.equal(ping.status, 2, ping.stderr);
    assert.match(
      ping.stderr,
      /^assay scan: the server at http:\/\/127\.0\.0\.1:\d+ is too slow: (no complete answer within|nothing sent or received for) 2 s \(--timeout\)$/m,
    );

    // Answers the ping, then takes each upload whole and never answers it.
    const server = await standIn(t, () => new Promise(() => undefined));
    const run = await scan(server.url, [root, '--json', '--timeout', '2']);
    assert.equal(run.status, 2, run.stderr);
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.equal(lines.length, 2);
    for (const line of lines) {
      assert.deepEqual(Object.keys(line), ['path', 'error']);
      assert.match(
        line.error,
        /is too slow: (no complete answer within|nothing sent or received for) 2 s/,
      );
    }
    assert.equal(uploads(server.requests).length, 2, 'each file sent once (no retry)');
    assert.match(run.stderr, /2 files .*: 0 clean, 0 flagged, 2 errors/);
  });

  test('a server that trickles its answer a byte at a time still ends at --timeout', async (t) => {
    const timers = new Set<NodeJS.Timeout>();
    t.after(() => {
      for (const timer of timers) clearInterval(timer);
    });
    const server = await standIn(t, (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
      response.write('{');
      // Far more often than --timeout: an idle timer alone would wait forever.
      const timer = setInterval(() => response.write(' '), 200);
      timers.add(timer);
      response.on('close', () => clearInterval(timer));
    });
    const root = folder(t, { 'slow.txt': randomContent(1000) });
    const run = await scan(server.url, [join(root, 'slow.txt'), '--timeout', '2'], {
      timeoutMs: 120_000,
    });
    assert.equal(run.status, 2, run.stderr);
    assert.match(
      run.stderr,
      /^error: \S+slow\.txt: the server at http:\/\/127\.0\.0\.1:\d+ is too slow: no complete answer within 2 s \(--timeout\)$/m,
    );
    assert.match(run.stdout, /^error +\S+slow\.txt +the server at .* is too slow/m);
    assert.match(run.stdout, /1 file .*: 0 clean, 0 flagged, 1 error/);
  });

  test('a result without findings is an error that says so (not "undefined")', async (t) => {
    const server = await standIn(t, (_request, response) => {
      response.writeHead(201, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ id: '0'.repeat(32), metadata: {} }));
    });
    const root = folder(t, { 'a.txt': randomContent(100) });
    const run = await scan(server.url, [root]);
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /^error: \S+a\.txt: the result has no findings$/m);
    assert.doesNotMatch(run.stderr, /undefined/);
    assert.match(run.stdout, /^error +\S+a\.txt +the result has no findings$/m);
  });

  test('a link given with a trailing slash (or /.) is not followed', async (t) => {
    const server = await standIn(t, (_request, response) => {
      response.writeHead(201, { 'content-type': 'application/json' }).end(CLEAN);
    });
    const outside = folder(t, { 'target.txt': randomContent(100) });
    const root = folder(t, {});
    symlinkSync(outside, join(root, 'link'));
    for (const given of ['link/', 'link/.', 'link//']) {
      const run = await scan(server.url, [join(root, given)]);
      assert.equal(run.status, 2, `${given}: ${run.stderr}`);
      assert.match(run.stderr, /skipped: \S+link\S* \(a symbolic link: links are not followed\)/);
      assert.match(run.stderr, /^assay scan: no file was scanned$/m);
      assert.match(
        run.stdout,
        /0 files \(0 B\) in .* s: 0 clean, 0 flagged, 0 errors; 1 symbolic link not followed/,
      );
    }
    assert.equal(uploads(server.requests).length, 0, 'nothing behind the link was sent');
  });

  test('a run that scanned nothing says so and exits 2', async (t) => {
    const server = await standIn(t, (_request, response) => {
      response.writeHead(201, { 'content-type': 'application/json' }).end(CLEAN);
    });
    const root = folder(t, { 'only.log': randomContent(100) });
    mkdirSync(join(root, 'empty'));
    const empty = await scan(server.url, [join(root, 'empty'), '--json']);
    assert.equal(empty.status, 2, empty.stderr);
    assert.equal(empty.stdout, '');
    assert.match(empty.stderr, /0 files \(0 B\) in .* s: 0 clean, 0 flagged, 0 errors\n/);
    assert.match(empty.stderr, /^assay scan: no file was scanned$/m);
    const excluded = await scan(server.url, [root, '--exclude', '*.log']);
    assert.equal(excluded.status, 2, excluded.stderr);
    assert.match(excluded.stdout, /0 files .*; 1 entry excluded$/m);
    assert.match(excluded.stderr, /^assay scan: no file was scanned$/m);
    assert.equal(uploads(server.requests).length, 0);
  });

  test('--json prints each result as it arrives and keeps none: memory stays bounded', async (t) => {
    // Results far larger than any real one, with a field of many small objects (300 KB of JSON,
    // some 5 MB in memory once parsed): kept, 150 of them took 1.3 GB (peak RSS); streamed, the
    // command's peak was 310 MB, most of it garbage not yet collected.
    const files = 150;
    const padding = Array.from({ length: 100_000 }, () => ({}));
    const result = Buffer.from(
      JSON.stringify({ id: '0'.repeat(32), findings: [], metadata: {}, padding }),
    );
    const names = Array.from({ length: files }, (_, index) => `f${String(index).padStart(3, '0')}`);
    const root = folder(t, Object.fromEntries(names.map((name) => [name, randomContent(100)])));
    let cliPid = 0;
    let completeLines = 0;
    let linesBeforeLast = -1;
    let peakKb = 0;
    const server = await standIn(t, async (request, response) => {
      // The last file's answer waits until every other result is on stdout.
      if (request.body.includes(`filename="${names.at(-1)}"`)) {
        for (let waited = 0; completeLines < files - 1 && waited < 600; waited += 1) {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        linesBeforeLast = completeLines;
        const status = readFileSync(`/proc/${cliPid}/status`, 'utf8');
        peakKb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
      }
      response.writeHead(201, { 'content-type': 'application/json' }).end(result);
    });
    const run = await scan(server.url, [root, '--json'], {
      onStart: (pid) => (cliPid = pid),
      onStdout: (chunk) => {
        for (const byte of chunk) if (byte === 0x0a) completeLines += 1;
      },
      timeoutMs: 180_000,
    });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(linesBeforeLast, files - 1, 'the other results were printed before the last');
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((line) => line.path).sort(),
      names.map((name) => join(root, name)),
    );
    assert.ok(lines.every((line) => line.padding.length === padding.length));
    t.diagnostic(`peak RSS ${peakKb} kB`);
    assert.ok(peakKb > 0 && peakKb < 600 * 1024, `peak RSS ${peakKb} kB`);
  });
});
