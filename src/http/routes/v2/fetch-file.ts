import type { FastifyInstance } from 'fastify';
import { fileNameOfUrl } from '../../../domain/file-name.js';
import { redactUrl } from '../../../outbound/target.js';
import { type ApiVersion, hasMetadata } from '../../../processing/file-result.js';
import { HttpError } from '../../http-error.js';
import { FieldCollector, parseHttpUrl } from '../../multipart-submission.js';
import type { AcknowledgementBody } from '../../openapi/schemas.js';
import { submitterOf } from '../../plugins/authentication.js';
import { fileLocation } from './locations.js';

/**
 * POST /files/fetch (form-encoded `location`, `callback`, `metadata[key]`): 202 at once; the
 * download happens in the background, so the answer never waits on the remote host.
 */
export default async function fetchFile(app: FastifyInstance, options: { version: ApiVersion }) {
  const { config, intake, outbound } = app.services;
  const { version } = options;

  app.post('/files/fetch', async (request, reply) => {
    const principal = submitterOf(request);
    if (!(request.body instanceof URLSearchParams)) {
      throw new HttpError(
        400,
        'the request must be application/x-www-form-urlencoded with a location',
      );
    }
    const collector = new FieldCollector(outbound.fetch.policy, hasMetadata(version));
    let location: string | null = null;
    for (const [name, value] of request.body) {
      if (name === 'location') location = parseHttpUrl('location', value);
      else collector.add(name, value);
    }
    if (location === null)
      throw new HttpError(400, 'location is required: the URL of the content to fetch');
    const id = await intake.acceptFetch(
      principal,
      location,
      {
        apiVersion: version,
        metadata: collector.fields.metadata,
        callback: collector.fields.callback,
        fileName: fileNameOfUrl(location),
      },
      `received: fetch of ${redactUrl(location)}`,
    );
    return reply
      .code(202)
      .header('location', fileLocation(request, config.publicUrl, version, id))
      .send({ id } satisfies AcknowledgementBody);
  });
}
