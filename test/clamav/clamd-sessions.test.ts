import assert from 'node:assert/strict';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ClamdClient,
  type ClamdClientOptions,
  ClamdUnavailableError,
  type ClamdVerdict,
  parseClamdAddress,
} from '../../src/engines/clamav/clamd-client.js';
import { findClamdBinary } from '../../src/engines/clamav/managed-clamd.js';
import { eicar, LOCAL_TEST_FILE_MARKER } from '../../src/engines/test-content.js';
import { startSharedClamd } from '../helpers/service.js';
import { startTcpProxyTo, type TcpProxy } from '../helpers/tcp-proxy.js';

const EICAR = 'Eicar-Test-Signature.UNOFFICIAL';
const LOCAL = 'Local-Test-File.UNOFFICIAL';

async function scan(client: ClamdClient, data: Buffer, chunkSize = 64 * 1024) {
  const stream = client.instream();
  for (let at = 0; at < data.length; at += chunkSize) {
    await stream.write(data.subarray(at, at + chunkSize));
  }
  return stream.finish();
}

/** Random bytes with `marker` at a random place (or at the very end), generated at run time. */
function withMarker(size: number, marker: string, atEnd = false): Buffer {
  const data = randomBytes(size);
  const bytes = Buffer.from(marker, 'latin1');
  // Newlines around it: random bytes next to the string must not hide it.
  const framed = Buffer.concat([Buffer.from('\n'), bytes, Buffer.from('\n')]);
  const at = atEnd ? size - framed.length : randomInt(0, size - framed.length);
  framed.copy(data, at);
  return data;
}

async function runConcurrently(
  count: number,
  concurrency: number,
  work: (i: number) => Promise<void>,
) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) await work(i);
    }),
  );
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`${what} within ${timeoutMs} ms`);
    await sleep(20);
  }
}

const clamdPath = findClamdBinary();

describe('clamd sessions against a real clamd over TCP', {
  skip: clamdPath === null ? 'clamd is not installed' : false,
}, () => {
  let clamd: Awaited<ReturnType<typeof startSharedClamd>>;

  before(async () => {
    clamd = await startSharedClamd(16 * 1024 * 1024);
  });

  after(async () => {
    await clamd?.stop();
  });

  /** A proxy of its own to the shared clamd (to count and cut its connections), and a client through it. */
  async function clientThroughProxy(
    t: TestContext,
    options: ClamdClientOptions = {},
  ): Promise<{ client: ClamdClient; proxy: TcpProxy }> {
    const proxy = await startTcpProxyTo({ path: clamd.socket });
    const client = new ClamdClient(parseClamdAddress(`tcp://${proxy.address}`), options);
    t.after(async () => {
      client.close();
      await proxy.close();
    });
    return { client, proxy };
  }

  it('reuses one connection for consecutive small scans (a connection each without sessions)', async (t) => {
    const pooled = await clientThroughProxy(t);
    const plain = await clientThroughProxy(t, { sessions: 0 });
    for (const { client } of [pooled, plain]) {
      for (let i = 0; i < 20; i++) {
        const infected = i % 4 === 3;
        const data = infected ? withMarker(4096, eicar()) : randomBytes(4096);
        assert.equal((await scan(client, data)).signature, infected ? EICAR : null, `scan ${i}`);
      }
    }
    assert.equal(pooled.proxy.accepted, 1);
    assert.equal(plain.proxy.accepted, 20);
  });

  it('gives each of many concurrent scans its own verdict', async (t) => {
    const { client, proxy } = await clientThroughProxy(t, { sessions: 4 });
    const expected: (string | null)[] = [];
    const verdicts: (ClamdVerdict | Error)[] = [];
    const item = (i: number): Buffer => {
      // Two different signatures among clean items: a verdict given to the wrong item shows.
      const size = 1024 + randomInt(0, 16 * 1024);
      if (i % 5 === 0) {
        expected[i] = EICAR;
        return withMarker(size, eicar());
      }
      if (i % 7 === 0) {
        expected[i] = LOCAL;
        return withMarker(size, LOCAL_TEST_FILE_MARKER);
      }
      expected[i] = null;
      return randomBytes(size);
    };
    const work = (offset: number) => async (i: number) => {
      const at = offset + i;
      verdicts[at] = await scan(client, item(at), 4096).catch((error: Error) => error);
    };
    // As many scans at once as the pool holds: every one goes on a session.
    await runConcurrently(200, 4, work(0));
    assert.ok(proxy.accepted <= 4, `${proxy.accepted} connections for 200 scans`);
    // More at once than the pool holds: the others take connections of their own.
    await runConcurrently(200, 12, work(200));
    assert.ok(proxy.accepted < 400, `${proxy.accepted} connections for 400 scans`);
    const wrong = verdicts
      .map((verdict, i) => ({ i, verdict, expected: expected[i] }))
      .filter(
        ({ verdict, expected }) => verdict instanceof Error || verdict.signature !== expected,
      );
    assert.deepEqual(wrong, []);
  });

  it('a session cut mid-stream never gives a clean verdict', async (t) => {
    const { client, proxy } = await clientThroughProxy(t);
    assert.equal((await scan(client, randomBytes(4096))).signature, null);
    assert.equal(proxy.accepted, 1);
    // EICAR at the very end: the part clamd got before the cut is clean. Small enough to go on
    // a session (256 KiB by default).
    const data = withMarker(200 * 1024, eicar(), true);

    // Cut 64 KB into the stream, and refused afterwards: the scan fails.
    proxy.cutAfter(64 * 1024);
    await assert.rejects(scan(client, data), ClamdUnavailableError);
    proxy.restore();

    // Cut again, but clamd can be reached: the item goes once more, whole, on its own connection.
    assert.equal((await scan(client, randomBytes(4096))).signature, null);
    const before = proxy.accepted;
    proxy.cutAfter(64 * 1024, { refuse: false });
    assert.equal((await scan(client, data)).signature, EICAR);
    assert.equal(proxy.accepted, before + 1, 'one more connection: the retry');

    // A stream too large for a session, cut on its own connection: it fails too.
    const large = withMarker(3 * 1024 * 1024, eicar(), true);
    proxy.cutAfter(1024 * 1024, { refuse: false });
    await assert.rejects(scan(client, large), ClamdUnavailableError);
    assert.equal((await scan(client, large)).signature, EICAR);
  });

  it('does not use a session idle past its retirement', async (t) => {
    const { client, proxy } = await clientThroughProxy(t, { sessionIdleMs: 300 });
    await scan(client, randomBytes(4096));
    await scan(client, randomBytes(4096));
    assert.equal(proxy.accepted, 1);
    // Retired by its timer: closed, not kept open.
    await waitFor('the idle session is closed', () => proxy.open === 0);
    assert.equal((await scan(client, withMarker(4096, eicar()))).signature, EICAR);
    assert.equal(proxy.accepted, 2);
  });

  it('replaces a session after its command cap', async (t) => {
    const { client, proxy } = await clientThroughProxy(t, { sessionMaxCommands: 3 });
    for (let i = 0; i < 7; i++) await scan(client, randomBytes(4096));
    assert.equal(proxy.accepted, 3);
    await waitFor('the used-up sessions are closed', () => proxy.open === 1);
  });

  it('fails the item and drops the session when clamd goes away', async (t) => {
    const { client, proxy } = await clientThroughProxy(t);
    await scan(client, randomBytes(4096));
    proxy.cut();
    await waitFor('the session is closed', () => proxy.open === 0);
    await assert.rejects(scan(client, randomBytes(4096)), ClamdUnavailableError);
    proxy.restore();
    assert.equal((await scan(client, withMarker(4096, eicar()))).signature, EICAR);
  });
});

/** One request a scripted server has read whole: a command, with its stream for INSTREAM. */
interface ScriptedRequest {
  socket: Socket;
  /** Which connection, from 1. */
  connection: number;
  /** Inside IDSESSION: the command's number in its session, from 1; 0 outside a session. */
  id: number;
  command: string;
  content: Buffer;
}

/**
 * A fake clamd that parses `z` commands (IDSESSION, INSTREAM with its chunks, END) and hands each
 * whole request to `answer`, to script what real clamd rarely does.
 */
async function scriptedClamd(t: TestContext, answer: (request: ScriptedRequest) => void) {
  const dir = await mkdtemp(join(tmpdir(), 'assay-scripted-clamd-'));
  const path = join(dir, 'clamd.sock');
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const connection = ++connections;
    let buffer = Buffer.alloc(0);
    let session = false;
    let id = 0;
    socket.on('data', (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      for (;;) {
        const end = buffer.indexOf(0);
        if (end === -1) return;
        const command = buffer.toString('latin1', 1, end);
        if (command === 'IDSESSION') {
          session = true;
          buffer = buffer.subarray(end + 1);
          continue;
        }
        if (command === 'END') {
          socket.end();
          return;
        }
        let at = end + 1;
        const chunks: Buffer[] = [];
        if (command === 'INSTREAM') {
          for (;;) {
            if (buffer.length < at + 4) return;
            const length = buffer.readUInt32BE(at);
            if (buffer.length < at + 4 + length) return;
            chunks.push(buffer.subarray(at + 4, at + 4 + length));
            at += 4 + length;
            if (length === 0) break;
          }
        }
        buffer = buffer.subarray(at);
        id = session ? id + 1 : 0;
        answer({ socket, connection, id, command, content: Buffer.concat(chunks) });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });
  const client = (options: ClamdClientOptions = {}) => {
    const created = new ClamdClient(
      { kind: 'unix', path },
      { idleTimeoutMs: 500, verdictTimeoutMs: 1_000, ...options },
    );
    t.after(() => created.close());
    return created;
  };
  return {
    client,
    path,
    get connections() {
      return connections;
    },
  };
}

const hello = () => Buffer.from(`hello ${randomInt(1e9)}`);

describe('clamd sessions against a scripted server', () => {
  it('fails an item answered with another number, without a retry', async (t) => {
    const fake = await scriptedClamd(t, ({ socket, id }) =>
      socket.write(`${id + 1}: stream: OK\0`),
    );
    await assert.rejects(
      scan(fake.client(), hello()),
      /answered command 2 while command 1 was out/,
    );
    assert.equal(fake.connections, 1);
  });

  it('sends the item once more, on a connection of its own, when clamd ends the session instead of answering', async (t) => {
    const fake = await scriptedClamd(t, ({ socket, id }) => {
      if (id === 1) socket.write('1: stream: OK\0');
      else if (id === 2) socket.end('COMMAND READ TIMED OUT\n');
      else socket.end('stream: From-Plain-Connection FOUND\0');
    });
    const client = fake.client();
    assert.equal((await scan(client, hello())).signature, null);
    assert.equal((await scan(client, hello())).signature, 'From-Plain-Connection');
    assert.equal(fake.connections, 2);
    // The ended session is not used again.
    assert.equal((await scan(client, hello())).signature, null);
    assert.equal(fake.connections, 3);
  });

  it('retries a session reset before its reply once, and only once', async (t) => {
    const fake = await scriptedClamd(t, ({ socket }) => socket.destroy());
    await assert.rejects(scan(fake.client(), hello()), /closed the connection without a reply/);
    assert.equal(fake.connections, 2);
  });

  it('fails an item whose reply was cut short, without a retry', async (t) => {
    const fake = await scriptedClamd(t, ({ socket, id }) => {
      if (id > 0) socket.write(`${id}: stream: Eicar-Te`, () => socket.destroy());
      else socket.end('stream: OK\0');
    });
    await assert.rejects(scan(fake.client(), hello()), /closed the session without a reply/);
    assert.equal(fake.connections, 1);
  });

  it('fails an item answered with an error, and does not reuse that session', async (t) => {
    const fake = await scriptedClamd(t, ({ socket, id, content }) => {
      if (content.toString().startsWith('big'))
        socket.write(`${id}: INSTREAM size limit exceeded. ERROR\0`);
      else socket.write(`${id}: stream: OK\0`);
    });
    const client = fake.client();
    await assert.rejects(scan(client, Buffer.from('big')), {
      message: 'clamd: INSTREAM size limit exceeded. ERROR',
    });
    assert.equal((await scan(client, hello())).signature, null);
    assert.equal(fake.connections, 2);
  });

  it('drops a session on which clamd speaks unasked', async (t) => {
    const fake = await scriptedClamd(t, ({ socket, id }) => {
      socket.write(`${id}: stream: OK\0`);
      setTimeout(() => socket.write('COMMAND READ TIMED OUT\n'), 20);
    });
    const client = fake.client();
    await scan(client, hello());
    await sleep(100);
    await scan(client, hello());
    assert.equal(fake.connections, 2);
  });

  it('abort() during a session scan drops the session', async (t) => {
    let answer = false;
    const fake = await scriptedClamd(t, ({ socket, id }) => {
      if (answer) socket.write(`${id}: stream: OK\0`);
    });
    const client = fake.client();
    const stream = client.instream();
    await stream.write(hello());
    const verdict = stream.finish();
    await sleep(50);
    stream.abort();
    await assert.rejects(verdict, /aborted/);
    answer = true;
    assert.equal((await scan(client, hello())).signature, null);
    assert.equal(fake.connections, 2);
  });

  it('uses plain connections with a server that does not know IDSESSION', async (t) => {
    const fake = await scriptedClamd(t, ({ socket, id }) => {
      socket.end(id > 0 ? 'UNKNOWN COMMAND\0' : 'stream: OK\0');
    });
    const client = fake.client();
    assert.equal((await scan(client, hello())).signature, null);
    assert.equal(fake.connections, 2);
    // Sessions are paused: one connection per scan from here.
    assert.equal((await scan(client, hello())).signature, null);
    assert.equal(fake.connections, 3);
  });

  it('holds a small stream until finish(), so a missing socket shows there', async (t) => {
    const fake = await scriptedClamd(t, () => {});
    const stream = new ClamdClient({ kind: 'unix', path: `${fake.path}.missing` }).instream();
    await stream.write(Buffer.from('x'));
    await assert.rejects(stream.finish(), /does not exist/);
  });

  it('streams content larger than a session takes on a connection of its own', async (t) => {
    const fake = await scriptedClamd(t, ({ socket, id, content }) =>
      socket.end(`${id > 0 ? `${id}: ` : ''}stream: Size-${content.length} FOUND\0`),
    );
    const client = fake.client({ sessionMaxBytes: 1000 });
    assert.equal((await scan(client, randomBytes(1000), 300)).signature, 'Size-1000');
    assert.equal((await scan(client, randomBytes(1001), 300)).signature, 'Size-1001');
    assert.equal(fake.connections, 2);
  });
});
