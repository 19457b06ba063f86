import type { FastifyInstance } from 'fastify';
import { type ApiVersion, renderFileResult } from '../../../processing/file-result.js';
import { HttpError } from '../../http-error.js';
import { principalOf } from '../../plugins/authentication.js';

/** GET /files/{id}: a result of the caller's account; 404 for unknown ids (clients poll on 404). */
export default async function getFile(app: FastifyInstance, options: { version: ApiVersion }) {
  app.get<{ Params: { id: string } }>('/files/:id', async (request) => {
    const file = await app.services.processor.findFile(principalOf(request), request.params.id);
    if (file === null) throw new HttpError(404, `no file with id ${request.params.id}`);
    return renderFileResult(file, options.version);
  });
}
