import type { FastifyInstance } from 'fastify';
import {
  LEGACY_CATEGORIES,
  legacyResultOf,
  newLegacyId,
} from '../../../processing/legacy-result.js';
import { legacySubmitterOf, rawBodyOf, refuseDeclaredOversize } from './legacy-access.js';
import { legacyArguments, sendLegacy } from './legacy-reply.js';

/**
 * POST /api/scan/: the raw body is the content, streamed into the engine as it arrives (never
 * held whole); 200 with clean or infected once scanned. A cut-off or oversize body records nothing.
 */
export default async function scan(app: FastifyInstance) {
  const { processor, config } = app.services;
  const maxBytes = config.legacyMaxPostSize;

  app.post('/', { config: { syncScan: true } }, async (request, reply) => {
    const args = legacyArguments(request);
    const principal = legacySubmitterOf(request);
    refuseDeclaredOversize(request, maxBytes);
    // The credit is taken before the body is read and given back if no result is recorded.
    const file = await processor.processSync(principal, async () => ({
      scanned: await processor.scan(rawBodyOf(request), {
        categories: LEGACY_CATEGORIES,
        maxBytes,
        accountId: principal.accountId,
      }),
      submission: { principal, version: 'v1.0', metadata: {}, callback: null },
      id: newLegacyId(),
    }));
    return sendLegacy(reply, 200, legacyResultOf(file), args);
  });
}
