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
  MemoryFileBudget,
  ScanFile,
} from '../../src/engines/clamav/descriptor-passing.js';
import { findClamdBinary } from '../../src/engines/clamav/managed-clamd.js';
import { eicar as eicarText } from '../../src/engines/test-content.js';
import { startSharedClamd } from '../helpers/service.js';

const eicar = () => Buffer.from(eicarText(), 'latin1');
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

  /** No memory files: past the hold, every item goes to disk. */
  const diskOnly = () => new MemoryFileBudget(0, 1);

  it('holds a small item, writes a large one as it arrives, and reads either back whole', () => {
    const passing = built();
    for (const size of [1, 100, 5 * KB, 300 * KB]) {
      const content = randomBytes(size);
      const file = new ScanFile(passing, dir, 64 * KB, diskOnly());
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
    const file = new ScanFile(passing, dir, 16 * KB, diskOnly());
    file.write(randomBytes(100 * KB));
    file.descriptor();
    assert.deepEqual(await readdir(dir), []);
    assert.equal((await openFilesIn(dir)).length, 1);
    file.close();
    assert.deepEqual(await openFilesIn(dir), []);
  });

  it('keeps what it took readable when the disk refuses a write', () => {
    const passing = built();
    const file = new ScanFile(passing, join(dir, 'missing'), 4 * KB, diskOnly());
    const first = randomBytes(3 * KB);
    const second = randomBytes(3 * KB);
    file.write(first);
    assert.throws(() => file.write(second), /could not make a file for clamd/);
    assert.deepEqual(Buffer.concat([...file.pieces()]), Buffer.concat([first, second]));
    file.close();
  });

  it('keeps items in memory files within the budget, and moves one that outgrows its share to disk', async () => {
    const passing = built();
    const budget = new MemoryFileBudget(100 * KB, 50 * KB);
    const write = (file: ScanFile, content: Buffer) => {
      for (let at = 0; at < content.length; at += 8 * KB) {
        file.write(content.subarray(at, at + 8 * KB));
      }
    };
    const [a, b, c] = [randomBytes(40 * KB), randomBytes(40 * KB), randomBytes(40 * KB)];
    const first = new ScanFile(passing, dir, 4 * KB, budget);
    const second = new ScanFile(passing, dir, 4 * KB, budget);
    const third = new ScanFile(passing, dir, 4 * KB, budget);
    write(first, a);
    write(second, b);
    // Two shares reserved: the third item past its hold goes to disk.
    assert.equal(budget.inUse, 100 * KB);
    write(third, c);
    assert.equal((await openFilesIn(dir)).length, 1);
    // The first outgrows its 50 KiB share: to disk, its share back for others.
    const more = randomBytes(30 * KB);
    write(first, more);
    assert.equal(budget.inUse, 50 * KB);
    assert.equal((await openFilesIn(dir)).length, 2);
    first.descriptor();
    assert.deepEqual(Buffer.concat([...first.pieces()]), Buffer.concat([a, more]));
    second.descriptor();
    assert.deepEqual(Buffer.concat([...second.pieces()]), b);
    for (const file of [first, second, third]) file.close();
    assert.equal(budget.inUse, 0);
    assert.deepEqual(await openFilesIn(dir), []);
  });
});

describe('items handed to the managed clamd as files (FILDES)', {
  skip: clamdPath === null ? 'clamd is not installed' : false,
}, () => {
  let dataDir: string;
  let filesDir: string;
  let managed: Awaited<ReturnType<typeof startSharedClamd>>;
  let client: ClamdClient;
  const refusals: string[] = [];

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'assay-clamd-files-'));
    filesDir = join(dataDir, 'clamd-files');
    await mkdir(filesDir);
    managed = await startSharedClamd(100 * 1024 * 1024);
    client = new ClamdClient(managed.clamd.address, {
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

  it('finds EICAR alone, at the end of 3 MiB (in a memory file) and of 20 MiB (on disk)', async () => {
    assert.equal(client.byDescriptor, true);
    assert.equal((await scan(client, eicar())).signature, 'Eicar-Test-Signature.UNOFFICIAL');
    const large = Buffer.concat([randomBytes(3 * 1024 * KB), eicar()]);
    assert.equal((await scan(client, large)).signature, 'Eicar-Test-Signature.UNOFFICIAL');
    assert.equal((await scan(client, randomBytes(3 * 1024 * KB))).signature, null);
    // Past its 16 MiB share of memory files: moved to disk on the way, EICAR still at its end.
    const huge = Buffer.concat([randomBytes(20 * 1024 * KB), eicar()]);
    assert.equal((await scan(client, huge)).signature, 'Eicar-Test-Signature.UNOFFICIAL');
    assert.deepEqual(refusals, []);
    // Each verdict came for a file, none by the fallback to a stream.
    assert.equal(client.filesScanned, 4);
    assert.equal(client.memoryFiles.inUse, 0);
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

  it('streams an item whose file on disk cannot be made, and still finds EICAR', async () => {
    const fallback = new ClamdClient(managed.clamd.address, {
      descriptorDir: join(dataDir, 'not-there'),
    });
    try {
      // Past its 16 MiB share of memory files the item would move to disk, which is not there:
      // it streams from its start, the memory file read back first.
      const large = Buffer.concat([randomBytes(17 * 1024 * KB), eicar()]);
      assert.equal((await scan(fallback, large)).signature, 'Eicar-Test-Signature.UNOFFICIAL');
      assert.equal((await scan(fallback, randomBytes(17 * 1024 * KB))).signature, null);
      assert.equal(fallback.filesScanned, 0);
      assert.equal(fallback.memoryFiles.inUse, 0);
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
    assert.equal(client.memoryFiles.inUse, 16 * 1024 * KB);
    stream.abort();
    assert.equal(client.memoryFiles.inUse, 0);
    await assert.rejects(stream.finish(), /aborted/);
  });
});
