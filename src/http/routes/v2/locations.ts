import type { FastifyRequest } from 'fastify';
import type { ApiVersion } from '../../../processing/file-result.js';

/** Absolute URL of a resource: the configured public URL, else the address the client used. */
export function resourceLocation(
  request: FastifyRequest,
  publicUrl: string | null,
  version: ApiVersion,
  path: string,
): string {
  const base = publicUrl ?? `${request.protocol}://${request.host}`;
  return `${base}/${version}/${path}`;
}

export function fileLocation(
  request: FastifyRequest,
  publicUrl: string | null,
  version: ApiVersion,
  id: string,
): string {
  return resourceLocation(request, publicUrl, version, `files/${id}`);
}
