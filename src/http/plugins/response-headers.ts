import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

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
 * Headers every response carries, errors and 404s included: runtime, host and request ids, CORS,
 * and `Content-Type: application/json` exactly (one client reads errors only on an exact match).
 */
export const responseHeaders = fp(async (app: FastifyInstance) => {
  const brand = app.services.config.headerBrand;
  const hostIdHeader = `x-${brand.toLowerCase()}-host-id`;
  const requestIdHeader = `x-${brand.toLowerCase()}-request-id`;
  const hostId = app.services.config.hostId;
  const cors = corsHeaders(hostIdHeader, requestIdHeader);

  app.addHook('onSend', async (request, reply, payload) => {
    reply.headers(cors);
    reply.header('x-runtime', `${Math.round(reply.elapsedTime)}ms`);
    reply.header(hostIdHeader, hostId);
    reply.header(requestIdHeader, request.id);
    const type = reply.getHeader('content-type');
    if (typeof type === 'string' && type.startsWith('application/json')) {
      reply.header('content-type', 'application/json');
    }
    return payload;
  });

  // A preflight needs no credentials and says yes to any origin.
  app.options('*', async (_request, reply) => {
    reply.header('access-control-max-age', '86400');
    return reply.code(200).send();
  });
});
