import type { FastifyInstance } from 'fastify';
import { fileIdOf, legacyResultOf, pendingResult } from '../../../processing/legacy-result.js';
import { HttpError } from '../../http-error.js';
import { principalOf } from '../../plugins/authentication.js';
import { legacyArguments, sendLegacy } from './legacy-reply.js';

/**
 * GET /api/scan/status/<request_id>: the stored result, `pending` while its job runs, 404 for an
 * id that is malformed, unknown or another account's.
 */
export default async function scanStatus(app: FastifyInstance) {
  const { processor } = app.services;

  app.get<{ Params: { requestId: string } }>('/status/:requestId', async (request, reply) => {
    const args = legacyArguments(request);
    const principal = principalOf(request);
    const id = fileIdOf(request.params.requestId);
    const notFound = new HttpError(404, `no scan with request_id ${request.params.requestId}`);
    if (id === null) throw notFound;
    const item = await processor.findItem(principal, id);
    if (item === null) throw notFound;
    if ('file' in item) return sendLegacy(reply, 200, legacyResultOf(item.file), args);
    return sendLegacy(reply, 200, pendingResult(id, item.pending.legacy?.checksum ?? null), args);
  });
}
