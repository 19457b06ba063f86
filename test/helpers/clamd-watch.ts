import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';

export interface ClamdWatch {
  /** The unix socket to give Assay as ASSAY_CLAMD. */
  socket: string;
  /** INSTREAM commands, on their own connection or in a session. */
  readonly streams: number;
  /** Verdicts clamd sent back (`stream: ... OK` or `FOUND`): content clamd actually scanned. */
  readonly verdicts: number;
  close(): Promise<void>;
}

/**
 * A relay in front of clamd's unix socket that counts what Assay asks of clamd, so a test can
 * tell content that was scanned from content that was not.
 */
export async function watchClamd(clamdSocket: string, dir: string): Promise<ClamdWatch> {
  const sockets = new Set<Socket>();
  let streams = 0;
  let verdicts = 0;
  const server = createServer((client) => {
    const upstream = connect(clamdSocket);
    // A connection runs one INSTREAM, or several in an IDSESSION (replies then numbered `N: `):
    // commands and replies are counted wherever they are in the bytes (the tests' contents never
    // hold these words).
    client.on('data', (data: Buffer) => {
      streams += data.toString('latin1').split('zINSTREAM\0').length - 1;
    });
    upstream.on('data', (data: Buffer) => {
      verdicts += data.toString('latin1').match(/(?:^|\0|\n)(?:\d+: )?stream: /g)?.length ?? 0;
    });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const socket = join(dir, 'watch.sock');
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    socket,
    get streams() {
      return streams;
    },
    get verdicts() {
      return verdicts;
    },
    close() {
      for (const open of sockets) open.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
