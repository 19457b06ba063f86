import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { rawErrorAnswer, rawErrorContext } from '../framework-errors.js';

interface WatchedRequest {
  request: FastifyRequest;
  response: ServerResponse;
  socket: Socket;
  startedAt: number;
  bytesRead: number;
  /** When the client last sent a byte, or the service last held its socket's reading. */
  progressAt: number;
}

/**
 * Ends requests whose client takes too long to send them: `ASSAY_REQUEST_TIMEOUT` for the whole
 * request, `ASSAY_REQUEST_IDLE_TIMEOUT` between bytes of its body. Either way the client gets a
 * 408 (when nothing was answered yet) and its connection is closed, so a trickling client cannot
 * hold a socket, a scan slot and a clamd connection for ever.
 *
 * Idle means the client sent nothing while the service was ready to read: while the service holds
 * the socket (backpressure from a slow clamd pauses it) the clock does not run, and once the body
 * is complete the request is no longer watched, so a client waiting for a slow scan's answer is
 * never cut. Node's own socket timeout counts any silence, which is why it is not used.
 */
export const requestTimeouts = fp(async (app: FastifyInstance) => {
  const { requestTimeoutMs, requestIdleTimeoutMs } = app.services.config;
  const rawErrors = rawErrorContext(app.services.config);
  const watched = new Set<WatchedRequest>();
  // Checked a few times per idle period: one timer for every request, not one per request.
  const checkEveryMs = Math.max(50, Math.min(1_000, requestIdleTimeoutMs / 4));
  let timer: NodeJS.Timeout | undefined;

  const cut = (entry: WatchedRequest, reason: string) => {
    watched.delete(entry);
    const { request, response, socket } = entry;
    request.log.info({ timeout: reason }, 'request not received in time; connection closed');
    // Written on the socket, outside the reply: the route is still waiting for the body, and
    // will fail on its own once the socket is gone.
    // v1.0 in the format of its query: a fetch's form, which may name one too, never arrived.
    if (!socket.destroyed && !response.headersSent) {
      socket.write(
        rawErrorAnswer(rawErrors, request.raw.url ?? null, {
          requestId: request.id,
          statusCode: 408,
          message: `request timeout: ${reason}`,
          runtimeMs: performance.now() - entry.startedAt,
        }),
      );
    }
    socket.destroy();
  };

  const check = () => {
    const now = performance.now();
    for (const entry of watched) {
      const { request, socket } = entry;
      if (request.raw.complete || socket.destroyed) {
        watched.delete(entry);
      } else if (now - entry.startedAt > requestTimeoutMs) {
        cut(entry, `the whole request took longer than ${requestTimeoutMs / 1000} s`);
      } else if (socket.bytesRead !== entry.bytesRead || socket.isPaused()) {
        entry.bytesRead = socket.bytesRead;
        entry.progressAt = now;
      } else if (now - entry.progressAt > requestIdleTimeoutMs) {
        cut(entry, `nothing received for ${requestIdleTimeoutMs / 1000} s`);
      }
    }
  };

  app.addHook('onRequest', (request, reply, done) => {
    watch(request, reply);
    done();
  });
  const watch = (request: FastifyRequest, reply: FastifyReply) => {
    if (request.raw.complete) return;
    const now = performance.now();
    const socket = request.raw.socket;
    const entry: WatchedRequest = {
      request,
      response: reply.raw,
      socket,
      startedAt: now,
      bytesRead: socket.bytesRead,
      progressAt: now,
    };
    watched.add(entry);
    // Let go as soon as the body is read, not at the next check: held up to a second, every
    // request's objects (parser, streams, clamd connection) outlived the young generation's
    // collections and filled the old one (a third of what 4 KB uploads promoted there).
    request.raw.once('end', () => watched.delete(entry));
  };
  app.addHook('onReady', async () => {
    timer = setInterval(check, checkEveryMs);
    timer.unref();
  });
  app.addHook('onClose', async () => {
    clearInterval(timer);
  });
});
