import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** Connections that send nothing, opened from `localAddress` (any of 127.0.0.0/8 on Linux). */
export interface IdleFlood {
  sockets: Socket[];
  /** How many are still open (the server has not closed them). */
  open(): number;
  /** Resolves once every connection was established or failed. */
  settled: Promise<void>;
  close(): void;
}

/**
 * Opened in batches, each once the last is connected and the server had a moment to accept it:
 * a burst beyond the listen backlog would leave connections the client thinks open but the
 * server has not accepted for a second or more (the kernel retransmits the handshake).
 */
export function idleConnections(
  url: string,
  localAddresses: string[],
  perAddress: number,
  batch = 50,
): IdleFlood {
  const port = Number(new URL(url).port);
  const sockets: Socket[] = [];
  let closed = 0;
  const open = (localAddress: string) =>
    new Promise<void>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1', localAddress });
      socket.on('error', () => {}); // a reset is the server refusing it: counted by 'close'
      socket.once('connect', () => resolve());
      socket.once('close', () => {
        closed += 1;
        resolve();
      });
      sockets.push(socket);
    });
  const wanted = localAddresses.flatMap((address) => Array<string>(perAddress).fill(address));
  const settled = (async () => {
    for (let i = 0; i < wanted.length; i += batch) {
      await Promise.all(wanted.slice(i, i + batch).map(open));
      await sleep(5);
    }
  })();
  return {
    sockets,
    open: () => sockets.length - closed,
    settled,
    close() {
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** `127.0.0.<first>` … one address per entry: other clients than the test's 127.0.0.1. */
export function loopbackAddresses(count: number, first = 2): string[] {
  return Array.from(
    { length: count },
    (_, i) => `127.0.${Math.floor((first + i) / 256)}.${(first + i) % 256}`,
  );
}
