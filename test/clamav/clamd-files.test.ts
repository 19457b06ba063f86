import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { createClamdClient } from '../../src/engine-setup.js';
import { ClamdClient, type ClamdVerdict } from '../../src/engines/clamav/clamd-client.js';
import {
  type DescriptorPassing,
  loadDescriptorPassing,
  ScanFile,
} from '../../src/engines/clamav/descriptor-passing.js';
import { findClamdBinary, ManagedClamd } from '../../src/engines/clamav/managed-clamd.js';
import { eicar as eicarText } from '../../src/engines/test-content.js';

const eicar = () => Buffer.from(eicarText(), 'latin1');
const silent = { info() {}, warn() {}, error() {}, debug() {} };
const clamdPath = findClamdBinary();
const KB = 1024;

async function scan(client: ClamdClient, data: Buffer, chunkSize = 64 * KB): Promise<ClamdVerdict> {
  const stream = client.instream();
  for (let at = 0; at < data.length; at += chunkSize) {
    await stream.write(data.subarray(at, at + chunkSize));
  }
  return stream.finish();
}

/** Open descriptors of this process that point at files in `dir` (deleted or not). */
async function openFilesIn(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target.startsWith(dir)) found.push(target);
  }
  return found;
}

describe('the native part that hands clamd files', () => {
  it('is built by npm ci (without it, items silently go as streams)', () => {
    const { error } = loadDescriptorPassing();
    assert.equal(error, null);
  });
});

function built(): DescriptorPassing {
  const { passing, error } = loadDescriptorPassing();
  if (passing === null) throw new Error(`the native part is not built: ${error}`);
  return passing;
}

describe('ASSAY_CLAMD_HANDOFF', () => {
  it('hands files to the managed clamd by default, streams to a clamd you run unless told', async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'assay-handoff-'));
    t.after(() => rm(dataDir, { recursive: true, force: true }));
    const socket = { kind: 'unix', path: join(dataDir, 'clamd.sock') } as const;
    const cases = [
      ['managed', undefined, true],
      ['managed', 'stream', false],
      [socket.path, undefined, false],
      [socket.path, 'file', true],
    ] as const;
    for (const [clamd, handoff, files] of cases) {
      const config = loadConfig({
        ASSAY_DATA_DIR: dataDir,
        ASSAY_CLAMD: clamd,
        ...(handoff === undefined ? {} : { ASSAY_CLAMD_HANDOFF: handoff }),
      });
      const client = await createClamdClient(config, socket, pino({ level: 'silent' }));
      assert.equal(client.byDescriptor, files, `${clamd}, ${handoff ?? 'auto'}`);
      client.close();
    }
    // Over TCP clamd cannot be handed a descriptor: streams whatever the setting says.
    const config = loadConfig({ ASSAY_DATA_DIR: dataDir, ASSAY_CLAMD_HANDOFF: 'file' });
    const tcp = { kind: 'tcp', host: '127.0.0.1', port: 3310 } as const;
    const client = await createClamdClient(config, tcp, pino({ level: 'silent' }));
    assert.equal(client.byDescriptor, false);
    client.close();
  });
});

describe('ScanFile', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'assay-scan-file-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('holds a small item, writes a large one as it arrives, and reads either back whole', () => {
    const passing = built();
    for (const size of [1, 100, 5 * KB, 300 * KB]) {
      const content = randomBytes(size);
      const file = new ScanFile(passing, dir, 64 * KB);
      for (let at = 0; at < size; at += 7 * KB) file.write(content.subarray(at, at + 7 * KB));
      assert.equal(file.length, size);
      const fd = file.descriptor();
      assert.ok(fd >= 0);
      assert.deepEqual(Buffer.concat([...file.pieces()]), content, `${size} bytes`);
      file.close();
    }
  });

  it('leaves no file behind, named or not', async () => {
    const passing = built();
    const file = new ScanFile(passing, dir, 16 * KB);
    file.write(randomBytes(100 * KB));
    file.descriptor();
    assert.deepEqual(await readdir(dir), []);
    assert.equal((await openFilesIn(dir)).length, 1);
    file.close();
    assert.deepEqual(await openFilesIn(dir), []);
  });

  it('keeps what it took readable when the disk refuses a write', () => {
    const passing = built();
    const file = new ScanFile(passing, join(dir, 'missing'), 4 * KB);
    const first = randomBytes(3 * KB);
    const second = randomBytes(3 * KB);
    file.write(first);
    assert.throws(() => file.write(second), /could not make a file for clamd/);
    assert.deepEqual(Buffer.concat([...file.pieces()]), Buffer.concat([first, second]));
    file.close();
  });
});

describe('items handed to the managed clamd as files (FILDES)', {
  skip: clamdPath === null ? 'clamd is not installed' : false,
}, () => {
  let dataDir: string;
  let filesDir: string;
  let managed: ManagedClamd;
  let client: ClamdClient;
  const refusals: string[] = [];

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'assay-clamd-files-'));
    filesDir = join(dataDir, 'clamd-files');
    await mkdir(filesDir);
    managed = new ManagedClamd({
      dataDir,
      clamdPath: clamdPath ?? '',
      maxFileSize: 100 * 1024 * 1024,
      logger: silent,
    });
    await managed.start();
    client = new ClamdClient(managed.address, {
      descriptorDir: filesDir,
      sessions: 2,
      onDescriptorsRefused: (reply) => refusals.push(reply),
    });
  });

  after(async () => {
    client?.close();
    await managed?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('finds EICAR alone (held, in a memory file) and at the end of 3 MiB (written to disk)', async () => {
    assert.equal(client.byDescriptor, true);
    assert.equal((await scan(client, eicar())).signature, 'Eicar-Test-Signature.UNOFFICIAL');
    const large = Buffer.concat([randomBytes(3 * 1024 * KB), eicar()]);
    assert.equal((await scan(client, large)).signature, 'Eicar-Test-Signature.UNOFFICIAL');
    assert.equal((await scan(client, randomBytes(3 * 1024 * KB))).signature, null);
    assert.deepEqual(refusals, []);
    // Each verdict came for a file, none by the fallback to a stream.
    assert.equal(client.filesScanned, 3);
    // Unnamed files: nothing in the folder, and nothing left open once the verdicts are in.
    assert.deepEqual(await readdir(filesDir), []);
    assert.deepEqual(await openFilesIn(filesDir), []);
  });

  it('answers more items at once than it has sessions, each with its own verdict', async () => {
    const items = Array.from({ length: 12 }, (_, index) =>
      index % 3 === 0 ? Buffer.concat([randomBytes(index * KB), eicar()]) : randomBytes(KB + index),
    );
    const verdicts = await Promise.all(items.map((item) => scan(client, item)));
    verdicts.forEach((verdict, index) => {
      assert.equal(verdict.signature, index % 3 === 0 ? 'Eicar-Test-Signature.UNOFFICIAL' : null);
    });
  });

  it('streams an item whose file cannot be made, and still finds EICAR', async () => {
    const fallback = new ClamdClient(managed.address, {
      descriptorDir: join(dataDir, 'not-there'),
    });
    try {
      const large = Buffer.concat([randomBytes(600 * KB), eicar()]);
      assert.equal((await scan(fallback, large)).signature, 'Eicar-Test-Signature.UNOFFICIAL');
      assert.equal((await scan(fallback, randomBytes(600 * KB))).signature, null);
      assert.equal(fallback.filesScanned, 0);
      // A failed disk is not clamd refusing files: the next small item still goes as a file.
      assert.equal(fallback.byDescriptor, true);
      assert.equal((await scan(fallback, eicar())).signature, 'Eicar-Test-Signature.UNOFFICIAL');
      assert.equal(fallback.filesScanned, 1);
    } finally {
      fallback.close();
    }
  });

  it('abandons an item cleanly: an abort closes its file', async () => {
    const stream = client.instream();
    await stream.write(randomBytes(400 * KB));
    assert.equal((await openFilesIn(filesDir)).length, 1);
    stream.abort();
    assert.deepEqual(await openFilesIn(filesDir), []);
    await assert.rejects(stream.finish(), /aborted/);
  });
});
