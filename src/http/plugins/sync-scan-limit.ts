import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { HttpError } from '../http-error.js';
import { principalOf } from './authentication.js';

/** Seconds a client refused for capacity is asked to wait: synchronous scans mostly take less. */
const RETRY_AFTER_SECONDS = 2;

/**
 * Holds every route declared with `config: { syncScan: true }` to the service's caps on concurrent
 * synchronous scans, in all and per account. The slot is taken before the handler reads a byte of the body and released
 * when the handler is done, whichever way it ends, so a client that vanishes cannot leak it.
 */
export const syncScanLimit = fp(async (app: FastifyInstance) => {
  const { syncScans: limit, metrics } = app.services;
  app.addHook('onRoute', (route) => {
    if (route.config?.syncScan !== true) return;
    const handler = route.handler;
    route.handler = async function (
      this: FastifyInstance,
      request: FastifyRequest,
      reply: FastifyReply,
    ) {
      const release = limit.tryAcquire(principalOf(request).accountId);
      if (typeof release !== 'function') {
        metrics.requestRefused('sync-scan-capacity');
        const held =
          release.refusedBy === 'service'
            ? `${limit.capacity} synchronous scans are in progress`
            : `this account has ${limit.perAccount} synchronous scans in progress`;
        throw new HttpError(
          503,
          `busy: ${held}; retry after ${RETRY_AFTER_SECONDS} s or submit asynchronously`,
          { 'retry-after': String(RETRY_AFTER_SECONDS) },
        );
      }
      try {
        return await handler.call(this, request, reply);
      } finally {
        release();
      }
    };
  });
});

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route scans content synchronously: it counts toward ASSAY_SYNC_CONCURRENCY. */
    syncScan?: boolean;
  }
}
