import type { FastifyInstance } from 'fastify';
import { principalOf } from '../../plugins/authentication.js';

/** GET /ping: checks credentials and names the key that authenticated. */
export default async function ping(app: FastifyInstance) {
  app.get('/ping', async (request) => ({ message: 'pong', key: principalOf(request).keyId }));
}
