import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { HttpError } from '../http-error.js';

const CHALLENGE = { 'www-authenticate': 'Bearer realm="Assay metrics"' };

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * GET /metrics in Prometheus' text format: this process's metrics, or, in a child of
 * `serve --processes`, every child's summed. Never behind API keys; behind ASSAY_METRICS_TOKEN
 * (`Authorization: Bearer <token>`) when it is set, open otherwise.
 */
export default async function metrics(app: FastifyInstance) {
  const { config, metrics: serviceMetrics } = app.services;
  // Digests of equal length, compared in constant time: the token's length does not leak either.
  const expected = config.metricsToken === '' ? null : digest(config.metricsToken);

  app.get('/metrics', async (request, reply) => {
    if (expected !== null) {
      const given = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
      if (given === undefined || !timingSafeEqual(digest(given), expected)) {
        throw new HttpError(401, 'metrics need the bearer token of ASSAY_METRICS_TOKEN', CHALLENGE);
      }
    }
    let scraped: { contentType: string; text: string };
    try {
      scraped = await serviceMetrics.scrape();
    } catch (error) {
      throw new HttpError(
        503,
        'the metrics could not be gathered: retry shortly',
        { 'retry-after': '5' },
        error,
      );
    }
    return reply.type(scraped.contentType).send(scraped.text);
  });
}
