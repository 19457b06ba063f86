import type { FastifyInstance } from 'fastify';
import { HttpError } from '../../http-error.js';
import type { TraceBody } from '../../openapi/schemas.js';
import { principalOf } from '../../plugins/authentication.js';

/** GET /files/{id}/trace (v2.2): what happened to an item so far, finished or not. */
export default async function getTrace(app: FastifyInstance) {
  const { store } = app.services;

  app.get<{ Params: { id: string } }>('/files/:id/trace', async (request) => {
    const { accountId } = principalOf(request);
    const { id } = request.params;
    const known =
      (await store.files.findForAccount(accountId, id)) ??
      (await store.jobs.findForAccount(accountId, id));
    if (known === null) throw new HttpError(404, `no file with id ${id}`);
    return { id, events: await store.trace.list(id) } satisfies TraceBody;
  });
}
