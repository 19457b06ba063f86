import type { FastifyInstance } from 'fastify';
import { HttpError } from '../../http-error.js';
import type { TraceBody } from '../../openapi/schemas.js';
import { principalOf } from '../../plugins/authentication.js';

/** GET /files/{id}/trace (v2.2): what happened to an item so far, finished or not. */
export default async function getTrace(app: FastifyInstance) {
  const { processor } = app.services;

  app.get<{ Params: { id: string } }>('/files/:id/trace', async (request) => {
    const { id } = request.params;
    const events = await processor.findTrace(principalOf(request), id);
    if (events === null) throw new HttpError(404, `no file with id ${id}`);
    return { id, events } satisfies TraceBody;
  });
}
