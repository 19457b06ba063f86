import type { FastifyInstance } from 'fastify';
import { HttpError } from '../../http-error.js';

const SCAN_RESOURCES = ['/', '/async', '/fetch'];

/**
 * v1.0 answers any other method on a scan resource with `oops` saying POST is required (400, the
 * code v1.0 has for a bad request), before credentials: the request could never succeed.
 */
export default async function postRequired(app: FastifyInstance) {
  for (const url of SCAN_RESOURCES) {
    app.route({
      method: ['GET', 'PUT', 'PATCH', 'DELETE'],
      url,
      // Not methods the resource allows: a 405's `Allow` leaves them out.
      config: { refusesMethod: true },
      handler: async (request) => {
        throw new HttpError(400, `POST is required: ${request.method} is not supported here`, {
          allow: 'POST',
        });
      },
    });
  }
}
