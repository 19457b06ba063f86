import type { FastifyRequest } from 'fastify';
import type { ApiVersion } from '../../../processing/file-result.js';

/** Absolute URL of a file resource: the configured public URL, else the address the client used. */
export function fileLocation(
  request: FastifyRequest,
  publicUrl: string | null,
  version: ApiVersion,
  id: string,
): string {
  const base = publicUrl ?? `${request.protocol}://${request.host}`;
  return `${base}/${version}/files/${id}`;
}
