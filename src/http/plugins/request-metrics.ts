import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Counts every answered request by method, route template and status, with its duration. The
 * label is the route as registered (`/v2.2/files/:id`), never the path a client sent, so the
 * series stay bounded; a request no route matched is `unmatched`. A synchronous hook: nothing is
 * awaited or built per request beyond the counters' own work.
 */
export const requestMetrics = fp(async (app: FastifyInstance) => {
  const { metrics } = app.services;
  app.addHook('onResponse', (request, reply, done) => {
    metrics.requestServed(
      request.method,
      request.is404 ? undefined : request.routeOptions.url,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });
});
