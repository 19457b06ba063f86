import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { authentication } from './plugins/authentication.js';
import { errorHandler } from './plugins/error-handler.js';
import { responseHeaders } from './plugins/response-headers.js';
import health from './routes/health.js';
import staticSamples from './routes/static.js';
import v1Routes, { legacyPrefix } from './routes/v1/index.js';
import v2Routes, { API_VERSIONS } from './routes/v2/index.js';
import type { Services } from './services.js';

/** The HTTP face of Assay: plugins for cross-cutting concerns, then thin routes. */
export async function buildApp(services: Services, logger: Logger): Promise<FastifyInstance> {
  const app = Fastify({
    // pino's Logger is Fastify's logger; the cast keeps the app typed as the default instance.
    loggerInstance: logger as FastifyBaseLogger,
    genReqId: () => randomUUID(),
    // A client-supplied id could collide or lie; ours is always a fresh UUID.
    requestIdHeader: false,
    // Uploads stream through @fastify/multipart and are limited there, not by bodyLimit.
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
  });
  app.decorate('services', services);
  // A client may half-close its socket once the request is sent (HTTP/1.0 habits, netcat):
  // without this, Node drops a request still being scanned instead of answering it.
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  await app.register(errorHandler);
  await app.register(responseHeaders);
  await app.register(authentication);
  await app.register(health);
  await app.register(staticSamples);
  for (const version of API_VERSIONS) {
    await app.register(v2Routes, { prefix: `/${version}`, version });
  }
  await app.register(v1Routes, { prefix: legacyPrefix(services.config.legacyBaseUrl) });
  return app;
}
