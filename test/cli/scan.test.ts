import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { assayCliAsync, type CliRun, type CliRunOptions } from '../helpers/cli.js';
import { randomContent } from '../helpers/content.js';
import { buildService, type TestService, tempDir, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const EICAR_FINDING = 'content.malicious.eicar-test-signature';
/** Nothing of the test process's own environment reaches the command's settings. */
const NO_SETTINGS = { ASSAY_URL: '', ASSAY_KEY: '', ASSAY_SECRET: '', ASSAY_TOKEN: '' };

type Line = Record<string, unknown> & { path: string };

/** `assay scan ARGS` with the test key, against `url` (the service unless a test puts a front). */
function scan(
  svc: TestService,
  args: string[],
  url = svc.url,
  options: CliRunOptions = {},
): Promise<CliRun> {
  return assayCliAsync(
    ['scan', '--url', url, '--key', svc.keyId, '--secret', svc.secret, ...args],
    {
      ...options,
      env: { ...NO_SETTINGS, ...options.env },
    },
  );
}

/** A temporary folder holding `files` (relative path -> content), removed after the test. */
function folder(t: TestContext, files: Record<string, string | Buffer>): string {
  const root = tempDir('assay-scan-');
  // Readable by anyone: one test runs the command as an unprivileged user.
  chmodSync(root, 0o755);
  for (const [relative, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, relative)), { recursive: true });
    writeFileSync(join(root, relative), content);
  }
  t.after(() => rmSync(root, { recursive: true, force: true }));
  return root;
}

/** The NDJSON lines of a run, by path relative to `root`. */
function linesOf(run: CliRun, root: string): Map<string, Line> {
  const lines = run.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Line);
  const byPath = new Map(lines.map((line) => [line.path.slice(root.length + 1), line]));
  assert.equal(byPath.size, lines.length, 'one line per file');
  return byPath;
}

async function stored(svc: TestService, id: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${svc.url}/v2.2/files/${String(id)}`, {
    headers: { authorization: svc.auth },
  });
  assert.equal(response.status, 200, `the result ${String(id)} is stored`);
  return (await response.json()) as Record<string, unknown>;
}

interface FrontRequest {
  method: string;
  path: string;
  at: number;
}

/**
 * An HTTP front for the service: `answer` may answer a request itself (after reading its body);
 * every other request goes to the real service and its answer comes back unchanged.
 */
async function startFront(
  t: TestContext,
  target: string,
  answer: (seen: FrontRequest, seenBefore: FrontRequest[]) => Answer | null,
): Promise<{ url: string; seen: FrontRequest[] }> {
  const seen: FrontRequest[] = [];
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const current = { method: req.method ?? '', path: req.url ?? '', at: Date.now() };
    const own = answer(current, [...seen]);
    seen.push(current);
    if (own !== null) {
      for await (const _chunk of req);
      res.writeHead(own.status, { 'content-type': 'application/json', ...own.headers });
      res.end(JSON.stringify({ error: own.error }));
      return;
    }
    const upstream = request(
      new URL(req.url ?? '/', target),
      { method: req.method, headers: req.headers },
      (response) => {
        res.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

interface Answer {
  status: number;
  headers?: Record<string, string>;
  error: string;
}

const isUpload = (seen: FrontRequest) => seen.method === 'POST' && seen.path === '/v2.2/files';

describe('assay scan', () => {
  test('a clean nested folder exits 0 with a table; links (one to EICAR) are not followed, a FIFO is skipped', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const outside = folder(t, { 'eicar.txt': eicar() });
    const root = folder(t, {
      'a.txt': randomContent(2000),
      'docs/b.bin': randomContent(70_000),
      'docs/deep/er/c.txt': `hello ${randomContent(8).toString('hex')}`,
    });
    symlinkSync(join(outside, 'eicar.txt'), join(root, 'docs/link-to-eicar'));
    symlinkSync(outside, join(root, 'linked-folder'));
    assert.equal(spawnSync('mkfifo', [join(root, 'pipe')]).status, 0, 'mkfifo');

    // Settings from the environment this time.
    const run = await assayCliAsync(['scan', root], {
      env: { ASSAY_URL: svc.url, ASSAY_KEY: svc.keyId, ASSAY_SECRET: svc.secret, ASSAY_TOKEN: '' },
    });
    assert.equal(run.status, 0, run.stderr);
    const rows = run.stdout.split('\n').filter((line) => line.startsWith('clean '));
    assert.deepEqual(
      rows.map((row) => row.split(/\s+/)[1]),
      ['a.txt', 'docs/b.bin', 'docs/deep/er/c.txt'].map((relative) => join(root, relative)),
    );
    assert.doesNotMatch(run.stdout, /link-to-eicar|linked-folder|flagged {2}/);
    assert.match(
      run.stderr,
      /skipped: \S+link-to-eicar \(a symbolic link: links are not followed\)/,
    );
    assert.match(run.stderr, /skipped: \S+linked-folder \(a symbolic link/);
    assert.match(run.stderr, /skipped: \S+pipe \(a FIFO, not a regular file\)/);
    assert.match(
      run.stdout,
      /3 files \(.*\) in .* s: 3 clean, 0 flagged, 0 errors; 2 symbolic links not followed; 1 special file skipped/,
    );
  });

  test('EICAR in a nested folder exits 1; --json prints one result per file; --metadata is stored', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const root = folder(t, {
      'clean.txt': randomContent(1000),
      'nested/other.bin': randomContent(5000),
      'nested/deeper/eicar.com': eicar(),
    });
    const run = await scan(svc, [
      root,
      '--json',
      '--concurrency',
      '2',
      '--metadata',
      'order=42',
      '--metadata',
      'team name=blue=green',
    ]);
    assert.equal(run.status, 1, run.stderr);
    const lines = linesOf(run, root);
    assert.deepEqual([...lines.keys()].sort(), [
      'clean.txt',
      'nested/deeper/eicar.com',
      'nested/other.bin',
    ]);
    const metadata = { order: '42', 'team name': 'blue=green' };
    for (const [relative, line] of lines) {
      assert.match(String(line.id), /^[0-9a-f]{32}$/);
      const findings = relative.endsWith('eicar.com') ? [EICAR_FINDING] : [];
      assert.deepEqual(line.findings, findings, relative);
      assert.deepEqual(line.metadata, metadata);
      const result = await stored(svc, line.id);
      assert.deepEqual(result.findings, findings);
      assert.deepEqual(result.metadata, metadata, 'the metadata arrived with the upload');
      assert.equal(result.content_length, relative === 'clean.txt' ? 1000 : line.content_length);
    }
    assert.match(run.stderr, /3 files .*: 2 clean, 1 flagged, 0 errors/);
  });

  test('--async submits to /files/async and polls each result (here with a token)', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const made = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth },
    });
    const token = ((await made.json()) as { id: string }).id;
    const front = await startFront(t, svc.url, () => null);
    const root = folder(t, { 'a/clean.bin': randomContent(3000), 'b/eicar.txt': eicar() });
    const run = await assayCliAsync(
      [
        'scan',
        root,
        '--async',
        '--json',
        '--url',
        front.url,
        '--token',
        token,
        '--metadata',
        'k=v',
      ],
      { env: NO_SETTINGS },
    );
    assert.equal(run.status, 1, run.stderr);
    const lines = linesOf(run, root);
    assert.deepEqual(lines.get('b/eicar.txt')?.findings, [EICAR_FINDING]);
    assert.deepEqual(lines.get('a/clean.bin')?.findings, []);
    for (const line of lines.values()) {
      assert.deepEqual((await stored(svc, line.id)).metadata, { k: 'v' });
      const polls = front.seen.filter((seen) => seen.path === `/v2.2/files/${String(line.id)}`);
      assert.ok(polls.length >= 1 && polls.every((seen) => seen.method === 'GET'));
    }
    const uploads = front.seen.filter((seen) => seen.method === 'POST');
    assert.deepEqual(
      uploads.map((seen) => seen.path),
      ['/v2.2/files/async', '/v2.2/files/async'],
    );
  });

  test('--exclude skips names and paths (an excluded EICAR is not scanned: exit 0)', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const root = folder(t, {
      'keep.txt': randomContent(100),
      'debug.log': randomContent(100),
      'logs/x.txt': randomContent(100),
      'logs/y.log': randomContent(100),
      'build/out/eicar.com': eicar(),
      'src/build/out/kept.txt': randomContent(100),
    });
    const run = await scan(svc, [root, '--json', '--exclude', '*.log', '--exclude', 'build/**']);
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual([...linesOf(run, root).keys()].sort(), [
      'keep.txt',
      'logs/x.txt',
      'src/build/out/kept.txt',
    ]);
    assert.match(run.stderr, /3 entries excluded/);
  });

  test('an unreadable file and a missing path are error lines; errors win over flagged: exit 2', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const root = folder(t, {
      'readable.txt': randomContent(500),
      'eicar.com': eicar(),
      'locked.bin': randomContent(500),
    });
    chmodSync(join(root, 'locked.bin'), 0o000);
    // Root reads any file whatever its mode: the command then runs as nobody, so that opening
    // locked.bin really fails (EACCES), as it would for an operator's unprivileged account.
    const asUnprivileged =
      process.getuid?.() === 0
        ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
        : [];
    const run = await scan(svc, [root, join(root, 'missing'), '--json'], svc.url, {
      wrapper: asUnprivileged,
    });
    assert.equal(run.status, 2, run.stderr);
    const lines = linesOf(run, root);
    assert.equal(lines.size, 4);
    assert.deepEqual(lines.get('readable.txt')?.findings, []);
    assert.deepEqual(lines.get('eicar.com')?.findings, [EICAR_FINDING]);
    assert.deepEqual(lines.get('locked.bin'), {
      path: join(root, 'locked.bin'),
      error: 'cannot open the file: EACCES: permission denied',
    });
    assert.match(String(lines.get('missing')?.error), /^ENOENT/);
    assert.match(run.stderr, /error: \S+locked\.bin: cannot open the file: EACCES/);
    assert.match(run.stderr, /3 files .*: 1 clean, 1 flagged, 2 errors/);
  });

  test('a 429 is retried after its Retry-After, the file sent whole again', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const front = await startFront(t, svc.url, (seen, before) =>
      isUpload(seen) && !before.some(isUpload)
        ? { status: 429, headers: { 'retry-after': '1' }, error: 'rate limit exceeded' }
        : null,
    );
    const root = folder(t, { 'eicar.com': eicar(), 'big.bin': randomContent(300_000) });
    const run = await scan(svc, [root, '--json', '--concurrency', '1'], front.url);
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, /retrying \S+ after HTTP 429 in 1\.0 s \(retry 1 of at most 5\)/);
    const uploads = front.seen.filter(isUpload);
    assert.equal(uploads.length, 3, 'two files, the first twice');
    const [first, second] = uploads;
    assert.ok(second !== undefined && first !== undefined && second.at - first.at >= 950);
    const lines = linesOf(run, root);
    assert.equal((await stored(svc, lines.get('big.bin')?.id)).content_length, 300_000);
    assert.deepEqual(lines.get('eicar.com')?.findings, [EICAR_FINDING]);
  });

  test('a file that vanishes before a retry is an error line; retries are bounded', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const root = folder(t, { 'vanishing.bin': randomContent(1000) });
    const front = await startFront(t, svc.url, (seen) => {
      if (!isUpload(seen)) return null;
      rmSync(join(root, 'vanishing.bin'), { force: true });
      return { status: 503, headers: { 'retry-after': '0' }, error: 'busy' };
    });
    const vanished = await scan(svc, [root, '--json'], front.url);
    assert.equal(vanished.status, 2, vanished.stderr);
    assert.equal(front.seen.filter(isUpload).length, 1);
    assert.match(
      String(linesOf(vanished, root).get('vanishing.bin')?.error),
      /^cannot open the file: ENOENT/,
    );

    writeFileSync(join(root, 'stays.bin'), randomContent(1000));
    const busy = await startFront(t, svc.url, (seen) =>
      isUpload(seen) ? { status: 503, headers: { 'retry-after': '0' }, error: 'busy' } : null,
    );
    const bounded = await scan(svc, [root, '--json', '--retries', '2'], busy.url);
    assert.equal(bounded.status, 2, bounded.stderr);
    assert.equal(busy.seen.filter(isUpload).length, 3, 'one attempt and two retries');
    assert.equal(
      linesOf(bounded, root).get('stays.bin')?.error,
      'the upload failed: HTTP 503: busy',
    );
  });

  test('an unreachable server, refused credentials and a usage mistake exit 2 with a clear line', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const root = folder(t, { 'a.txt': randomContent(100) });
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));

    const unreachable = await scan(svc, [root], `http://127.0.0.1:${port}`);
    assert.equal(unreachable.status, 2);
    assert.equal(
      unreachable.stderr.trim(),
      `assay scan: cannot reach the server at http://127.0.0.1:${port}: ECONNREFUSED`,
    );
    const refused = await assayCliAsync(
      ['scan', root, '--url', svc.url, '--key', svc.keyId, '--secret', 'wrong'],
      { env: NO_SETTINGS },
    );
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /^assay scan: the ping failed: HTTP 401: /);
    const usage = await assayCliAsync(['scan', root, '--concurrency', '0'], { env: NO_SETTINGS });
    assert.equal(usage.status, 2);
    assert.match(usage.stderr, /--concurrency/);
    const noUrl = await assayCliAsync(['scan', root, '--token', 'x'], { env: NO_SETTINGS });
    assert.equal(noUrl.status, 2);
    assert.match(noUrl.stderr, /give --url or ASSAY_URL/);
  });

  test('a large file streams: peak memory stays far below its size', async (t) => {
    // A stand-in server that discards the upload (the service's own limit is 100 MB): it reads the
    // command's peak RSS (VmHWM) once the whole body has arrived.
    const size = 768 * 1024 * 1024;
    let cliPid = 0;
    let peakKb = 0;
    let received = 0;
    const server = createServer(async (req, res) => {
      if (req.url === '/v2.2/ping') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"message":"pong"}');
        return;
      }
      for await (const chunk of req) received += (chunk as Buffer).length;
      const status = readFileSync(`/proc/${cliPid}/status`, 'utf8');
      peakKb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: '0'.repeat(32), findings: [], metadata: {} }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(() => server.close());
    const root = folder(t, {});
    // Sparse: no disk space, and reading it costs little.
    writeFileSync(join(root, 'large.bin'), '');
    truncateSync(join(root, 'large.bin'), size);
    const run = await assayCliAsync(
      [
        'scan',
        join(root, 'large.bin'),
        '--url',
        `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        '--key',
        'k',
        '--secret',
        's',
      ],
      { env: NO_SETTINGS, onStart: (pid) => (cliPid = pid), timeoutMs: 120_000 },
    );
    assert.equal(run.status, 0, run.stderr);
    assert.ok(received > size, `the whole file was sent (${received} bytes)`);
    assert.ok(peakKb > 0 && peakKb * 1024 < size / 2, `peak RSS ${peakKb} kB`);
  });
});
