import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { EmptyContentError } from '../../../processing/errors.js';
import { newLegacyId, pendingResult } from '../../../processing/legacy-result.js';
import { SpoolTooLargeError } from '../../../store/spool.js';
import { HttpError } from '../../http-error.js';
import { declaredLength } from '../../multipart-submission.js';
import { legacySubmitterOf, rawBodyOf, refuseDeclaredOversize } from './legacy-access.js';
import { legacyArguments, sendLegacy } from './legacy-reply.js';

/** Hashes content on its way through, for the checksum of the pending answer. */
async function* hashed(
  source: AsyncIterable<Buffer>,
  hash: ReturnType<typeof createHash>,
): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    hash.update(chunk);
    yield chunk;
  }
}

/**
 * POST /api/scan/async: the raw body is spooled to disk and the job committed before the answer,
 * 200 with `pending`; the result follows at /api/scan/status/<request_id>.
 */
export default async function scanAsync(app: FastifyInstance) {
  const { config, spool, jobs, spoolQuota } = app.services;
  const maxBytes = config.legacyMaxPostSize;

  app.post('/async', async (request, reply) => {
    const args = legacyArguments(request);
    const principal = legacySubmitterOf(request);
    refuseDeclaredOversize(request, maxBytes);
    // The quota is decided on the declared length before a byte is stored, and again as it streams.
    const reservation = await spoolQuota.reserve(principal.accountId, declaredLength(request));
    let committed = false;
    const id = newLegacyId();
    const receivedAt = new Date().toISOString();
    const sha1 = createHash('sha1');
    try {
      let spooled: { path: string; size: number };
      try {
        spooled = await spool.write(
          id,
          hashed(reservation.count(rawBodyOf(request)), sha1),
          maxBytes,
        );
      } catch (error) {
        if (error instanceof SpoolTooLargeError) {
          throw new HttpError(
            413,
            `the content exceeds the maximum POST size of ${maxBytes} bytes`,
          );
        }
        throw error;
      }
      const checksum = sha1.digest('hex');
      try {
        if (spooled.size === 0) throw new EmptyContentError();
        await jobs.submit(
          {
            id,
            accountId: principal.accountId,
            apiKeyId: principal.keyId,
            apiVersion: 'v1.0',
            kind: 'upload',
            state: 'pending',
            location: null,
            spoolPath: spooled.path,
            metadata: {},
            callback: null,
            attempts: 0,
            runAfter: receivedAt,
            creationDate: receivedAt,
            legacy: { callback: null, postCallback: null, format: args.format, checksum },
            size: spooled.size,
          },
          `received: v1.0 upload of ${spooled.size} bytes`,
        );
        committed = true;
      } catch (error) {
        // Nothing refers to the content unless the job was committed.
        await spool.remove(spooled.path);
        throw error;
      }
      return sendLegacy(reply, 200, pendingResult(id, checksum), args);
    } finally {
      // From the commit on, the store counts the job's bytes.
      reservation.release(committed);
    }
  });
}
