import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { DeleteObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import {
  SpooledContentError,
  SpoolTooLargeError,
  SpoolUnavailableError,
} from '../../src/domain/failures.js';
import type { ContentSpool } from '../../src/spool/content-spool.js';
import { openSpool } from '../../src/spool/open-spool.js';
import {
  S3_PART_SIZE,
  S3Spool,
  S3SpoolError,
  type S3SpoolOptions,
} from '../../src/spool/s3-spool.js';
import { guardRefused, guardSeen } from '../helpers/loopback-only.js';
import { type S3TestServer, startS3Server } from '../helpers/s3-server.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const MiB = 1024 * 1024;
const PREFIX = 'assay/spool';

/** `bytes` of random content in 64 KiB chunks, made as it is read; `hash()` once it is done. */
function randomSource(bytes: number, onChunk: (produced: number) => void = () => {}) {
  const digest = createHash('sha256');
  let produced = 0;
  return {
    async *chunks(): AsyncGenerator<Buffer> {
      while (produced < bytes) {
        const chunk = randomBytes(Math.min(64 * 1024, bytes - produced));
        digest.update(chunk);
        produced += chunk.length;
        onChunk(produced);
        yield chunk;
      }
    },
    hash: () => digest.digest('hex'),
  };
}

async function hashOf(stream: Readable): Promise<{ hash: string; size: number }> {
  const digest = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    digest.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { hash: digest.digest('hex'), size };
}

/**
 * A spool failure as clients see it (`Outer`: no bucket, prefix or key in its message) with S3's
 * detail in its cause, for the log: the check for assert.rejects.
 */
function wrapping(
  Outer: typeof SpoolUnavailableError | typeof SpooledContentError,
  detail: RegExp,
): (error: unknown) => true {
  return (error) => {
    assert.ok(error instanceof Outer, String(error));
    assert.doesNotMatch(error.message, new RegExp(`assay-spool|${PREFIX}`));
    assert.ok(error.cause instanceof S3SpoolError, String(error.cause));
    assert.match(error.cause.message, detail);
    return true;
  };
}

/** An id as the job store makes them: 32 hex digits. */
const newKey = (): string => randomBytes(16).toString('hex');

function spoolOn(server: S3TestServer, options: Partial<S3SpoolOptions> = {}): S3Spool {
  return new S3Spool({
    bucket: server.bucket,
    prefix: PREFIX,
    endpoint: server.endpoint,
    region: 'us-east-1',
    ...options,
  });
}

describe('S3 spool against a local S3-compatible server', () => {
  let server: S3TestServer;
  let spool: S3Spool;

  before(async () => {
    server = await startS3Server();
    spool = spoolOn(server);
    await spool.init();
  });
  after(async () => {
    spool.close();
    await server.stop();
  });

  test('20 MB streams in and out intact, in parts, without the whole content in memory', async () => {
    assert.ok(S3_PART_SIZE <= 8 * MiB, 'parts of at most 8 MiB');
    // One part in flight at a time: the source may run ahead of what the server has stored by
    // at most the part being sent and the one being filled.
    const partSize = 5 * MiB;
    const bounded = spoolOn(server, { partSize, queueSize: 1 });
    const storedBefore = server.storedBytes();
    let lead = 0;
    const source = randomSource(20_000_000, (produced) => {
      lead = Math.max(lead, produced - (server.storedBytes() - storedBefore));
    });
    const key = newKey();
    const written = await bounded.write(key, source.chunks(), 100 * MiB);
    assert.deepEqual(written, { key, size: 20_000_000 });
    assert.ok(lead <= 2 * partSize + MiB, `the source ran ${lead} bytes ahead of the server`);
    assert.ok(server.storedBytes() - storedBefore >= 20_000_000);
    assert.deepEqual(await server.keys(), [`${PREFIX}/${key}`]);
    assert.deepEqual(await hashOf(bounded.read(key)), { hash: source.hash(), size: 20_000_000 });
    await bounded.remove(key);
    bounded.close();
  });

  test('with the default part size and queue, 20 MB round-trips intact', async () => {
    const source = randomSource(20_000_000);
    const key = newKey();
    assert.deepEqual(await spool.write(key, source.chunks(), 100 * MiB), {
      key,
      size: 20_000_000,
    });
    assert.deepEqual(await hashOf(spool.read(key)), { hash: source.hash(), size: 20_000_000 });
    await spool.remove(key);
  });

  test('small and empty content is one PUT, read back the same', async () => {
    const key = newKey();
    assert.deepEqual(await spool.write(key, (async function* () {})(), 10), { key, size: 0 });
    assert.deepEqual((await hashOf(spool.read(key))).size, 0);
    const small = newKey();
    const content = Buffer.from('EICAR-free little file');
    await spool.write(
      small,
      (async function* () {
        yield content;
      })(),
      1000,
    );
    assert.equal(
      (await hashOf(spool.read(small))).hash,
      createHash('sha256').update(content).digest('hex'),
    );
    await spool.remove(key);
    await spool.remove(small);
  });

  test('past maxBytes: SpoolTooLargeError, no object and no open multipart upload', async () => {
    // 12 MiB allowed: the first 8 MiB part is already uploaded when the limit is passed.
    const key = newKey();
    await assert.rejects(
      spool.write(key, randomSource(20 * MiB).chunks(), 12 * MiB),
      SpoolTooLargeError,
    );
    // Within the first part: nothing was sent at all.
    await assert.rejects(
      spool.write(newKey(), randomSource(2000).chunks(), 1000),
      SpoolTooLargeError,
    );
    assert.deepEqual(await server.keys(), []);
    assert.equal(await server.hasOpenUploads(), false);
  });

  test('a source that fails mid-upload: its error, no object and no open multipart upload', async () => {
    const gone = new Error('client went away');
    async function* failing(): AsyncGenerator<Buffer> {
      yield* randomSource(18 * MiB).chunks();
      throw gone;
    }
    await assert.rejects(spool.write(newKey(), failing(), 100 * MiB), (error) => error === gone);
    assert.deepEqual(await server.keys(), []);
    assert.equal(await server.hasOpenUploads(), false);
  });

  test("S3 failing mid-upload: the spool does not answer (S3's error in the cause), no object, no open upload", async () => {
    // Every second part fails (retries included); the first part and the abort go through.
    server.failRequests((method, url) => method === 'PUT' && /[?&]partNumber=2(&|$)/.test(url));
    const key = newKey();
    try {
      await assert.rejects(
        spool.write(key, randomSource(20 * MiB).chunks(), 100 * MiB),
        wrapping(
          SpoolUnavailableError,
          new RegExp(`writing ${PREFIX}/${key} failed: InternalError \\(HTTP 500\\): injected`),
        ),
      );
    } finally {
      server.failRequests(null);
    }
    assert.equal(server.injected(), 3, 'tried 3 times');
    assert.deepEqual(await server.keys(), []);
    assert.equal(await server.hasOpenUploads(), false);
  });

  test('remove is idempotent', async () => {
    const key = newKey();
    await spool.write(key, randomSource(1000).chunks(), 10_000);
    await spool.remove(key);
    await spool.remove(key);
    await spool.remove(newKey());
    assert.deepEqual(await server.keys(), []);
  });

  test("a missing key: the stream errors with the item's failure, its cause naming the key, with ENOENT", async () => {
    const key = newKey();
    await assert.rejects(hashOf(spool.read(key)), (error) => {
      wrapping(SpooledContentError, new RegExp(`${PREFIX}/${key}.*NoSuchKey`))(error);
      assert.equal((error as SpooledContentError).missing, true);
      assert.equal(((error as Error).cause as S3SpoolError).code, 'ENOENT');
      return true;
    });
  });

  test("a read S3 fails while the bucket answers: the item's failure, not an outage", async () => {
    const key = newKey();
    await spool.write(key, randomSource(1000).chunks(), 10_000);
    server.failRequests((method, url) => method === 'GET' && url.includes(key));
    try {
      await assert.rejects(hashOf(spool.read(key)), (error) => {
        wrapping(SpooledContentError, /InternalError \(HTTP 500\)/)(error);
        assert.equal((error as SpooledContentError).missing, false);
        return true;
      });
    } finally {
      server.failRequests(null);
      await spool.remove(key);
    }
    await spool.check();
  });

  test('a read S3 never answered, the bucket back before the check: the outage, never the item', async (t) => {
    const proxy = await startTcpProxy('127.0.0.1', Number(new URL(server.endpoint).port));
    const proxied = spoolOn(server, { endpoint: `http://${proxy.address}`, maxAttempts: 1 });
    t.after(async () => {
      proxied.close();
      await proxy.close();
    });
    const key = newKey();
    t.after(() => spool.remove(key));
    await spool.write(key, randomSource(1000).chunks(), 10_000);
    // The read's connection (the proxied spool's first) is refused; any after goes through, so a
    // check made after the failure passes.
    proxy.refuseNext(1);
    await assert.rejects(hashOf(proxied.read(key)), wrapping(SpoolUnavailableError, /ECONNRESET/));
    await proxied.check();
    assert.deepEqual(await hashOf(proxied.read(key)), await hashOf(spool.read(key)));
  });

  test('removeOrphans: only unreferenced spool keys older than the grace, across pages', async () => {
    const keys = [newKey(), newKey(), newKey(), newKey(), newKey()];
    for (const key of keys) await spool.write(key, randomSource(100).chunks(), 1000);
    // Not spool keys: left alone whatever their age.
    await server.client.send(
      new PutObjectCommand({ Bucket: server.bucket, Key: `${PREFIX}/notes.txt`, Body: 'x' }),
    );
    const paged = spoolOn(server, { listPageSize: 2 });
    const referenced = new Set([keys[1], keys[3]]);
    const asked: string[] = [];
    const isReferenced = async (key: string): Promise<boolean> => {
      asked.push(key);
      return referenced.has(key);
    };
    assert.deepEqual(await paged.removeOrphans(3_600_000, isReferenced), { files: 0, bytes: 0 });
    assert.deepEqual(asked, [], 'young objects are not even looked up');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(await paged.removeOrphans(0, isReferenced), { files: 3, bytes: 300 });
    assert.deepEqual(asked.sort(), [...keys].sort());
    assert.deepEqual(
      (await server.keys()).sort(),
      [`${PREFIX}/${keys[1]}`, `${PREFIX}/${keys[3]}`, `${PREFIX}/notes.txt`].sort(),
    );
    paged.close();
    for (const key of keys) await spool.remove(key);
    await server.client.send(
      new DeleteObjectCommand({ Bucket: server.bucket, Key: `${PREFIX}/notes.txt` }),
    );
  });

  test('object storage has room', async () => {
    assert.equal(await spool.diskFull(1), false);
    assert.equal(await spool.hasRoom(Number.MAX_SAFE_INTEGER), true);
    spool.noteDiskFull();
    assert.equal(await spool.diskFull(1), false);
  });

  test('describe names the bucket, prefix and endpoint, and no credential', () => {
    assert.equal(spool.describe, `s3://${server.bucket}/${PREFIX} at ${server.endpoint}`);
    assert.doesNotMatch(spool.describe, /assay-test/);
  });
});

describe('S3 spool failures are clear and bounded', () => {
  test('a missing bucket fails init, naming it', async () => {
    const server = await startS3Server();
    const spool = new S3Spool({
      bucket: 'no-such-bucket',
      prefix: '',
      endpoint: server.endpoint,
      region: 'us-east-1',
    });
    try {
      await assert.rejects(
        spool.init(),
        /S3 spool s3:\/\/no-such-bucket .*checking bucket no-such-bucket failed/,
      );
    } finally {
      spool.close();
      await server.stop();
    }
  });

  test('the detector of open multipart uploads sees one', async () => {
    const server = await startS3Server();
    try {
      await server.openUpload(`${PREFIX}/${newKey()}`);
      assert.equal(await server.hasOpenUploads(), true);
    } finally {
      await server.stop();
    }
  });

  test('a server that is down: write, read, remove and check do not answer (the cause in theirs), init fails naming it, quickly', async () => {
    const server = await startS3Server();
    const endpoint = server.endpoint;
    await server.stop();
    const spool = new S3Spool({
      bucket: 'assay-spool',
      prefix: PREFIX,
      endpoint,
      region: 'us-east-1',
      maxAttempts: 2,
    });
    const refused = /S3 spool s3:\/\/assay-spool\/assay\/spool .*failed: .*ECONNREFUSED/;
    const started = Date.now();
    try {
      const out = wrapping(SpoolUnavailableError, refused);
      await assert.rejects(spool.write(newKey(), randomSource(1000).chunks(), 10_000), out);
      await assert.rejects(spool.write(newKey(), randomSource(12 * MiB).chunks(), 20 * MiB), out);
      await assert.rejects(hashOf(spool.read(newKey())), out);
      await assert.rejects(spool.remove(newKey()), out);
      await assert.rejects(spool.check(), SpoolUnavailableError);
      await assert.rejects(spool.init(), refused);
      await assert.rejects(
        spool.removeOrphans(0, async () => false),
        refused,
      );
    } finally {
      spool.close();
    }
    assert.ok(Date.now() - started < 30_000, `took ${Date.now() - started} ms`);
  });

  test('a server that accepts and never answers: a timeout error, not a hang', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const address = silent.address();
    assert.ok(address !== null && typeof address === 'object');
    const spool = new S3Spool({
      bucket: 'assay-spool',
      prefix: PREFIX,
      endpoint: `http://127.0.0.1:${address.port}`,
      region: 'us-east-1',
      maxAttempts: 2,
      idleTimeoutMs: 500,
    });
    const started = Date.now();
    try {
      await assert.rejects(
        spool.write(newKey(), randomSource(1000).chunks(), 10_000),
        wrapping(
          SpoolUnavailableError,
          /S3 spool .*writing assay\/spool\/[0-9a-f]{32} failed: .*time/i,
        ),
      );
      await assert.rejects(
        hashOf(spool.read(newKey())),
        wrapping(SpoolUnavailableError, /S3 spool .*reading .* failed: .*time/i),
      );
    } finally {
      spool.close();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
    assert.ok(Date.now() - started < 30_000, `took ${Date.now() - started} ms`);
  });
});

describe('openSpool', () => {
  const local = (dir: string): ContentSpool => ({ describe: dir }) as unknown as ContentSpool;

  test('a directory unless ASSAY_SPOOL_URL names a bucket', async () => {
    const base = { dataDir: '/var/lib/assay', spoolDir: '', spoolUrl: '', s3Endpoint: '' };
    assert.equal((await openSpool(base, local)).describe, '/var/lib/assay/spool');
    assert.equal(
      (await openSpool({ ...base, spoolDir: '/mnt/shared/spool' }, local)).describe,
      '/mnt/shared/spool',
    );
    const s3 = await openSpool(
      { ...base, spoolUrl: 's3://bucket-a/x/y/', s3Endpoint: 'http://127.0.0.1:9' },
      local,
    );
    assert.ok(s3 instanceof S3Spool);
    assert.equal(s3.describe, 's3://bucket-a/x/y at http://127.0.0.1:9');
    s3.close();
    const aws = await openSpool({ ...base, spoolUrl: 's3://bucket-a' }, local);
    assert.equal(aws.describe, 's3://bucket-a');
    (aws as S3Spool).close();
  });
});

test('the SDK reached only the loopback servers: no metadata service, no DNS', () => {
  assert.deepEqual(guardRefused, []);
  assert.ok(guardSeen.length > 0);
  for (const destination of guardSeen) assert.match(destination, /^127\.0\.0\.1:\d+$/);
});
