import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * One HTTP exchange over node:http(s), for `assay scan`. Not the global fetch: Node 24's fetch
 * (undici 7.29) tees a streamed request body to be able to follow redirects and keeps every chunk
 * of the branch it never reads (nodejs/undici#4058), so a 1 GB upload held 1 GB of memory; here
 * the body is piped to the socket with backpressure, and memory stays flat.
 */

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface HttpExchange {
  method: 'GET' | 'POST';
  url: URL;
  headers: Record<string, string>;
  /** The request body, read as the socket takes it. */
  body?: AsyncIterable<Uint8Array>;
  /** Milliseconds the connection may be silent (no bytes either way). */
  idleMs: number;
  /**
   * Milliseconds the whole exchange may take, from the request to the answer's last byte: a
   * server that trickles a byte now and then would otherwise keep an idle timer from ever firing.
   */
  limitMs: number;
}

/** A network failure: the server could not be reached, or the connection broke. */
export class NetworkError extends Error {}

/** The exchange took too long, or was silent too long. */
export class TimeoutError extends NetworkError {}

/** Answers are results and error messages: larger ones are not what this client expects. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

export class HttpClient {
  // Connections kept open between files: one TLS handshake per connection, not per file.
  private readonly agents = {
    'http:': new HttpAgent({ keepAlive: true }),
    'https:': new HttpsAgent({ keepAlive: true }),
  };

  send(exchange: HttpExchange): Promise<HttpAnswer> {
    const { url } = exchange;
    const secure = url.protocol === 'https:';
    const request = (secure ? httpsRequest : httpRequest)(url, {
      method: exchange.method,
      headers: exchange.headers,
      agent: secure ? this.agents['https:'] : this.agents['http:'],
    });
    let bodyError: unknown = null;
    let fail: (error: Error) => void = () => undefined;
    const answer = new Promise<HttpAnswer>((resolve, reject) => {
      fail = (error) => {
        reject(error);
        request.destroy(error);
      };
      request.on('error', (error) => reject(bodyError ?? error));
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) {
            response.destroy(new NetworkError(`an answer over ${MAX_ANSWER_BYTES} bytes`));
          } else chunks.push(chunk);
        });
        response.on('error', reject);
        response.on('end', () => {
          // An answer before the whole body was sent (a 413, a 401): the rest is not wanted,
          // and the connection is not reusable.
          if (!request.writableFinished) request.destroy();
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          });
        });
      });
    });
    if (exchange.body === undefined) request.end();
    else {
      pipeline(Readable.from(exchange.body, { objectMode: false }), request).catch(
        (error: unknown) => {
          // The body's own failure (the file) is the reason, not the socket's end it caused.
          bodyError ??= error;
        },
      );
    }
    request.setTimeout(exchange.idleMs, () =>
      fail(new TimeoutError(`nothing sent or received for ${seconds(exchange.idleMs)}`)),
    );
    const limit = setTimeout(
      () => fail(new TimeoutError(`no complete answer within ${seconds(exchange.limitMs)}`)),
      exchange.limitMs,
    );
    return answer.finally(() => clearTimeout(limit));
  }

  /** Closes the kept connections, so that the process can end at once. */
  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}
