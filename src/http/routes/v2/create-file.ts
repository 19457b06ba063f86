import type { FastifyInstance } from 'fastify';
import { fileNameOfUrl } from '../../../domain/file-name.js';
import { type ApiVersion, hasMetadata, renderFileResult } from '../../../processing/file-result.js';
import type { Submission } from '../../../processing/process-content.js';
import { RemoteContentError } from '../../../processing/remote-content.js';
import { HttpError } from '../../http-error.js';
import { readUploadForm } from '../../multipart-submission.js';
import { submitterOf } from '../../plugins/authentication.js';
import { fileLocation } from './locations.js';

const REMOTE_STATUS = { refused: 400, 'too-large': 413, unavailable: 502 } as const;

/**
 * POST /files: synchronous processing; answers 201 with the result once every engine has spoken.
 * v2.2 also takes `location`, a URL to download instead of a `file` part.
 */
export default async function createFile(app: FastifyInstance, options: { version: ApiVersion }) {
  const { processor, remoteScans, config, outbound } = app.services;
  const { version } = options;

  app.post('/files', { config: { syncScan: true } }, async (request, reply) => {
    const principal = submitterOf(request);
    // The credit is taken before the body is read and given back if no result is recorded.
    const file = await processor.processSync(principal, async () => {
      const {
        file: scanned,
        fileName,
        fields,
      } = await readUploadForm(
        request,
        {
          maxFileSize: config.maxFileSize,
          acceptMetadata: hasMetadata(version),
          acceptLocation: version === 'v2.2',
          policy: outbound.fetch.policy,
        },
        (content) =>
          processor.scan(content, {
            categories: principal.detectionCategories,
            accountId: principal.accountId,
          }),
      );
      const submission: Submission = {
        principal,
        version,
        metadata: fields.metadata,
        callback: fields.callback,
        fileName: scanned !== null ? fileName : fileNameOfUrl(fields.location ?? ''),
      };
      if (scanned !== null) return { scanned, submission };
      if (fields.location === null) {
        const what =
          version === 'v2.2'
            ? 'a multipart part named file, or a location'
            : 'a multipart part named file';
        throw new HttpError(400, `no content: send ${what}`);
      }
      try {
        // A stalled or failing remote is final (502 naming it), never a 503 inviting a retry.
        const fetched = await remoteScans.fetchAndScan(fields.location, {
          receivedAt: new Date().toISOString(),
          categories: principal.detectionCategories,
          accountId: principal.accountId,
        });
        return { scanned: fetched.scanned, submission, events: [fetched.downloaded] };
      } catch (error) {
        // No verdict, so no result: an error status, which no client can mistake for clean.
        if (error instanceof RemoteContentError) {
          throw new HttpError(REMOTE_STATUS[error.reason], error.message);
        }
        throw error;
      }
    });
    return reply
      .code(201)
      .header('location', fileLocation(request, config.publicUrl, version, file.id))
      .send(renderFileResult(file, version));
  });
}
