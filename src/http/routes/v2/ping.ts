import type { FastifyInstance } from 'fastify';
import type { PingBody } from '../../openapi/schemas.js';
import { principalOf } from '../../plugins/authentication.js';

/** GET /ping: checks credentials and names the key (or token) that authenticated. */
export default async function ping(app: FastifyInstance) {
  app.get('/ping', async (request) => {
    const principal = principalOf(request);
    return { message: 'pong', key: principal.tokenId ?? principal.keyId } satisfies PingBody;
  });
}
