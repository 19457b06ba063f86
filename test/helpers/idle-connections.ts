import { connect, type Socket } from 'node:net';

/** Connections that send nothing, opened from `localAddress` (any of 127.0.0.0/8 on Linux). */
export interface IdleFlood {
  sockets: Socket[];
  /** How many are still open (the server has not closed them). */
  open(): number;
  /** Resolves once every connection was established or failed. */
  settled: Promise<void>;
  close(): void;
}

export function idleConnections(
  url: string,
  localAddresses: string[],
  perAddress: number,
): IdleFlood {
  const port = Number(new URL(url).port);
  const sockets: Socket[] = [];
  const waits: Promise<void>[] = [];
  let closed = 0;
  for (const localAddress of localAddresses) {
    for (let i = 0; i < perAddress; i++) {
      const socket = connect({ port, host: '127.0.0.1', localAddress });
      socket.on('error', () => {}); // a reset is the server refusing it: counted by 'close'
      socket.once('close', () => {
        closed += 1;
      });
      waits.push(
        new Promise<void>((resolve) => {
          socket.once('connect', () => resolve());
          socket.once('close', () => resolve());
        }),
      );
      sockets.push(socket);
    }
  }
  return {
    sockets,
    open: () => sockets.length - closed,
    settled: Promise.all(waits).then(() => undefined),
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
