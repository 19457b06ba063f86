import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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
