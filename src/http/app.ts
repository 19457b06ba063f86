import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { limitConnections } from './connection/connection-limits.js';
import { continueWhenBodyIsRead } from './connection/expect-continue.js';
import { clientErrorHandler, frameworkErrors } from './framework-errors.js';
import { authentication } from './plugins/authentication.js';
import { proxyTrustWarnings } from './plugins/client-address.js';
import { errorHandler } from './plugins/error-handler.js';
import { requestTimeouts } from './plugins/request-timeouts.js';
import { responseHeaders, serviceHeaders } from './plugins/response-headers.js';
import { syncScanLimit } from './plugins/sync-scan-limit.js';
import { trustProxyOption } from './proxy-trust.js';
import descriptor from './routes/descriptor.js';
import health from './routes/health.js';
import staticSamples from './routes/static.js';
import v1Routes, { legacyPrefix } from './routes/v1/index.js';
import v2Routes, { API_VERSIONS } from './routes/v2/index.js';
import type { Services } from './services.js';

/** A route as registered: one method, the full path with `:param` segments. */
export interface RouteEntry {
  method: string;
  url: string;
}

/** The HTTP face of Assay: plugins for cross-cutting concerns, then thin routes. */
export async function buildApp(services: Services, logger: Logger): Promise<FastifyInstance> {
  const { tls, trustProxy } = services.config;
  const app = Fastify({
    // pino's Logger is Fastify's logger; the cast keeps the app typed as the default instance.
    loggerInstance: logger as FastifyBaseLogger,
    genReqId: () => randomUUID(),
    // A client-supplied id could collide or lie; ours is always a fresh UUID.
    requestIdHeader: false,
    // Uploads stream through @fastify/multipart and are limited there, not by bodyLimit.
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
    // Router and parser errors in the service's shape, not Fastify's (which echoes the URL).
    frameworkErrors: frameworkErrors(
      legacyPrefix(services.config.legacyBaseUrl),
      serviceHeaders(services.config),
    ),
    clientErrorHandler: clientErrorHandler(serviceHeaders(services.config)),
    // Only trusted proxies' X-Forwarded-For entries, read from the right, name the client; their
    // X-Forwarded-Proto/-Host are checked before a Location uses them (proxy-trust.ts).
    trustProxy: trustProxyOption(trustProxy),
    // The https server type differs only in its TLS fields; routes and hooks use none of them.
    ...((tls === null ? {} : { https: { cert: tls.cert, key: tls.key } }) as object),
  });
  app.decorate('services', services);
  // Every route as registered, so the published descriptor can be held to what is served.
  const routes: RouteEntry[] = [];
  app.decorate('registeredRoutes', routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
  // A client may half-close its socket once the request is sent (HTTP/1.0 habits, netcat):
  // without this, Node drops a request still being scanned instead of answering it.
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  continueWhenBodyIsRead(app.server);
  const connections = limitConnections(app.server, services.config, logger);
  app.addHook('onClose', async () => connections.stop());
  await app.register(errorHandler);
  await app.register(requestTimeouts);
  await app.register(responseHeaders);
  await app.register(proxyTrustWarnings);
  await app.register(authentication);
  await app.register(syncScanLimit);
  await app.register(health);
  await app.register(staticSamples);
  await app.register(descriptor, { versions: API_VERSIONS });
  for (const version of API_VERSIONS) {
    await app.register(v2Routes, { prefix: `/${version}`, version });
  }
  await app.register(v1Routes, { prefix: legacyPrefix(services.config.legacyBaseUrl) });
  return app;
}

declare module 'fastify' {
  interface FastifyInstance {
    registeredRoutes: readonly RouteEntry[];
  }
}
