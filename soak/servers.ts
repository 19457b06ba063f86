/**
 * The soak's outside world on loopback: a callback receiver that fails one delivery in ten and
 * hangs one in fifty (Assay must retry, never duplicate), and a content host for fetches, some
 * of its answers slow, some missing.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eicar } from '../src/engines/test-content.js';

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server): void {
  server.closeAllConnections();
  server.close();
}

export interface Receiver {
  url: string;
  /** Per item id, the delivery ids its requests came with, failed ones too (one expected). */
  deliveries: Map<string, Set<string>>;
  /** Items whose callback this receiver took (answered 200). */
  delivered: Set<string>;
  requests: number;
  /** When set, every delivery hangs (chaos: a receiver that stopped answering). */
  hang: boolean;
  close(): void;
}

export async function startReceiver(): Promise<Receiver> {
  let n = 0;
  const receiver: Receiver = {
    url: '',
    deliveries: new Map(),
    delivered: new Set(),
    requests: 0,
    hang: false,
    close: () => close(server),
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      receiver.requests += 1;
      n += 1;
      let id = '';
      try {
        ({ id } = JSON.parse(Buffer.concat(chunks).toString()) as { id: string });
        const ids = receiver.deliveries.get(id) ?? new Set<string>();
        ids.add(String(request.headers['x-assay-delivery']));
        receiver.deliveries.set(id, ids);
      } catch {
        // not a result
      }
      if (receiver.hang || n % 50 === 0) return; // never answers: Assay's timeout ends it
      if (n % 10 === 0) {
        response.writeHead(500).end();
        return;
      }
      if (id !== '') receiver.delivered.add(id);
      response.end();
    });
  });
  receiver.url = await listen(server);
  return receiver;
}

/** `/clean/N`, `/eicar/N`, `/slow/N` (trickles 64 KB over 3 s), anything else 404. */
export async function startContentHost(): Promise<{ url: string; close(): void }> {
  const server = createServer((request, response) => {
    const [, kind] = (request.url ?? '').split('/');
    if (kind === 'clean') {
      response.end(Buffer.alloc(10_000, `clean ${request.url}`));
    } else if (kind === 'eicar') {
      response.end(eicar());
    } else if (kind === 'slow') {
      let sent = 0;
      const timer = setInterval(() => {
        response.write(Buffer.alloc(4096, 'slow'));
        sent += 1;
        if (sent === 16) {
          clearInterval(timer);
          response.end();
        }
      }, 200);
      response.on('close', () => clearInterval(timer));
    } else {
      response.writeHead(404).end('no such content');
    }
  });
  const url = await listen(server);
  return { url, close: () => close(server) };
}
