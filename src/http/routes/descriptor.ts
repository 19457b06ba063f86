import type { FastifyInstance } from 'fastify';
import { stringify } from 'yaml';
import type { ApiVersion } from '../../processing/file-result.js';
import { renderDocsPage } from '../openapi/docs-page.js';
import { buildDescriptor } from '../openapi/document.js';

/**
 * The published API descriptor (OpenAPI 3.1, JSON and YAML) of each version and the reference
 * page rendered from it, without credentials: outside the v2 scopes and their authenticate hook.
 * Built once at start; they depend only on the version and the configuration.
 */
export default async function descriptor(
  app: FastifyInstance,
  options: { versions: readonly ApiVersion[] },
) {
  const { config } = app.services;
  const latest = options.versions.at(-1);
  for (const version of options.versions) {
    const document = buildDescriptor({
      version,
      publicUrl: config.publicUrl,
      maxFileSize: config.maxFileSize,
      headerBrand: config.headerBrand,
    });
    const json = JSON.stringify(document, null, 2);
    const yaml = stringify(document);
    const page = renderDocsPage(document, version, options.versions);
    app.get(`/${version}/openapi.json`, async (_request, reply) =>
      reply.type('application/json').send(json),
    );
    app.get(`/${version}/openapi.yaml`, async (_request, reply) =>
      reply.type('application/yaml').send(yaml),
    );
    app.get(`/docs/${version}`, async (_request, reply) =>
      reply.type('text/html; charset=utf-8').send(page),
    );
    if (version === latest) {
      app.get('/docs', async (_request, reply) =>
        reply.type('text/html; charset=utf-8').send(page),
      );
    }
  }
}
