import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { limitConnections } from './connection/connection-limits.js';
import { continueWhenBodyIsRead } from './connection/expect-continue.js';
import consoleRoutes from './console/index.js';
import {
  clientErrorHandler,
  frameworkErrors,
  frameworkRefusals,
  rawErrorContext,
  watchExchanges,
} from './framework-errors.js';
import { legacyPrefix } from './legacy-path.js';
import { authentication } from './plugins/authentication.js';
import { browserRoot } from './plugins/browser-root.js';
import { proxyTrustWarnings } from './plugins/client-address.js';
import { errorHandler } from './plugins/error-handler.js';
import { requestMetrics } from './plugins/request-metrics.js';
import { requestTimeouts } from './plugins/request-timeouts.js';
import { responseHeaders } from './plugins/response-headers.js';
import { syncScanLimit } from './plugins/sync-scan-limit.js';
import { trustProxyOption } from './proxy-trust.js';
import bucketEvents from './routes/bucket-events.js';
import descriptor from './routes/descriptor.js';
import health from './routes/health.js';
import metrics from './routes/metrics.js';
import staticSamples from './routes/static.js';
import v1Routes from './routes/v1/index.js';
import v2Routes, { API_VERSIONS } from './routes/v2/index.js';
import type { Services } from './services.js';

/** A route as registered: one method, the full path with `:param` segments. */
export interface RouteEntry {
  method: string;
  url: string;
}

/**
 * The HTTP face of Assay: plugins for cross-cutting concerns, then thin routes. `healthOnly` (a
 * process of role `worker`): /health/live, /health/ready and /metrics, and 404 for everything else.
 */
export async function buildApp(
  services: Services,
  logger: Logger,
  { healthOnly = false }: { healthOnly?: boolean } = {},
): Promise<FastifyInstance> {
  const { tls, trustProxy } = services.config;
  const rawErrors = rawErrorContext(services.config);
  const app = Fastify({
    // pino's Logger is Fastify's logger; the cast keeps the app typed as the default instance.
    loggerInstance: logger as FastifyBaseLogger,
    genReqId: () => randomUUID(),
    // A client-supplied id could collide or lie; ours is always a fresh UUID.
    requestIdHeader: false,
    // Uploads stream through their routes' multipart reader and are limited there, not by bodyLimit.
    bodyLimit: 1024 * 1024,
    // Refused in the service's shape instead (see frameworkRefusals).
    return503OnClosing: false,
    // One rule for every route, as clients send `/auth/tokens/` and `/auth/tokens`: a path answers
    // the same with or without one trailing slash (`/files/async/` is `/files/async`, never an id).
    routerOptions: { ignoreTrailingSlash: true },
    // Router and parser errors in the service's shape, not Fastify's (which echoes the URL).
    frameworkErrors: frameworkErrors(rawErrors),
    clientErrorHandler: clientErrorHandler(rawErrors),
    // Only trusted proxies' X-Forwarded-For entries, read from the right, name the client; their
    // X-Forwarded-Proto/-Host are checked before a Location uses them (proxy-trust.ts).
    trustProxy: trustProxyOption(trustProxy),
    // The https server type differs only in its TLS fields; routes and hooks use none of them.
    ...((tls === null ? {} : { https: { cert: tls.cert, key: tls.key } }) as object),
  });
  app.decorate('services', services);
  // No route takes JSON or plain text: a body is read only by the routes that expect one, and any
  // other reaches its route unread (which answers 400, not Fastify's 415). Unrouted requests,
  // OPTIONS among them, never have their body parsed.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  // Every route as registered, so the published descriptor can be held to what is served.
  const routes: RouteEntry[] = [];
  app.decorate('registeredRoutes', routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
  // A client may half-close its socket once the request is sent (HTTP/1.0 habits, netcat):
  // without this, Node drops a request still being scanned instead of answering it.
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  // Node answers a request without Host with a bare 400 of its own; frameworkRefusals does, in
  // the service's shape and headers.
  (app.server as typeof app.server & { requireHostHeader: boolean }).requireHostHeader = false;
  watchExchanges(app.server);
  continueWhenBodyIsRead(app.server);
  const { config } = services;
  const connections = limitConnections(app.server, config, logger, (reason) =>
    services.metrics.connectionDropped(reason),
  );
  services.metrics.watchConnections({
    read: connections.count,
    limits: { total: config.maxConnections, perAddress: config.maxConnectionsPerAddress },
  });
  app.addHook('onClose', async () => connections.stop());
  await app.register(requestMetrics);
  if (!healthOnly) await app.register(browserRoot);
  await app.register(errorHandler);
  await app.register(frameworkRefusals);
  await app.register(requestTimeouts);
  await app.register(responseHeaders);
  await app.register(proxyTrustWarnings);
  if (healthOnly) {
    await app.register(health);
    await app.register(metrics);
    return app;
  }
  await app.register(authentication);
  await app.register(syncScanLimit);
  await app.register(health);
  await app.register(metrics);
  await app.register(staticSamples);
  await app.register(bucketEvents);
  await app.register(descriptor, { versions: API_VERSIONS });
  for (const version of API_VERSIONS) {
    await app.register(v2Routes, { prefix: `/${version}`, version });
  }
  await app.register(v1Routes, { prefix: legacyPrefix(services.config.legacyBaseUrl) });
  await app.register(consoleRoutes, { prefix: '/console' });
  return app;
}

declare module 'fastify' {
  interface FastifyInstance {
    registeredRoutes: readonly RouteEntry[];
  }
}

/** How often a closing server looks for connections that have become idle. */
const CLOSING_SWEEP_MS = 100;

/**
 * Stops taking connections and waits for the requests under way. A connection still reading the
 * rest of a refused body when the close began (error-handler.ts drains it) becomes idle only
 * later; Fastify closes idle connections once, at the start, so such a connection held shutdown
 * for the keep-alive timeout (72 s). Idle connections are closed as they appear instead.
 */
export async function closeApp(app: FastifyInstance): Promise<void> {
  const sweep = setInterval(() => app.server.closeIdleConnections(), CLOSING_SWEEP_MS);
  try {
    await app.close();
  } finally {
    clearInterval(sweep);
  }
}
