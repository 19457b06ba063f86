import { connect, type Socket } from 'node:net';

/** A request written by hand on a socket: for clients that stall, trickle or half-send. */
export interface RawRequest {
  socket: Socket;
  /** What was written at once when the connection opened. */
  head: string | Buffer;
  /** Writes more of the request. */
  send(data: string | Buffer): void;
  /** Everything the server sent, once it closed the connection, and when it did. */
  closed: Promise<{ answer: string; at: number }>;
  /** Everything the server sent so far. */
  received(): string;
  /** The server's answer once its head and a body of `Content-Length` bytes have arrived. */
  answered(): Promise<string>;
}

/** Opens a connection to the service and writes `head` (and whatever else is given) at once. */
export function rawRequest(url: string, head: string | Buffer): RawRequest {
  const { port } = new URL(url);
  const socket = connect(Number(port), '127.0.0.1');
  let answer = '';
  const waiters: Array<() => void> = [];
  socket.on('data', (data) => {
    answer += data.toString('latin1');
    for (const wake of waiters.splice(0)) wake();
  });
  const closed = new Promise<{ answer: string; at: number }>((resolve) => {
    socket.on('close', () => {
      resolve({ answer, at: performance.now() });
      for (const wake of waiters.splice(0)) wake();
    });
  });
  socket.on('error', () => {}); // a reset is an outcome here; `closed` reports it
  socket.write(head);
  const complete = () => {
    const end = answer.indexOf('\r\n\r\n');
    if (end === -1) return false;
    const length = /\r\ncontent-length: *(\d+)/i.exec(answer.slice(0, end));
    return length === null || answer.length - end - 4 >= Number(length[1]);
  };
  return {
    socket,
    head,
    send(data) {
      socket.write(data);
    },
    closed,
    received: () => answer,
    async answered() {
      while (!complete()) {
        if (socket.destroyed) throw new Error(`connection closed; received: ${answer}`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
      return answer;
    },
  };
}

/** The head of a request with a body of `length` bytes. */
export function requestHead(
  method: string,
  path: string,
  headers: Record<string, string | number>,
): string {
  const lines = Object.entries({ host: 'assay.test', ...headers }).map(
    ([name, value]) => `${name}: ${value}\r\n`,
  );
  return `${method} ${path} HTTP/1.1\r\n${lines.join('')}\r\n`;
}

/** A multipart body with one `file` part, split where the file's content starts. */
export function multipartFile(
  content: Buffer,
  boundary = 'assay-test-boundary',
): { contentType: string; before: string; content: Buffer; after: string; length: number } {
  const before = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="upload.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const after = `\r\n--${boundary}--\r\n`;
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    before,
    content,
    after,
    length: Buffer.byteLength(before) + content.length + Buffer.byteLength(after),
  };
}
