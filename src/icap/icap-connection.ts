import type { Duplex } from 'node:stream';
import type { IcapOutcome } from '../metrics/icap-metrics.js';
import type { IcapContext } from './icap-context.js';
import {
  type IcapRequest,
  MAX_ICAP_HEAD,
  parseEncapsulated,
  parseIcapHead,
  parsePreview,
  serviceOf,
  splitHeads,
} from './icap-request.js';
import { type HeaderList, headerValue, type IcapFailure, icapHead } from './icap-response.js';
import { scanExchange } from './icap-scan.js';
import { IcapClosedError, IcapProtocolError, SocketReader } from './socket-reader.js';

/** How long OPTIONS answers stay valid: the ISTag is read again this often (seconds). */
export const OPTIONS_TTL_S = 60;
/** Preview bytes asked for in OPTIONS: enough for a client to send small bodies whole. */
export const PREVIEW_BYTES = 4096;

/** Writes with backpressure; IcapClosedError when the client is gone. */
export async function send(socket: Duplex, data: Buffer): Promise<void> {
  if (socket.destroyed || socket.writableEnded) throw new IcapClosedError();
  if (socket.write(data)) return;
  await new Promise<void>((resolve, reject) => {
    const settle = (error: Error | null) => {
      socket.off('drain', drained);
      socket.off('close', closed);
      if (error === null) resolve();
      else reject(error);
    };
    const drained = () => settle(null);
    const closed = () => settle(new IcapClosedError());
    socket.on('drain', drained);
    socket.on('close', closed);
  });
}

/** One request's answer so far: whether the connection may serve another. */
export interface Exchange {
  socket: Duplex;
  reader: SocketReader;
  request: IcapRequest;
  /** Set once the status line is written: an error after it can only close the connection. */
  answered: boolean;
}

/**
 * Serves one ICAP connection's requests, one after the other, until either side ends it.
 * `state.idle` is told when the connection starts and stops waiting for a request; false from it
 * (the server stops) ends the connection after the request under way.
 */
export async function serveIcapConnection(
  socket: Duplex,
  context: IcapContext,
  state: { idle: (idle: boolean) => boolean },
): Promise<void> {
  const reader = new SocketReader(socket);
  const client = (socket as { remoteAddress?: string }).remoteAddress ?? 'unknown';
  try {
    for (;;) {
      const head = await reader.readHead(
        MAX_ICAP_HEAD,
        context.keepAliveMs,
        `the ICAP head exceeds ${MAX_ICAP_HEAD} bytes`,
      );
      if (head === null) return;
      state.idle(false);
      const keepOpen = await serveRequest(socket, reader, head, context, client);
      if (!keepOpen || !state.idle(true)) return;
    }
  } catch (error) {
    // Between requests: an idle client timed out or broke the framing before any answer.
    if (error instanceof IcapProtocolError) {
      await answerFailure(socket, context, { status: 400, reason: error.message }, true).catch(
        () => undefined,
      );
    } else if (!(error instanceof IcapClosedError) && !isConnectionError(error)) {
      context.logger.error({ err: error, client }, 'an ICAP connection failed');
    }
  } finally {
    reader.close();
    if (!socket.destroyed) socket.end();
    // A client that never reads its answer cannot hold the connection.
    setTimeout(() => socket.destroy(), 5_000).unref();
  }
}

/** Serves one request; false when the connection must close after it. */
async function serveRequest(
  socket: Duplex,
  reader: SocketReader,
  head: Buffer,
  context: IcapContext,
  client: string,
): Promise<boolean> {
  const started = performance.now();
  let method = 'unknown';
  let service = 'unknown';
  let outcome: IcapOutcome = 'bad-request';
  let bytes = 0;
  let exchange: Exchange | null = null;
  try {
    const parsed = parseIcapHead(head);
    if (parsed.method === 'OPTIONS' || parsed.method === 'REQMOD' || parsed.method === 'RESPMOD') {
      method = parsed.method;
    }
    const name = serviceOf(parsed.uri);
    if (name !== null && context.settings.services.has(name)) service = name;
    if (method === 'unknown') {
      await answerFailure(
        socket,
        context,
        {
          status: 501,
          reason: `ICAP method ${headerValue(parsed.method).slice(0, 20)} is not implemented (OPTIONS, REQMOD, RESPMOD are)`,
        },
        true,
      );
      return false;
    }
    const icapMethod = method as IcapRequest['method'];
    const sections = parseEncapsulated(icapMethod, parsed.headers.get('encapsulated'));
    const bodySection = sections.at(-1)?.section;
    const headsLength = sections.at(-1)?.offset ?? 0;
    const heads =
      headsLength === 0 ? Buffer.alloc(0) : await reader.readExactly(headsLength, context.idleMs);
    const { requestHead, responseHead } = splitHeads(sections, heads);
    const allow = (parsed.headers.get('allow') ?? '').split(',').map((value) => value.trim());
    const request: IcapRequest = {
      method: icapMethod,
      service: name ?? '',
      headers: parsed.headers,
      requestHead,
      responseHead,
      body: bodySection === 'req-body' || bodySection === 'res-body' ? bodySection : null,
      preview: parsePreview(parsed.headers.get('preview')),
      allow204: allow.includes('204'),
      allow206: allow.includes('206'),
    };
    if (bodySection === 'opt-body') {
      // An OPTIONS body means nothing to this server: it is read and dropped, unheld.
      await answerFailure(
        socket,
        context,
        {
          status: 400,
          reason: 'OPTIONS bodies are not supported',
        },
        true,
      );
      return false;
    }
    if (name === null || !context.settings.services.has(name)) {
      await answerFailure(
        socket,
        context,
        {
          status: 404,
          reason: `no ICAP service "${headerValue(name ?? parsed.uri).slice(0, 64)}" here (${[...context.settings.services.keys()].join(', ')})`,
        },
        request.body !== null,
      );
      outcome = 'refused';
      return request.body === null;
    }
    if (icapMethod === 'OPTIONS') {
      await answerOptions(socket, context);
      outcome = 'options';
      return true;
    }
    exchange = { socket, reader, request, answered: false };
    const result = await scanExchange(exchange, context, client);
    outcome = result.outcome;
    bytes = result.bytes;
    return result.keepOpen;
  } catch (error) {
    if (error instanceof IcapClosedError || isConnectionError(error)) {
      // The client left in the middle: no answer, nothing passed.
      if (method !== 'unknown') outcome = 'error';
      throw error;
    }
    // Half an answer cannot be taken back: the connection closes, which the client sees as a failure.
    if (exchange?.answered === true) {
      context.logger.warn({ err: error, client }, 'an ICAP answer was cut short');
      socket.destroy();
      return false;
    }
    if (error instanceof IcapProtocolError) {
      outcome = 'bad-request';
      await answerFailure(socket, context, { status: error.status, reason: error.message }, true);
      return false;
    }
    context.logger.error({ err: error, client }, 'an ICAP request failed');
    outcome = 'error';
    await answerFailure(
      socket,
      context,
      { status: 500, reason: 'the request failed; nothing was passed' },
      true,
    );
    return false;
  } finally {
    context.metrics.served(method, service, outcome, bytes, (performance.now() - started) / 1000);
  }
}

async function answerOptions(socket: Duplex, context: IcapContext): Promise<void> {
  const headers: HeaderList = [
    ['Methods', 'RESPMOD, REQMOD'],
    ['Service', context.serverName],
    ['ISTag', await context.tag.current()],
    ['Encapsulated', 'null-body=0'],
    ['Max-Connections', String(context.maxConnections)],
    ['Options-TTL', String(OPTIONS_TTL_S)],
    // Not 206: a client offered 206 keeps the whole body to send it on later, so Squid stops
    // sending after its 64 KB buffer until it has an answer, which comes only after the scan.
    // (A client that offers 206 anyway gets it for clean content.)
    ['Allow', '204'],
    ['Preview', String(PREVIEW_BYTES)],
    ['Transfer-Preview', '*'],
    ['Service-ID', 'assay'],
    ['Date', new Date().toUTCString()],
  ];
  await send(socket, icapHead(200, headers));
}

/** An ICAP error: the status, why (`X-Assay-Error`), and whether the connection then closes. */
export async function answerFailure(
  socket: Duplex,
  context: IcapContext,
  failure: IcapFailure,
  close: boolean,
): Promise<void> {
  const headers: Array<[string, string]> = [
    ['ISTag', await context.tag.current()],
    ['Encapsulated', 'null-body=0'],
    ['X-Assay-Error', headerValue(failure.reason)],
    ['Date', new Date().toUTCString()],
  ];
  if (close) headers.push(['Connection', 'close']);
  await send(socket, icapHead(failure.status, headers));
}

/** A reset or broken pipe: the client went away, which is not the server's failure. */
function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'ERR_STREAM_DESTROYED';
}
