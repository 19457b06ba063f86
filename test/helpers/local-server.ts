import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before } from 'node:test';
import { randomContent } from './content.js';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
  at: number;
}

export interface LocalServer {
  url: string;
  port: number;
  requests: ReceivedRequest[];
  /** Resolves once `count` requests have arrived (or rejects after `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1: a callback receiver or a host of content to fetch. */
export async function startLocalServer(
  handle: (request: ReceivedRequest, response: ServerResponse) => unknown,
): Promise<LocalServer> {
  const requests: ReceivedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const received: ReceivedRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      body: Buffer.concat(chunks),
      at: Date.now(),
    };
    requests.push(received);
    try {
      await handle(received, res);
    } catch {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
    for (const waiter of waiters.filter((w) => requests.length >= w.count)) waiter.resolve();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    waitFor(count, timeoutMs = 20_000) {
      if (requests.length >= count) return Promise.resolve(requests);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`only ${requests.length} of ${count} requests arrived`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(requests);
          },
        });
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A stand-in for remote servers, shared by a file's tests (started before them, closed after):
 * /never… accepts the request and never answers; any other path answers 1 KB. Read `url` inside
 * tests (it exists only once the file's `before` has run).
 */
export function useNeverAnsweringRemote(): {
  readonly url: string;
  /** How many requests the remote has received for paths starting with `prefix`. */
  requestsFor(prefix: string): number;
} {
  let remote: LocalServer | null = null;
  before(async () => {
    remote = await startLocalServer((request, response) => {
      if (request.url.startsWith('/never')) return new Promise(() => {});
      response.end(randomContent(1024));
    });
  });
  after(() => remote?.close());
  const started = (): LocalServer => {
    if (remote === null) throw new Error('the remote is not started yet');
    return remote;
  };
  return {
    get url() {
      return started().url;
    },
    requestsFor: (prefix) =>
      started().requests.filter((request) => request.url.startsWith(prefix)).length,
  };
}
