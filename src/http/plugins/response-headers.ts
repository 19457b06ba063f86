import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../../config.js';

/**
 * CORS for pages on any origin. A page's script sees only the response headers listed as exposed,
 * so every header a client reads is listed: Location of a created resource, the ids to quote in a
 * support request, Retry-After and the rate limit.
 */
function corsHeaders(hostIdHeader: string, requestIdHeader: string): Record<string, string> {
  const exposed = [
    'Location',
    'Retry-After',
    'X-Runtime',
    hostIdHeader,
    requestIdHeader,
    'X-RateLimit-Limit',
    'X-RateLimit-Remaining',
  ];
  return {
    'access-control-allow-origin': '*',
    'access-control-allow-headers': 'Authorization, Content-Type, User-Agent',
    'access-control-allow-methods': 'GET, POST, HEAD, OPTIONS, DELETE',
    'access-control-expose-headers': exposed.join(', '),
  };
}

/**
 * The headers every answer carries besides `X-Runtime`: CORS, the host id and the request id. Also
 * for answers written outside Fastify's reply (a connection closed for a timeout).
 */
export function serviceHeaders(
  config: Pick<Config, 'headerBrand' | 'hostId'>,
): (requestId: string) => Record<string, string> {
  const brand = config.headerBrand.toLowerCase();
  const hostIdHeader = `x-${brand}-host-id`;
  const requestIdHeader = `x-${brand}-request-id`;
  const fixed = { ...corsHeaders(hostIdHeader, requestIdHeader), [hostIdHeader]: config.hostId };
  return (requestId) => ({ ...fixed, [requestIdHeader]: requestId });
}

/**
 * Headers every response carries, errors and 404s included: runtime, host and request ids, CORS,
 * and `Content-Type: application/json` exactly (one client reads errors only on an exact match).
 */
export const responseHeaders = fp(async (app: FastifyInstance) => {
  const headersFor = serviceHeaders(app.services.config);

  // Callback hooks, here and in the other per-request plugins: an async one costs every request a
  // promise and a turn of the microtask queue.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.headers(headersFor(request.id));
    reply.header('x-runtime', `${Math.round(reply.elapsedTime)}ms`);
    const type = reply.getHeader('content-type');
    if (typeof type === 'string' && type.startsWith('application/json')) {
      reply.header('content-type', 'application/json');
    }
    done(null, payload);
  });

  // A preflight needs no credentials and says yes to any origin.
  app.options('*', async (_request, reply) => {
    reply.header('access-control-max-age', '86400');
    return reply.code(200).send();
  });
});
