// @run-alone: it compares the times of inputs of growing size, which a loaded machine would skew
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ChunkedBody } from '../../src/icap/chunked-body.js';
import { parseIcapHead } from '../../src/icap/icap-request.js';
import { SocketReader } from '../../src/icap/socket-reader.js';
import { waitUntil } from '../helpers/client.js';
import { randomContent } from '../helpers/content.js';
import {
  buildIcapService,
  chunked,
  httpRequestHead,
  httpResponseHead,
  icapRequest,
  RawIcapConnection,
} from '../helpers/icap.js';
import { useSharedClamd } from '../helpers/service.js';

// What parses untrusted ICAP bytes, under hostile input: time linear in the input's size (each
// input bounded), no crash, no unbounded memory, a clear answer where the protocol has one.

const clamd = useSharedClamd();

/** Milliseconds `work` takes, the best of five (the machine is shared). */
async function timed(work: () => Promise<void>): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 5; round++) {
    const started = performance.now();
    await work();
    best = Math.min(best, performance.now() - started);
  }
  return best;
}

/** Feeds `data` to a SocketReader a few bytes at a time, as a trickling client would. */
function trickled(data: Buffer, piece: number): { reader: SocketReader; fed: Promise<void> } {
  const socket = new PassThrough();
  const reader = new SocketReader(socket);
  const fed = (async () => {
    for (let offset = 0; offset < data.length; offset += piece) {
      socket.write(data.subarray(offset, offset + piece));
      if (offset % (piece * 256) === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    socket.end();
  })();
  return { reader, fed };
}

/** Asserts that 16 times the input takes under 48 times as long (quadratic would take 256). */
function assertLinear(what: string, small: number, large: number): void {
  const ratio = large / Math.max(small, 0.5);
  assert.ok(
    ratio < 48,
    `${what}: 16x the input took ${ratio.toFixed(1)}x as long (${small.toFixed(1)} ms, ${large.toFixed(1)} ms)`,
  );
}

describe('ICAP parsing under hostile input', () => {
  test('a head trickled a byte at a time, and a body of one-byte chunks, take linear time', async () => {
    const head = (size: number) =>
      Buffer.from(`RESPMOD icap://h/avscan ICAP/1.0\r\nX-Pad: ${'a'.repeat(size)}\r\n\r\n`);
    const readHead = (size: number) => async () => {
      const { reader, fed } = trickled(head(size), 1);
      const read = await reader.readHead(64 * 1024, 5_000, 'too long');
      await fed;
      assert.equal(read?.length, head(size).length);
    };
    assertLinear('a trickled head', await timed(readHead(3_000)), await timed(readHead(48_000)));

    const tinyChunks = (count: number) => async () => {
      const { reader, fed } = trickled(chunked(Buffer.alloc(count, 0x61), 1), 7);
      const body = new ChunkedBody(reader, 5_000, false, async () => undefined);
      let bytes = 0;
      for (let piece = await body.read(); piece !== null; piece = await body.read()) {
        bytes += piece.length;
      }
      await fed;
      assert.equal(bytes, count);
    };
    assertLinear(
      'one-byte chunks',
      await timed(tinyChunks(2_500)),
      await timed(tinyChunks(40_000)),
    );

    const folded = (lines: number) => async () => {
      const text = `OPTIONS icap://h/avscan ICAP/1.0\r\nX-Folded: a\r\n${' b\r\n'.repeat(lines)}\r\n`;
      parseIcapHead(Buffer.from(text));
    };
    assertLinear('folded header lines', await timed(folded(750)), await timed(folded(12_000)));
  });

  test('random and broken requests never crash the listener, and it serves on', async (t) => {
    const svc = await buildIcapService(t, clamd.socket, { ASSAY_REQUEST_IDLE_TIMEOUT: '1' });
    const content = randomContent(3000);
    const valid = Buffer.concat([
      icapRequest('RESPMOD', 'avscan', {
        requestHead: httpRequestHead('http://files.example/a'),
        responseHead: httpResponseHead(content.length),
        body: true,
        headers: { Allow: '204', Preview: '1024' },
      }),
      chunked(content.subarray(0, 1024)),
      chunked(content.subarray(1024), 500),
    ]);
    const mutations: Buffer[] = [];
    for (let round = 0; round < 60; round++) {
      const mutated = Buffer.from(valid);
      const kind = round % 4;
      if (kind === 0) {
        // Flipped bytes anywhere: in the head, the offsets, the chunk sizes.
        for (let flip = 0; flip < 4; flip++) {
          mutated[Math.floor(Math.random() * mutated.length)] = Math.floor(Math.random() * 256);
        }
        mutations.push(mutated);
      } else if (kind === 1) {
        // Cut short anywhere: the client then half-closes.
        mutations.push(mutated.subarray(0, Math.floor(Math.random() * mutated.length)));
      } else if (kind === 2) {
        mutations.push(randomBytes(1 + Math.floor(Math.random() * 4000)));
      } else {
        // A valid head, then garbage where the body should be.
        mutations.push(Buffer.concat([mutated.subarray(0, 300), randomBytes(2000)]));
      }
    }
    const before = process.memoryUsage().rss;
    await Promise.all(
      mutations.map(async (request) => {
        const connection = new RawIcapConnection(svc.icapPort);
        connection.write(request);
        connection.socket.end();
        // Answered, or closed: within the idle timeout either way.
        await Promise.race([connection.closedByServer(), sleep(10_000, undefined, { ref: false })]);
        assert.ok(connection.isClosed, 'the listener ends what it cannot serve');
        connection.close();
      }),
    );
    const grown = process.memoryUsage().rss - before;
    assert.ok(grown < 200 * 1024 * 1024, `memory grew by ${grown} bytes`);
    // A client that half-closes sees the connection end at once (the server's side ends with the
    // client's), while the scan of what it sent may still run for a moment: its slot comes back
    // when it ends. Slots that never came back would keep this busy.
    let answer = '';
    await waitUntil(
      'a valid request served after the broken ones',
      async () => {
        const still = new RawIcapConnection(svc.icapPort);
        try {
          still.write(valid);
          const first = await still.response();
          answer = `${first.status} ${first.headers.get('x-assay-error') ?? ''}`;
          return first.status === 100 && (await still.response()).status === 204;
        } finally {
          still.close();
        }
      },
      5_000,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: last answer ${answer}`);
    });
  });

  test('a slow sender is answered 408 once it sends nothing for the idle time, and a half-closed request is dropped', async (t) => {
    const svc = await buildIcapService(t, clamd.socket, { ASSAY_REQUEST_IDLE_TIMEOUT: '1' });
    const slow = new RawIcapConnection(svc.icapPort);
    t.after(() => slow.close());
    const content = randomContent(5000);
    slow.write(
      icapRequest('RESPMOD', 'avscan', {
        responseHead: httpResponseHead(content.length),
        body: true,
        headers: { Allow: '204' },
      }),
    );
    slow.write(chunked(content.subarray(0, 100)).subarray(0, 50));
    const answer = await slow.response();
    assert.equal(answer.status, 408);
    await slow.closedByServer();

    const halfClosed = new RawIcapConnection(svc.icapPort);
    t.after(() => halfClosed.close());
    halfClosed.write(
      Buffer.concat([
        icapRequest('RESPMOD', 'avscan', {
          responseHead: httpResponseHead(content.length),
          body: true,
        }),
        chunked(content).subarray(0, 2000),
      ]),
    );
    halfClosed.socket.end();
    await halfClosed.closedByServer();
    assert.equal(halfClosed.isClosed, true);
  });
});
