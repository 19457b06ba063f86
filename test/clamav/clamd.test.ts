import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CLAMD_MAX_SCAN_TIME_MS,
  ClamdClient,
  ClamdUnavailableError,
  type ClamdVerdict,
  parseClamdAddress,
} from '../../src/engines/clamav/clamd-client.js';
import { DataDirClamd } from '../../src/engines/clamav/data-dir-clamd.js';
import { clamdSignatureToFinding } from '../../src/engines/clamav/findings.js';
import {
  type ClamdLogger,
  findClamdBinary,
  ManagedClamd,
} from '../../src/engines/clamav/managed-clamd.js';
import { eicar as eicarText } from '../../src/engines/test-content.js';
import { deflateRepeated, zipArchive, zipStored } from '../helpers/zip.js';

const eicar = () => Buffer.from(eicarText(), 'latin1');

const TESTFILES = '/usr/share/clamav-testfiles';
const LOCAL_TEST_MARKER = '38DCC0C9-7FB6-4D0D-9C37-288A380C6BB9';

const silent: ClamdLogger = { info() {}, warn() {}, error() {}, debug() {} };

async function scan(
  client: ClamdClient,
  data: Buffer,
  chunkSize = 64 * 1024,
): Promise<ClamdVerdict> {
  const stream = client.instream();
  for (let at = 0; at < data.length; at += chunkSize) {
    await stream.write(data.subarray(at, at + chunkSize));
  }
  return stream.finish();
}

async function waitFor<T>(what: string, timeoutMs: number, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline)
        throw new Error(`${what} within ${timeoutMs} ms`, { cause: error });
      await sleep(100);
    }
  }
}

describe('parseClamdAddress', () => {
  it('takes absolute socket paths and tcp://host:port', () => {
    assert.deepEqual(parseClamdAddress('/run/clamav/clamd.ctl'), {
      kind: 'unix',
      path: '/run/clamav/clamd.ctl',
    });
    assert.deepEqual(parseClamdAddress('tcp://127.0.0.1:3310'), {
      kind: 'tcp',
      host: '127.0.0.1',
      port: 3310,
    });
    assert.deepEqual(parseClamdAddress('tcp://clamd.internal:3310'), {
      kind: 'tcp',
      host: 'clamd.internal',
      port: 3310,
    });
    assert.deepEqual(parseClamdAddress('tcp://[::1]:3310'), {
      kind: 'tcp',
      host: '::1',
      port: 3310,
    });
  });

  it('rejects anything else with a message naming the value', () => {
    for (const bad of [
      '',
      'clamd.sock',
      './clamd.sock',
      'tcp://host',
      'tcp://host:0',
      'tcp://host:65536',
      'tcp://:3310',
      'udp://host:3310',
      'tcp://host:3310/x',
    ]) {
      assert.throws(() => parseClamdAddress(bad), new RegExp(`Invalid clamd address "${bad}"`));
    }
  });
});

describe('clamdSignatureToFinding', () => {
  it('maps every EICAR name to one finding', () => {
    for (const name of [
      'Eicar-Test-Signature.UNOFFICIAL',
      'Eicar-Test-Signature',
      'Win.Test.EICAR_HDB-1',
      'Eicar-Signature',
    ]) {
      assert.equal(
        clamdSignatureToFinding(name, 'content'),
        'content.malicious.eicar-test-signature',
      );
      assert.equal(clamdSignatureToFinding(name, 'av'), 'av.eicar-test-signature');
    }
  });

  it('normalises other names for the content style', () => {
    const cases: [string, string][] = [
      ['Clamav-Test-File.UNOFFICIAL', 'content.malicious.clamav-test-file'],
      ['Local-Test-File.UNOFFICIAL', 'content.malicious.local-test-file'],
      ['Win.Trojan.Agent-123456', 'content.malicious.win.trojan.agent-123456'],
      [
        'CRDF.Malware-Generic.2462546599.UNOFFICIAL',
        'content.malicious.crdf.malware-generic.2462546599',
      ],
      [
        'Heuristics.Limits.Exceeded.MaxFileSize',
        'content.malicious.heuristics.limits.exceeded.maxfilesize',
      ],
      ['Some Name (with_stuff)!.', 'content.malicious.some-name-with-stuff'],
    ];
    for (const [name, finding] of cases)
      assert.equal(clamdSignatureToFinding(name, 'content'), finding);
  });

  it('maps a long name in linear time (a trailing-run pattern was quadratic)', () => {
    const time = (dashes: number) => {
      const name = `a${'-'.repeat(dashes)}b. -`;
      const start = performance.now();
      assert.equal(
        clamdSignatureToFinding(name, 'content'),
        `content.malicious.a${'-'.repeat(dashes)}b`,
      );
      return performance.now() - start;
    };
    time(1_000);
    // Quadratic took ~100 ms at 10 KB and ~7 s at 100 KB; linear takes well under a millisecond.
    assert.ok(time(100_000) < 500);
  });

  it('keeps the name as it is, lowercased, for the av style', () => {
    assert.equal(
      clamdSignatureToFinding('CRDF.Malware-Generic.2462546599.UNOFFICIAL', 'av'),
      'av.crdf.malware-generic.2462546599.unofficial',
    );
    assert.equal(
      clamdSignatureToFinding('Clamav-Test-File.UNOFFICIAL', 'av'),
      'av.clamav-test-file.unofficial',
    );
  });
});

describe('ClamdClient against a scripted server', () => {
  let dir: string;
  let server: Server;
  let socketPath: string;
  // What the server does with each connection; tests replace it.
  let handler: (socket: Socket, data: Buffer) => void = () => {};

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'assay-fake-clamd-'));
    socketPath = join(dir, 'fake.sock');
    server = createServer((socket) => {
      socket.on('error', () => {});
      let received = Buffer.alloc(0);
      socket.on('data', (data: Buffer) => {
        received = Buffer.concat([received, data]);
        handler(socket, received);
      });
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  });

  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  // A connection per scan: sessions are tested in clamd-sessions.test.ts.
  const client = (): ClamdClient =>
    new ClamdClient(
      { kind: 'unix', path: socketPath },
      { idleTimeoutMs: 300, verdictTimeoutMs: 600, sessions: 0 },
    );

  it('parses a VERSION reply with database version and date', async () => {
    handler = (socket, data) => {
      if (data.toString() === 'zVERSION\0')
        socket.end('ClamAV 1.4.6/27000/Sun Nov 22 09:00:00 2026\0');
    };
    const version = await client().version();
    assert.equal(version.engine, 'ClamAV 1.4.6');
    assert.equal(version.databaseVersion, 27000);
    assert.equal(version.databaseDate?.getFullYear(), 2026);
    assert.equal(version.databaseDate?.getMonth(), 10);
    assert.equal(version.databaseDate?.getDate(), 22);
  });

  it('turns an ERROR reply into ClamdUnavailableError with clamd’s message', async () => {
    handler = (socket, data) => {
      if (data.includes(Buffer.alloc(4))) socket.end("stream: Can't allocate memory ERROR\0");
    };
    await assert.rejects(scan(client(), Buffer.from('hello')), {
      name: 'ClamdUnavailableError',
      message: "clamd: stream: Can't allocate memory ERROR",
    });
  });

  it('tells a clamd never reached (no socket, refused) from one that failed the content', async () => {
    // A scan whose connection was never made cannot have been failed by its content: a job then
    // waits for the engine instead of using an attempt, even if clamd is back by the probe.
    const missing = new ClamdClient(
      { kind: 'unix', path: join(dir, 'missing.sock') },
      { idleTimeoutMs: 300, verdictTimeoutMs: 600, sessions: 0 },
    );
    await assert.rejects(scan(missing, Buffer.from('hello')), (error: unknown) => {
      assert.ok(error instanceof ClamdUnavailableError);
      assert.equal(error.notReached, true, error.message);
      return true;
    });
    const refusing = createServer();
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const address = refusing.address();
    assert.ok(address !== null && typeof address === 'object');
    await new Promise<void>((resolve) => refusing.close(() => resolve()));
    const refused = new ClamdClient(
      { kind: 'tcp', host: '127.0.0.1', port: address.port },
      { idleTimeoutMs: 300, verdictTimeoutMs: 600, sessions: 0 },
    );
    await assert.rejects(scan(refused, Buffer.from('hello')), (error: unknown) => {
      assert.ok(error instanceof ClamdUnavailableError);
      assert.equal(error.notReached, true, error.message);
      return true;
    });
    // Reached, then dropped mid-stream: possibly the content's doing.
    handler = (socket) => socket.destroy();
    await assert.rejects(scan(client(), randomBytes(256 * 1024)), (error: unknown) => {
      assert.ok(error instanceof ClamdUnavailableError);
      assert.equal(error.notReached, false, error.message);
      return true;
    });
  });

  it('rejects an unexpected reply', async () => {
    handler = (socket) => socket.end('UNKNOWN COMMAND\0');
    await assert.rejects(client().ping(), ClamdUnavailableError);
  });

  it('times out when clamd goes quiet after the stream', async () => {
    handler = () => {};
    const started = Date.now();
    await assert.rejects(scan(client(), Buffer.from('hello')), /no verdict within 600 ms/);
    assert.ok(Date.now() - started < 2_000);
  });

  it('times out when clamd stops reading the stream', async () => {
    handler = (socket) => {
      socket.pause();
      // A paused socket never sees the client go: close it, or the server never closes.
      setTimeout(() => socket.destroy(), 1_000).unref();
    };
    const started = Date.now();
    await assert.rejects(scan(client(), randomBytes(16 * 1024 * 1024)), /idle for 300 ms/);
    assert.ok(Date.now() - started < 2_000);
  });

  it('waits for a verdict past the idle timeout, up to the verdict timeout (clamd is scanning)', async () => {
    // clamd says nothing while it scans, for up to its MaxScanTime: the idle timer must not end that.
    let delayMs = 800;
    handler = (socket, data) => {
      if (data.includes(Buffer.alloc(4)))
        setTimeout(() => socket.end('stream: OK\0'), delayMs).unref();
    };
    const patient = new ClamdClient(
      { kind: 'unix', path: socketPath },
      { idleTimeoutMs: 300, verdictTimeoutMs: 2_000, sessions: 0 },
    );
    assert.deepEqual(await scan(patient, Buffer.from('hello')), { signature: null });
    // ... but not forever.
    delayMs = 60_000;
    const started = Date.now();
    await assert.rejects(scan(patient, Buffer.from('hello')), /no verdict within 2000 ms/);
    assert.ok(Date.now() - started < 5_000);
  });

  it('fails when clamd closes without a reply', async () => {
    handler = (socket) => socket.destroy();
    await assert.rejects(scan(client(), Buffer.from('hello')), ClamdUnavailableError);
  });

  it('rejects a pending write when clamd stops reading and closes', async () => {
    handler = (socket, data) => {
      if (data.length > 100_000 && !socket.destroyed) {
        socket.write('INSTREAM size limit exceeded. ERROR\0', () => socket.destroy());
      }
    };
    const stream = client().instream();
    const chunk = Buffer.alloc(1024 * 1024);
    const error = await (async () => {
      for (let i = 0; i < 200; i++) await stream.write(chunk);
    })().then(
      () => assert.fail('200 MB were accepted'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ClamdUnavailableError, String(error));
    // finish() after the failure reports clamd's own words when they arrived.
    await assert.rejects(stream.finish(), ClamdUnavailableError);
  });

  it('does not crash when the socket fails before anything is awaited', async () => {
    const stream = new ClamdClient(
      { kind: 'unix', path: join(dir, 'missing.sock') },
      { sessions: 0 },
    ).instream();
    await sleep(50);
    await assert.rejects(stream.write(Buffer.from('x')), /does not exist/);
    await assert.rejects(stream.finish(), /does not exist/);
  });

  it('abort() drops the connection quietly', async () => {
    handler = () => {};
    const stream = client().instream();
    await stream.write(Buffer.from('partial'));
    stream.abort();
    await assert.rejects(stream.write(Buffer.from('more')), /aborted/);
  });

  it('fails to connect to a closed TCP port', async () => {
    const tcp = new ClamdClient(parseClamdAddress('tcp://127.0.0.1:1'));
    await assert.rejects(tcp.ping(), /refused/);
  });
});

const clamdPath = findClamdBinary();

describe('managed clamd (real)', {
  skip: clamdPath === null ? 'clamd is not installed' : false,
}, () => {
  let dataDir: string;
  let managed: ManagedClamd;
  let client: ClamdClient;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'assay-clamd-'));
    managed = new ManagedClamd({
      dataDir,
      clamdPath: clamdPath ?? '',
      maxFileSize: 100 * 1024 * 1024,
      logger: silent,
    });
    await managed.start();
    client = new ClamdClient(managed.address);
  });

  after(async () => {
    await managed?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('sets MaxScanTime, and the client waits longer than that for a verdict', async () => {
    const conf = await readFile(join(dataDir, 'clamd', 'clamd.conf'), 'utf8');
    const maxScanTime = Number(/^MaxScanTime (\d+)$/m.exec(conf)?.[1]);
    assert.equal(maxScanTime, CLAMD_MAX_SCAN_TIME_MS, conf);
    // In a session clamd's ReadTimeout runs while it scans: a scan up to MaxScanTime must fit.
    const readTimeoutMs = 1000 * Number(/^ReadTimeout (\d+)$/m.exec(conf)?.[1]);
    assert.ok(readTimeoutMs > maxScanTime, conf);
    // Over the limit clamd reports a finding (AlertExceedsMax), never a clean verdict.
    assert.match(conf, /^AlertExceedsMax yes$/m);
    // The client the service builds (defaults) outwaits clamd's own limit, so clamd's answer
    // arrives; it still stops waiting at some point.
    const waits = client.verdictTimeoutMs;
    assert.ok(waits > maxScanTime && waits <= 2 * maxScanTime, `${waits} ms`);
  });

  it('answers PING and VERSION', async () => {
    await client.ping();
    const version = await client.version();
    assert.match(version.engine, /^ClamAV \d+\.\d+/);
    // Without official databases clamd reports no database version.
    if (!existsSync('/var/lib/clamav/daily.cvd') && !existsSync('/var/lib/clamav/daily.cld')) {
      assert.equal(version.databaseVersion, null);
    }
  });

  it('finds EICAR and maps it to the finding', async () => {
    const sample = eicar();
    assert.equal(
      createHash('md5').update(sample).digest('hex'),
      '44d88612fea8a8f36de82e1278abb02f',
    );
    const signature = (await scan(client, sample)).signature ?? 'clean';
    assert.equal(signature, 'Eicar-Test-Signature.UNOFFICIAL');
    assert.equal(
      clamdSignatureToFinding(signature, 'content'),
      'content.malicious.eicar-test-signature',
    );
    assert.equal(clamdSignatureToFinding(signature, 'av'), 'av.eicar-test-signature');
  });

  it('finds EICAR in the middle of other content, across chunk boundaries', async () => {
    // The string straddles the boundary between the 24th and 25th 4 KB chunk.
    const data = Buffer.concat([
      randomBytes(4096 * 24 - 30),
      eicar(),
      Buffer.from('\ntrailing text\n'),
    ]);
    assert.equal((await scan(client, data, 4096)).signature, 'Eicar-Test-Signature.UNOFFICIAL');
  });

  it('finds EICAR in a zip inside a zip', async () => {
    const inner = zipStored([
      { name: 'readme.txt', data: Buffer.from('nothing to see\n') },
      { name: 'eicar.com', data: eicar() },
    ]);
    const outer = zipStored([{ name: 'inner.zip', data: inner }]);
    assert.equal((await scan(client, outer)).signature, 'Eicar-Test-Signature.UNOFFICIAL');
  });

  it('finds the local test marker', async () => {
    const data = Buffer.from(`some text ${LOCAL_TEST_MARKER} more text\n`);
    assert.equal((await scan(client, data)).signature, 'Local-Test-File.UNOFFICIAL');
  });

  it('flags every clamav-testfiles sample', {
    skip: !existsSync(TESTFILES) && 'no clamav-testfiles',
  }, async () => {
    const names = (await readdir(TESTFILES)).sort();
    assert.ok(names.length >= 44, `only ${names.length} samples`);
    const missed: string[] = [];
    for (const name of names) {
      const { signature } = await scan(client, await readFile(join(TESTFILES, name)));
      if (signature !== 'Clamav-Test-File.UNOFFICIAL') missed.push(`${name}: ${signature}`);
    }
    assert.deepEqual(missed, []);
  });

  it('passes fresh random bytes and ordinary text as clean', async () => {
    assert.equal((await scan(client, randomBytes(1024 * 1024))).signature, null);
    const text = Buffer.from('The quick brown fox jumps over the lazy dog.\n'.repeat(20_000));
    assert.equal((await scan(client, text)).signature, null);
    assert.equal((await scan(client, Buffer.alloc(0))).signature, null);
  });

  it('reports nesting beyond MaxRecursion instead of passing it as clean', async () => {
    let archive: Buffer = Buffer.from('deep but harmless\n');
    for (let depth = 0; depth < 20; depth++)
      archive = zipStored([{ name: `level${depth}.zip`, data: archive }]);
    const { signature } = await scan(client, archive);
    assert.match(signature ?? 'clean', /^Heuristics\.Limits\.Exceeded\./);
  });

  it('reports an encrypted archive instead of passing it as clean (it could not be read)', async () => {
    const archive = zipStored([
      { name: 'secret.txt', data: Buffer.from('nobody can read this\n'), password: 'pw' },
    ]);
    assert.equal((await scan(client, archive)).signature, 'Heuristics.Encrypted.Zip');
    // The same content unencrypted is clean: the finding is the encryption's.
    const plain = zipStored([{ name: 'secret.txt', data: Buffer.from('nobody can read this\n') }]);
    assert.equal((await scan(client, plain)).signature, null);
  });

  it('scans in parallel', async () => {
    const verdicts = await Promise.all(
      Array.from({ length: 16 }, (_, i) => scan(client, i % 2 === 0 ? eicar() : randomBytes(4096))),
    );
    verdicts.forEach((verdict, i) => {
      assert.equal(verdict.signature, i % 2 === 0 ? 'Eicar-Test-Signature.UNOFFICIAL' : null);
    });
  });

  it('restarts clamd after it is killed', { timeout: 30_000 }, async () => {
    const pid = managed.pid;
    assert.ok(pid !== undefined);
    process.kill(pid, 'SIGKILL');
    await sleep(100);
    await assert.rejects(scan(client, eicar()), ClamdUnavailableError);
    const started = Date.now();
    const verdict = await waitFor('clamd answered again', 15_000, () => scan(client, eicar()));
    assert.equal(verdict.signature, 'Eicar-Test-Signature.UNOFFICIAL');
    assert.notEqual(managed.pid, pid);
    assert.ok(Date.now() - started < 15_000);
  });
});

describe('managed clamd with a small limit and extra databases', {
  skip: clamdPath === null,
}, () => {
  let dataDir: string;
  let managed: ManagedClamd;
  let client: ClamdClient;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'assay-clamd-small-'));
    const systemDir = join(dataDir, 'system-db');
    await mkdir(systemDir);
    // Stands in for freshclam's databases: linked into clamd's database dir when present.
    const marker = Buffer.from('assay-system-database-marker').toString('hex');
    await writeFile(join(systemDir, 'extra.ndb'), `System-Marker:0:*:${marker}\n`);
    await writeFile(join(systemDir, 'freshclam.dat'), 'not a database');
    managed = new ManagedClamd({
      dataDir,
      clamdPath: clamdPath ?? '',
      maxFileSize: 1024 * 1024,
      systemDatabaseDir: systemDir,
      logger: silent,
    });
    await managed.start();
    client = new ClamdClient(managed.address);
  });

  after(async () => {
    await managed?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('loads databases from the system database dir', async () => {
    const verdict = await scan(client, Buffer.from('x assay-system-database-marker x'));
    assert.equal(verdict.signature, 'System-Marker.UNOFFICIAL');
    assert.deepEqual((await readdir(join(dataDir, 'clamd', 'db'))).sort(), [
      'assay.ndb',
      'extra.ndb',
    ]);
  });

  it('sets StreamMaxLength above maxFileSize', async () => {
    assert.equal(managed.limits.streamMaxLength, 2 * 1024 * 1024);
    assert.equal((await scan(client, randomBytes(managed.limits.streamMaxLength))).signature, null);
  });

  it('refuses a stream over StreamMaxLength with ClamdUnavailableError', async () => {
    const limit = managed.limits.streamMaxLength;
    // clamd's own reply, unless the broken pipe is noticed before it is read (a race in ~1-10% of runs).
    const sizeLimit =
      /^clamd: INSTREAM size limit exceeded\. ERROR$|closed the connection early \((EPIPE|ECONNRESET)\)/;
    const cases: [size: number, chunkSize: number][] = [
      [limit + 1, 64 * 1024],
      [limit + 1, limit + 1],
      // Larger, so that writes are still waiting for 'drain' when clamd gives up.
      [8 * 1024 * 1024, 64 * 1024],
    ];
    for (const [size, chunkSize] of cases) {
      await assert.rejects(
        scan(client, randomBytes(size), chunkSize),
        (error: unknown) => error instanceof ClamdUnavailableError && sizeLimit.test(error.message),
      );
    }
  });

  it('reports a zip entry that unpacks past MaxFileSize, never passes the rest unscanned', async () => {
    // clamd's zip reader cuts such an entry at MaxFileSize and scans only that much, without an
    // alert: EICAR after the cut came back clean. MaxFileSize above MaxScanSize makes the cut
    // entry trip MaxScanSize, which alerts.
    assert.ok(managed.limits.maxFileSize > managed.limits.maxScanSize);
    const MiB = 1024 * 1024;
    const past = deflateRepeated(Buffer.alloc(MiB), 32, undefined, eicar());
    const honest = zipArchive([{ name: 'zeros.bin', deflated: past }]);
    // The sizes in the headers are the packer's word only: clamd unpacks whatever is there.
    const lying = zipArchive([{ name: 'zeros.bin', deflated: { ...past, size: 1000 } }]);
    for (const archive of [honest, lying]) {
      assert.match(
        (await scan(client, archive)).signature ?? 'clean',
        /^Heuristics\.Limits\.Exceeded\.MaxScanSize$/,
      );
    }
    // Within the limits the entry is unpacked whole: EICAR at its end is found.
    const within = deflateRepeated(Buffer.alloc(MiB), 4, undefined, eicar());
    assert.equal(
      (await scan(client, zipArchive([{ name: 'zeros.bin', deflated: within }]))).signature,
      'Eicar-Test-Signature.UNOFFICIAL',
    );
  });

  it('refuses a stream over StreamMaxLength sent on a session, then scans on', async () => {
    const limit = managed.limits.streamMaxLength;
    // Sessions take streams this large here, so the one over clamd's limit goes on a session.
    const sessions = new ClamdClient(managed.address, { sessionMaxBytes: 2 * limit });
    try {
      // clamd's own reply, unless the broken pipe is noticed first (then the item was sent once
      // more on a connection of its own, with the same outcome).
      await assert.rejects(
        scan(sessions, randomBytes(limit + 1)),
        (error: unknown) =>
          error instanceof ClamdUnavailableError &&
          /^clamd: INSTREAM size limit exceeded\. ERROR$|closed the connection early \((EPIPE|ECONNRESET)\)/.test(
            error.message,
          ),
      );
      assert.equal((await scan(sessions, eicar())).signature, 'Eicar-Test-Signature.UNOFFICIAL');
    } finally {
      sessions.close();
    }
  });
});

describe('managed clamd start failures', () => {
  it('rejects clearly when clamd exits at once', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'assay-clamd-bad-'));
    try {
      const managed = new ManagedClamd({
        dataDir,
        clamdPath: '/bin/false',
        maxFileSize: 1024,
        logger: silent,
      });
      await assert.rejects(managed.start(), /clamd exited during start \(exit code 1\)/);
      assert.equal(managed.pid, undefined);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe("a data dir's managed clamd shared by two users in one process", {
  skip: findClamdBinary() === null ? 'clamd is not installed' : false,
}, () => {
  it("the second uses the first one's clamd and runs it once the first stops; a failed start leaves the lock", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'assay-clamd-shared-'));
    const options = {
      dataDir,
      clamdPath: findClamdBinary() ?? '',
      maxFileSize: 1024 * 1024,
      systemDatabaseDir: '',
      logger: silent,
    };
    const failing = new DataDirClamd({ ...options, clamdPath: '/bin/false' });
    const first = new DataDirClamd(options);
    const second = new DataDirClamd(options);
    try {
      await assert.rejects(failing.start(), /clamd exited during start/);
      await first.start();
      assert.ok(first.runsClamd && first.pid !== undefined, 'a failed start leaves the lock free');
      await second.start();
      assert.equal(second.runsClamd, false);
      assert.equal(second.pid, undefined);
      const client = new ClamdClient(second.address, { sessions: 0 });
      assert.equal((await scan(client, eicar())).signature, 'Eicar-Test-Signature.UNOFFICIAL');
      await first.stop();
      await waitFor('the second runs clamd', 30_000, async () => assert.ok(second.runsClamd));
      const verdict = await waitFor('clamd answers again', 60_000, () => scan(client, eicar()));
      assert.equal(verdict.signature, 'Eicar-Test-Signature.UNOFFICIAL');
      assert.ok(second.pid !== undefined);
    } finally {
      await first.stop();
      await second.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('a clamd still answering on the socket when the lock is taken (its runner killed) is shut down, and ours runs', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'assay-clamd-stray-'));
    const clamdPath = findClamdBinary() ?? '';
    const options = {
      dataDir,
      clamdPath,
      maxFileSize: 1024 * 1024,
      systemDatabaseDir: '',
      logger: silent,
    };
    const runner = new DataDirClamd(options);
    try {
      // Its folder, then a clamd on it that no process supervises.
      await runner.start();
      await runner.stop();
      const stray = spawn(clamdPath, ['-c', join(dataDir, 'clamd', 'clamd.conf')], {
        stdio: 'ignore',
      });
      const strayExit = once(stray, 'exit');
      const client = new ClamdClient(runner.address, { sessions: 0 });
      await waitFor('the stray clamd answers', 60_000, () => client.ping());
      await runner.start();
      assert.ok(runner.runsClamd && runner.pid !== stray.pid);
      const gone = await Promise.race([
        strayExit.then(() => true),
        // Unreferenced: the race won, it must not hold the file's process for 30 s.
        sleep(30_000, undefined, { ref: false }).then(() => false),
      ]);
      stray.kill('SIGKILL');
      assert.ok(gone, 'the stray clamd was asked to shut down');
      assert.equal((await scan(client, eicar())).signature, 'Eicar-Test-Signature.UNOFFICIAL');
    } finally {
      await runner.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
