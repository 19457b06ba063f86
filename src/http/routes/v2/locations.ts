import type { FastifyRequest } from 'fastify';
import type { ApiVersion } from '../../../processing/file-result.js';
import { requestOrigin } from '../../proxy-trust.js';

/**
 * Absolute URL of a resource: from ASSAY_PUBLIC_URL alone when set (Host and X-Forwarded-* are
 * then never read), else from the address the client used, as far as it can be believed.
 */
export function resourceLocation(
  request: FastifyRequest,
  publicUrl: string | null,
  version: ApiVersion,
  path: string,
): string {
  const base = publicUrl ?? requestOrigin(request);
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
