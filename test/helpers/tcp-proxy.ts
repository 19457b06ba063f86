import type { AddressInfo } from 'node:net';
import { connect, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  /** host:port the proxy listens on. */
  address: string;
  /** Connections accepted and forwarded so far. */
  readonly accepted: number;
  /** Client connections open now. */
  readonly open: number;
  /** Drops every connection and refuses new ones (they are reset at once), as a restart would. */
  cut(): void;
  /**
   * As cut(), but only the next `count` connections are refused; those after are forwarded: a
   * server back between a request's failure and the next.
   */
  refuseNext(count: number): void;
  /**
   * Cuts every connection (reset, both ways) once `bytes` more bytes have gone from clients to the
   * target: the target gets the first `bytes` of them, then nothing. New connections are refused
   * afterwards, as after cut(), unless `refuse` is false.
   */
  cutAfter(bytes: number, options?: { refuse?: boolean }): void;
  /**
   * The next client packet whose text matches `pattern` reaches the target, but nothing the target
   * answers on that connection is passed back: after `holdMs` the connection is reset both ways.
   * A statement that commits and loses its answer, as a dropped connection does. Resolves once done.
   */
  dropAnswerTo(pattern: RegExp, holdMs?: number): Promise<void>;
  /** Forwards new connections again. */
  restore(): void;
  close(): Promise<void>;
}

/** Where a proxy forwards: a TCP server, or a unix socket (to reach clamd over TCP). */
export type ProxyTarget = { host: string; port: number } | { path: string };

/** A TCP relay to `target` (host:port) that a test can cut, to take a server away and back. */
export function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  return startTcpProxyTo({ host: targetHost, port: targetPort });
}

/** A TCP relay to a TCP server or a unix socket, that a test can cut. */
export async function startTcpProxyTo(target: ProxyTarget): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const clients = new Set<Socket>();
  let open = true;
  let accepted = 0;
  // Connections still to refuse before forwarding again; undefined: until restore().
  let refusals: number | undefined;
  // Bytes still to forward before the armed cut; undefined when none is armed.
  let cutIn: number | undefined;
  let refuseAfterCut = true;
  // The armed answer drop: the pattern to wait for, and what to call once the connection is reset.
  let dropArmed: { pattern: RegExp; holdMs: number; done: () => void } | undefined;
  const cut = (refuse: boolean) => {
    cutIn = undefined;
    if (refuse) open = false;
    // A reset needs TCP; a unix socket to the target is just closed. So is a half-closed one: on
    // Node 24, resetAndDestroy() of a socket whose peer has ended leaks its handle, and the process
    // then spins at 100% CPU in its exit cleanup, never exiting (found when node heartbeats made
    // a background clamd command cross a cut).
    for (const socket of sockets) {
      if (socket.remoteFamily === undefined || socket.readyState !== 'open') socket.destroy();
      else socket.resetAndDestroy();
    }
  };
  const server = createServer((client) => {
    if (!open) {
      client.resetAndDestroy();
      if (refusals !== undefined && --refusals === 0) {
        refusals = undefined;
        open = true;
      }
      return;
    }
    accepted += 1;
    const upstream = 'path' in target ? connect(target.path) : connect(target.port, target.host);
    clients.add(client);
    client.on('close', () => clients.delete(client));
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (data: Buffer) => {
      if (dropArmed?.pattern.test(data.toString('latin1'))) {
        const { holdMs, done } = dropArmed;
        dropArmed = undefined;
        upstream.unpipe(client);
        upstream.on('data', () => {}); // read and thrown away
        upstream.write(data);
        setTimeout(() => {
          client.resetAndDestroy();
          upstream.resetAndDestroy();
          done();
        }, holdMs);
        return;
      }
      let forward = data;
      if (cutIn !== undefined) {
        if (data.length >= cutIn) {
          forward = data.subarray(0, cutIn);
          const refuse = refuseAfterCut;
          // The first part goes out before the reset.
          upstream.write(forward, () => cut(refuse));
          cutIn = undefined;
          client.pause();
          return;
        }
        cutIn -= data.length;
      }
      if (!upstream.write(forward)) client.pause();
    });
    upstream.on('drain', () => client.resume());
    client.on('end', () => upstream.end());
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    get open() {
      return clients.size;
    },
    cut() {
      refusals = undefined;
      cut(true);
    },
    refuseNext(count) {
      refusals = count;
      cut(true);
    },
    cutAfter(bytes, options = {}) {
      cutIn = bytes;
      refuseAfterCut = options.refuse ?? true;
    },
    restore() {
      refusals = undefined;
      open = true;
    },
    dropAnswerTo(pattern, holdMs = 300) {
      return new Promise((resolve) => {
        dropArmed = { pattern, holdMs, done: resolve };
      });
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
